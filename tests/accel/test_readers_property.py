"""Each reader of a tool's output, fed anything: its value, or its own one-line error, never another exception."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from promote.accel import ledger, quality, sweep
from promote.accel.arrays import OutputError, read_output
from promote.accel.bench import Metric
from promote.accel.commands import Arm, CommandError
from promote.accel.tokens import TokenError, read_tokens

FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Lines a hostile or broken tool might write: the right shape with hostile values, wrong types, deep nesting.
good = {"accel": "Fast", "outcome": "served", "reason": None, "seconds": 0.5, "request": {"n": 1}}
values = st.one_of(
    st.none(), st.booleans(), st.integers(-(10**500), 10**500), st.floats(), st.text(max_size=5),
    st.integers(0, 3000).map(lambda n: "[" * n + "]" * n),
)  # fmt: skip
shaped = st.builds(
    lambda key, value: json.dumps({**good, "item": "i", "passed": True, "ok": True, key: value}),
    st.sampled_from(["seconds", "request", "outcome", "drafted", "accepted", "item", "passed", "ok", "tokens"]),
    values,
)
raw_lines = st.one_of(shaped, st.text(max_size=30), st.integers(0, 5000).map(lambda n: '{"a":' * n))
files = st.one_of(st.lists(raw_lines, max_size=6).map(lambda ls: "\n".join(ls).encode()), st.binary(max_size=200))


def _write(factory: pytest.TempPathFactory, data: bytes) -> Path:
    path = factory.mktemp("out") / "out"
    path.write_bytes(data)
    return path


@FAST
@given(data=files)
def test_line_readers_count_what_they_cannot_read(tmp_path_factory: pytest.TempPathFactory, data: bytes) -> None:
    path = _write(tmp_path_factory, data)
    entries, bad = ledger.read(path, "Fast")
    assert bad >= 0 and all(isinstance(e, ledger.Entry) for e in entries)
    seen, bad = sweep.read_caller(path)
    assert bad >= 0 and len(seen) <= max(1, data.count(b"\n") + 1)
    with contextlib.suppress(quality.DuplicateItem):
        quality.read_items(path)


@FAST
@given(data=files)
def test_document_readers_give_their_own_error(tmp_path_factory: pytest.TempPathFactory, data: bytes) -> None:
    path = _write(tmp_path_factory, data)
    try:
        read_tokens(data.decode("utf-8", errors="replace"), "the parity output with the switch on")
    except TokenError as e:
        assert "\n" not in str(e)
    try:
        read_output(path, "the parity output with the switch on")
    except OutputError as e:
        assert "\n" not in str(e)
    try:
        Metric("tokens_per_s", path, round=1).read(Arm("baseline", ("bench", "{out}"), path.parent, {}))
    except CommandError as e:
        assert "\n" not in str(e) and str(path) not in str(e)
