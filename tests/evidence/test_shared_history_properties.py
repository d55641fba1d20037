"""Properties of the two readers of files promote did not write itself: a published evidence page (any JSON put
anywhere in it) and the history database (any bytes as `history.sqlite`)."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any, get_args

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from promote.core.bounded_json import INT_RANGE, JsonRejected
from promote.core.vocab import Fate
from promote.evidence.docs_history import outcomes
from promote.evidence.docs_page import SCHEMA_ID, read_page
from promote.evidence.history import DB_NAME, History, HistoryError, StoredRun, TestOutcome, store
from tests.evidence.test_docs_history_robust import page

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
INT_MAX, INT_MIN = INT_RANGE - 1, -INT_RANGE + 1
SCALARS = st.none() | st.booleans() | st.integers(INT_MIN, INT_MAX) | st.floats(allow_nan=False) | st.text()
VALUES = st.recursive(
    SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3), max_leaves=12
)
GOOD = page("r1", "2026-01-01T00:00:00", [["pkg", "t.py::test_x", "failed", "why", None, "flaky", None]])


def _paths(doc: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in `doc` a value sits (object keys, list indexes)."""
    found = [at]
    if isinstance(doc, dict):
        for k, v in doc.items():
            found += _paths(v, (*at, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            found += _paths(v, (*at, i))
    return found


PLACES = _paths(GOOD)[1:]


def _replaced(doc: Any, at: tuple[Any, ...], value: Any) -> Any:
    if not at:
        return value
    copy = dict(doc) if isinstance(doc, dict) else list(doc)
    copy[at[0]] = _replaced(doc[at[0]], at[1:], value)  # type: ignore[call-overload,index]
    return copy


def _stored(run: StoredRun) -> None:
    """`run` stored in a new history and read back: what the cache does with a page."""
    with tempfile.TemporaryDirectory() as folder:
        history = History(Path(folder))
        try:
            history.write(lambda db: store(db, run))
            assert history.get(run.run_id).tests == run.tests
        finally:
            history.close()


@FAST
@given(st.sampled_from(PLACES), VALUES)
def test_any_value_anywhere_in_a_published_page_is_a_run_none_or_the_one_error(at: tuple[Any, ...], value: Any) -> None:
    try:
        run = read_page(json.dumps(_replaced(GOOD, at, value)).encode(), max_bytes=1 << 20)
    except JsonRejected as e:
        assert e.kind in ("type", "number", "syntax", "depth", "size", "encoding")
        return
    if run is not None:
        _stored(run)  # what was accepted is what SQLite can hold: never a ProgrammingError or an OverflowError


@FAST
@given(st.binary(max_size=300))
def test_any_bytes_as_a_published_page_are_a_run_none_or_the_one_error(data: bytes) -> None:
    with contextlib.suppress(JsonRejected):
        read_page(data, max_bytes=1 << 20)


def _real_history(folder: Path) -> bytes:
    """The bytes of a real history holding a few runs (checkpointed: one file)."""
    history = History(folder)
    for i in range(3):
        tests = tuple(TestOutcome("pkg", f"t.py::test_{j}", "failed" if j % 3 else "passed") for j in range(40))
        history.record(StoredRun(f"r{i}", "test", f"2026-01-0{i + 1}", "x", None, "promote test", tests=tests))
    history.close()
    db = sqlite3.connect(folder / DB_NAME)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    return (folder / DB_NAME).read_bytes()


with tempfile.TemporaryDirectory() as _folder:
    REAL = _real_history(Path(_folder))


def _opened(data: bytes) -> None:
    """`data` as history.sqlite: a usable history (its runs listed, a run stored) or HistoryError, nothing else."""
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / DB_NAME).write_bytes(data)
        try:
            history = History(Path(folder))
        except HistoryError:
            return
        try:
            for run_id in history.run_ids():
                history.get(run_id)
            history.record(StoredRun("new", "test", "2027-01-01", "x", None, "promote test"))
            assert "new" in history.run_ids()
        except HistoryError:
            pass
        finally:
            history.close()


@FAST
@given(st.binary(max_size=9000))
def test_any_bytes_as_the_history_are_a_usable_history_or_the_one_error(data: bytes) -> None:
    _opened(data)


@FAST
@given(st.lists(st.tuples(st.integers(0, len(REAL) - 1), st.binary(min_size=1, max_size=64)), min_size=1, max_size=6))
def test_a_real_history_with_any_bytes_overwritten_is_usable_or_the_one_error(hits: list[tuple[int, bytes]]) -> None:
    data = bytearray(REAL)
    for offset, chunk in hits:
        data[offset : offset + len(chunk)] = chunk
    _opened(bytes(data[: len(REAL)]))


def test_a_page_holding_every_fate_the_history_writes_is_read_back_whole() -> None:
    # The writer of a page's `outcomes` and the shared history's reader share one list of fates: a deselected test
    # or one its pytest never started is kept, never the reason a page is skipped.
    tests = tuple(
        TestOutcome("pkg", f"t.py::test_{fate}", fate, 0.0, "local", "why" if fate != "passed" else None)
        for fate in get_args(Fate)
    )
    run = StoredRun("r1", "audit", "2026-01-01T00:00:00", "x", "c" * 40, "promote audit", tests=tests)
    run = replace(run, stations={"pkg": "local"})
    doc = {
        "$schema": SCHEMA_ID,
        "run": "r1",
        "provenance": {"finished": run.started, "command": run.command},
        "outcomes": outcomes(run),
    }
    doc["outcomes"]["collected"] = {"pkg": len(tests)}

    read = read_page(json.dumps(doc).encode(), max_bytes=1 << 20)

    assert read is not None
    assert {(t.nodeid, t.outcome) for t in read.tests} == {
        (t.nodeid, t.outcome) for t in tests if t.outcome != "passed"
    }
    assert {"deselected", "not-run"} <= {t.outcome for t in read.tests}
