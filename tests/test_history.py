"""The run history (real SQLite files) and the deltas between runs."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from promote.deltas import compare
from promote.findings import Finding
from promote.history import MIGRATIONS, History, HistoryError, StoredRun, TestOutcome


def run(run_id: str, started: str, outcomes: dict[str, str], package: str = "pkg") -> StoredRun:
    return StoredRun(
        run_id=run_id,
        kind="audit",
        started=started,
        finished=started,
        commit="a" * 40,
        command="promote audit",
        tests=tuple(TestOutcome(package, nodeid, outcome) for nodeid, outcome in outcomes.items()),
    )


def test_schema_is_versioned_and_a_run_round_trips(tmp_path: Path) -> None:
    history = History(tmp_path)
    stored = StoredRun(
        run_id="r1",
        kind="test",
        started="2026-11-29T10:00:00.000000+00:00",
        finished="2026-11-29T10:01:00.000000+00:00",
        commit="b" * 40,
        command="promote test",
        mirrors={"origin": "c" * 40, "laptop": None},
        stations={"pkg": "local (linux-x86_64)"},
        gates={"tested": "pass"},
        tests=(TestOutcome("pkg", "t.py::a", "passed", 0.5, "local"), TestOutcome("pkg", "t.py::b", "failed")),
        findings=(Finding("leaked-state", "warning", "t.py::a", "os.environ[X]: <unset> -> '1'", "t.py::a"),),
    )
    history.record(stored)
    history.close()

    version = sqlite3.connect(tmp_path / "history.sqlite").execute("PRAGMA user_version").fetchone()[0]
    assert version == len(MIGRATIONS)
    again = History(tmp_path)
    assert again.get("r1") == stored
    assert again.run_ids() == ["r1"]


def test_a_newer_schema_is_refused_with_a_clear_error(tmp_path: Path) -> None:
    History(tmp_path).close()
    db = sqlite3.connect(tmp_path / "history.sqlite")
    db.execute(f"PRAGMA user_version = {len(MIGRATIONS) + 1}")
    db.commit()
    db.close()
    with pytest.raises(HistoryError, match="written by a newer promote"):
        History(tmp_path)


def test_unknown_run_names_recent_ones(tmp_path: Path) -> None:
    history = History(tmp_path)
    history.record(run("r1", "2026-01-01T00:00:00", {}))
    with pytest.raises(HistoryError, match=r"no run 'zz'.*recent: r1"):
        history.get("zz")


def test_previous_comparable_run_shares_a_package(tmp_path: Path) -> None:
    history = History(tmp_path)
    history.record(run("r1", "2026-01-01T00:00:01", {"a": "passed"}, package="pkg"))
    history.record(run("r2", "2026-01-01T00:00:02", {"a": "passed"}, package="other"))
    third = run("r3", "2026-01-01T00:00:03", {"a": "passed"}, package="pkg")
    history.record(third)
    previous = history.previous(third)
    assert previous is not None and previous.run_id == "r1"


def test_fixes_are_credited_and_filtered_failures_are_not_fixes() -> None:
    before = run(
        "r1",
        "1",
        {
            "t.py::fixed": "failed",
            "t.py::skipped_now": "failed",
            "t.py::xfail_now": "error",
            "t.py::deleted": "failed",
            "t.py::green": "passed",
            "t.py::breaks": "passed",
            "old.py::test_moved": "failed",
        },
    )
    now = run(
        "r2",
        "2",
        {
            "t.py::fixed": "passed",
            "t.py::skipped_now": "skipped",
            "t.py::xfail_now": "xfailed",
            "t.py::green": "passed",
            "t.py::breaks": "failed",
            "new.py::test_moved": "passed",
        },
    )

    deltas = compare(now, before)

    assert (deltas.passed_before, deltas.passed_now) == (2, 3)
    assert deltas.headline == "3 now pass where 2 did"
    assert [(d.nodeid, d.renamed_from) for d in deltas.fixed] == [
        ("t.py::fixed", None),
        ("new.py::test_moved", "old.py::test_moved"),
    ]
    assert [(d.nodeid, d.after) for d in deltas.filtered] == [
        ("t.py::skipped_now", "skipped"),
        ("t.py::xfail_now", "xfailed"),
        ("t.py::deleted", "disappeared"),
    ]
    assert [d.nodeid for d in deltas.newly_failing] == ["t.py::breaks"]
    findings = deltas.findings()
    assert {(f.check, f.subject, f.severity) for f in findings} == {
        ("filtered-not-fixed", "t.py::skipped_now", "error"),
        ("filtered-not-fixed", "t.py::xfail_now", "error"),
        ("filtered-not-fixed", "t.py::deleted", "error"),
    }


def test_first_run_has_nothing_to_compare() -> None:
    deltas = compare(run("r1", "1", {"a": "passed"}), None)
    assert deltas.headline == "1 pass; no earlier run to compare with"
    assert deltas.findings() == []
