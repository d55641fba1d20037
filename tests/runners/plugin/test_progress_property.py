"""The progress log read back fed anything a relay or a dying process could leave: its events, never an exception.

Over a fleet the lines come from other machines through xdist's channel, so the reader is the boundary.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from promote.runners.plugin.progress import _TYPES, ProgressEvent, read_progress, unfinished
from promote.runners.summary import recovered

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

finish = {"worker": "gw0", "t": 1.5, "event": "finish", "nodeid": "t.py::test_x", "index": 1, "outcome": "failed"}
values = st.one_of(
    st.none(), st.booleans(), st.integers(-(10**30), 10**30), st.floats(), st.text(max_size=5),
    st.lists(st.one_of(st.integers(), st.text(max_size=3), st.dictionaries(st.text(max_size=3), st.integers())),
             max_size=2),
    st.integers(0, 3000).map(lambda n: "[" * n + "]" * n),
)  # fmt: skip
keys = st.sampled_from([*ProgressEvent.__dataclass_fields__, "other"])
shaped = st.builds(lambda key, value: json.dumps({**finish, key: value}), keys, values)
# A finish line's records, findings and leaks: dicts of the wrong shape, as a damaged relay could leave them.
carried = st.builds(
    lambda key, items: json.dumps({**finish, key: items}),
    st.sampled_from(["records", "findings", "leaked"]),
    st.lists(
        st.dictionaries(st.sampled_from(["nodeid", "outcome", "check", "test", "changes", "x"]), values), max_size=2
    ),
)
raw = st.one_of(shaped, carried, st.text(max_size=30), st.integers(0, 5000).map(lambda n: '{"a":' * n))
logs = st.one_of(st.lists(raw, max_size=6).map(lambda ls: "\n".join(ls).encode()), st.binary(max_size=200))


@FAST
@given(data=logs)
def test_a_damaged_progress_log_reads_as_events_or_nothing(
    tmp_path_factory: pytest.TempPathFactory, data: bytes
) -> None:
    out = tmp_path_factory.mktemp("part")
    (out / "progress-gw0.jsonl").write_bytes(data)

    events = read_progress(out / "progress-gw0.jsonl")
    found = recovered(out, set())
    running = unfinished(out / "progress-gw0.jsonl")  # the live reader's view, as the runner follows a worker

    for e in events:
        assert isinstance(e.event, str) and isinstance(e.worker, str) and isinstance(e.t, (int, float))
        assert e.index is None or (isinstance(e.index, int) and not isinstance(e.index, bool))
        assert math.isfinite(e.t) and (e.duration_s is None or math.isfinite(e.duration_s))
        assert all(isinstance(r, dict) for r in e.records or ())
    assert len(found.tests) <= sum(len(e.records or ()) + 1 for e in events)
    assert all(isinstance(test, str) for test in running)


def test_a_line_of_the_wrong_shape_is_skipped_and_its_neighbours_kept(tmp_path: Path) -> None:
    good = json.dumps(finish)
    nan = json.dumps({**finish, "event": "start", "t": float("nan")})
    lines = [good, json.dumps({**finish, "index": "one"}), json.dumps({"event": "finish"}), "[1]", nan, good]
    (tmp_path / "progress-gw0.jsonl").write_text("\n".join(lines) + "\n")

    events = read_progress(tmp_path / "progress-gw0.jsonl")

    assert [(e.event, e.index) for e in events] == [("finish", 1), ("finish", 1)]


def test_every_field_of_an_event_has_a_type_the_reader_checks() -> None:
    # A field added to ProgressEvent and not to the reader's table would be dropped from every line read.
    assert set(_TYPES) == set(ProgressEvent.__dataclass_fields__)
