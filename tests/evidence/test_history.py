"""The run history (real SQLite files) and the deltas between runs."""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest

from promote.core.findings import Finding
from promote.evidence.deltas import compare
from promote.evidence.history import MIGRATIONS, History, HistoryError, StoredRun, TestOutcome


def run(run_id: str, started: str, outcomes: dict[str, str], package: str = "pkg", commit: str = "") -> StoredRun:
    return StoredRun(
        run_id=run_id,
        kind="audit",
        started=started,
        finished=started,
        commit=commit or run_id.encode().hex().ljust(40, "0"),  # each run on a commit of its own unless told
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


def test_previous_comparable_run_ran_the_same_package(tmp_path: Path) -> None:
    history = History(tmp_path)
    history.record(run("r1", "2026-01-01T00:00:01", {"a": "passed"}, package="pkg"))
    history.record(run("r2", "2026-01-01T00:00:02", {"a": "passed"}, package="other"))
    third = run("r3", "2026-01-01T00:00:03", {"a": "passed"}, package="pkg")
    history.record(third)
    previous = history.previous(third)
    assert previous is not None and previous.run_id == "r1"


def stored(run_id: str, started: str, *packages: str, kind: str = "test") -> StoredRun:
    return StoredRun(
        run_id=run_id,
        kind=kind,
        started=started,
        finished=started,
        commit=None,
        command=f"promote {kind}",
        tests=tuple(TestOutcome(package, f"t.py::{run_id}", "passed") for package in packages),
    )


def previous_by_scan(history: History, of: StoredRun) -> str | None:
    """previous() by brute force: every earlier run loaded until one ran every package `of` ran."""
    rows = history._db.execute(
        "SELECT id FROM runs WHERE started < ? OR (started = ? AND id < ?) ORDER BY started DESC, id DESC",
        (of.started, of.started, of.run_id),
    ).fetchall()
    for (run_id,) in rows:
        if of.packages and of.packages <= history.get(run_id).packages:
            return str(run_id)
    return None


def previous_id(history: History, of: StoredRun) -> str | None:
    found = history.previous(of)
    return None if found is None else found.run_id


def test_previous_is_none_without_an_earlier_comparable_run(tmp_path: Path) -> None:
    history = History(tmp_path)
    first = stored("r1", "2026-01-01T00:00:01", "pkg")
    assert history.previous(first) is None
    history.record(first)
    assert history.previous(first) is None, "a run is not its own previous"
    later = stored("r2", "2026-01-01T00:00:02", "other")
    history.record(later)
    assert history.previous(later) is None, "r1 shares no package with r2"
    assert history.previous(stored("r3", "2026-01-01T00:00:03")) is None, "a run without tests compares with none"


def test_previous_ran_every_package_so_a_package_run_never_sets_a_full_runs_baseline(tmp_path: Path) -> None:
    history = History(tmp_path)
    history.record(stored("r1", "2026-01-01T00:00:01", "a", "b"))
    history.record(stored("r2", "2026-01-01T00:00:02", "b"))  # promote test --package b
    history.record(stored("r3", "2026-01-01T00:00:03", "d"))
    assert previous_id(history, stored("r4", "2026-01-01T00:00:04", "a", "b")) == "r1", "the --package run is skipped"
    assert previous_id(history, stored("r4", "2026-01-01T00:00:04", "b")) == "r2", "a --package run: last with b"
    assert previous_id(history, stored("r4", "2026-01-01T00:00:04", "a")) == "r1"
    assert previous_id(history, stored("r4", "2026-01-01T00:00:04", "b", "x")) is None, "no run had both"


def test_previous_orders_same_second_runs_by_id(tmp_path: Path) -> None:
    history = History(tmp_path)
    same = "2026-01-01T00:00:05"
    for run_id in ("m", "a", "z"):
        history.record(stored(run_id, same, "pkg"))
    history.record(stored("b", "2026-01-01T00:00:04", "pkg"))
    history.record(stored("0", "2026-01-01T00:00:06", "pkg"))
    assert previous_id(history, stored("z", same, "pkg")) == "m"
    assert previous_id(history, stored("m", same, "pkg")) == "a"
    assert previous_id(history, stored("a", same, "pkg")) == "b", "same second, smaller id only: then earlier seconds"
    assert previous_id(history, stored("0", "2026-01-01T00:00:06", "pkg")) == "z", "a smaller id is not earlier"


def test_previous_crosses_kinds_and_takes_an_unstored_runs_own_packages(tmp_path: Path) -> None:
    history = History(tmp_path)
    history.record(stored("r1", "2026-01-01T00:00:01", "pkg", kind="audit"))
    history.record(stored("r2", "2026-01-01T00:00:02", "other", kind="audit"))
    history.record(stored("r3", "2026-01-01T00:00:03", "pkg", kind="test"))
    # an audit asks before it records itself, and may run other packages than a stored run of the same id had
    history.record(stored("r4", "2026-01-01T00:00:04", "pkg", kind="test"))
    pending = stored("r4", "2026-01-01T00:00:04", "other", kind="test")
    previous = history.previous(pending)
    assert previous is not None and (previous.run_id, previous.kind) == ("r2", "audit")
    assert previous == history.get("r2"), "the run comes back in full"
    previous = history.previous(stored("r5", "2026-01-01T00:00:05", "pkg", kind="audit"))
    assert previous is not None and (previous.run_id, previous.kind) == ("r4", "test")


def test_previous_agrees_with_scanning_every_earlier_run(tmp_path: Path) -> None:
    history = History(tmp_path)
    runs = []
    for n in range(60):
        # few distinct seconds and ids out of time order, so ties and id order matter; some runs have no tests
        packages = [p for i, p in enumerate(("a", "b", "c", "d")) if (n * 7 + i * 3) % 5 == 0]
        kind = ("test", "audit")[n % 2]
        runs.append(stored(f"r{(n * 37) % 61:02d}", f"2026-01-01T00:00:{n % 9:02d}", *packages, kind=kind))
    for each in runs:
        history.record(each)
    expected = [previous_by_scan(history, each) for each in runs]
    assert [previous_id(history, each) for each in runs] == expected
    assert sum(e is not None for e in expected) > 30 and expected.count(None) > 3, "both outcomes are exercised"


def test_previous_loads_only_the_run_it_returns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    history = History(tmp_path)
    history.record(stored("r000", "2026-01-01T00:00:00", "pkg"))
    for n in range(1, 50):
        history.record(stored(f"r{n:03d}", f"2026-01-01T00:01:{n:02d}", "other"))
    loaded: list[str] = []
    get = History.get
    monkeypatch.setattr(History, "get", lambda self, run_id: loaded.append(run_id) or get(self, run_id))
    assert previous_id(history, stored("r999", "2026-01-02T00:00:00", "pkg")) == "r000"
    assert loaded == ["r000"]


def test_a_schema_1_database_is_migrated_and_keeps_its_runs(tmp_path: Path) -> None:
    db = sqlite3.connect(tmp_path / "history.sqlite")
    db.executescript(MIGRATIONS[0])
    db.execute("PRAGMA user_version = 1")
    for run_id, started, package in (("r1", "2026-01-01T00:00:01", "pkg"), ("r2", "2026-01-01T00:00:02", "other")):
        db.execute(
            "INSERT INTO runs VALUES (?, 'test', ?, ?, NULL, 'promote test', '{}', '{}', '{}')",
            (run_id, started, started),
        )
        db.execute("INSERT INTO tests VALUES (?, ?, 't.py::a', 'passed', 0.5, 'local')", (run_id, package))
    db.commit()
    db.close()

    history = History(tmp_path)
    assert history.run_ids() == ["r2", "r1"]
    previous = history.previous(stored("r3", "2026-01-01T00:00:03", "pkg"))
    assert previous is not None and previous.run_id == "r1"
    assert previous.tests == (TestOutcome("pkg", "t.py::a", "passed", 0.5, "local"),)
    assert previous.interrupted is False
    history.close()

    db = sqlite3.connect(tmp_path / "history.sqlite")
    assert db.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS) == 6
    indexes = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'runs'")}
    assert "runs_started_id" in indexes and "runs_started" not in indexes
    plan = " ".join(r[3] for r in db.execute(
        "EXPLAIN QUERY PLAN SELECT id FROM runs WHERE (started, id) < (?, ?) ORDER BY started DESC, id DESC LIMIT 1",
        ("x", "y"),
    ))  # fmt: skip
    assert "runs_started_id" in plan and "TEMP B-TREE" not in plan
    # Each test id knows the newest run that has it, as a run stored now would set it.
    last = db.execute(
        "SELECT i.last, MAX(o.run) FROM test_ids AS i JOIN outcomes AS o ON o.test = i.id GROUP BY i.id"
    ).fetchall()
    assert last and all(mine == newest for mine, newest in last)


def test_an_interrupted_migration_runs_again(tmp_path: Path) -> None:
    db = sqlite3.connect(tmp_path / "history.sqlite")
    db.executescript(MIGRATIONS[0])
    db.executescript("CREATE INDEX runs_started_id ON runs(started, id);")  # applied, user_version not yet bumped
    db.execute("PRAGMA user_version = 1")
    db.commit()
    db.close()
    History(tmp_path).close()
    db = sqlite3.connect(tmp_path / "history.sqlite")
    assert db.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)


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
    assert deltas.first and deltas.headline == "first run of these packages: 1 pass, nothing earlier to compare with"
    assert deltas.findings() == []


def test_an_interrupted_run_is_kept_but_never_the_run_compared_with(tmp_path: Path) -> None:
    history = History(tmp_path)
    history.record(stored("r1", "2026-01-01T00:00:01", "pkg"))
    history.record(replace(stored("r2", "2026-01-01T00:00:02", "pkg"), interrupted=True))

    assert history.get("r2").interrupted is True
    previous = history.previous(stored("r3", "2026-01-01T00:00:03", "pkg"))
    assert previous is not None and previous.run_id == "r1"
    history.close()


def test_a_package_run_between_two_full_runs_does_not_move_the_deltas(tmp_path: Path) -> None:
    def full(run_id: str, started: str, proxy_green: int) -> StoredRun:
        tests = [TestOutcome("mlx", f"t.py::m{i}", "passed") for i in range(17)]
        tests += [TestOutcome("proxy", f"t.py::p{i}", "passed" if i < proxy_green else "failed") for i in range(6)]
        return replace(stored(run_id, started), tests=tuple(tests))

    history = History(tmp_path)
    history.record(full("r1", "2026-01-01T00:00:01", 5))
    proxy_only = replace(
        stored("r2", "2026-01-01T00:00:02"),
        tests=tuple(TestOutcome("proxy", f"t.py::p{i}", "passed") for i in range(6)),
    )  # promote test --package proxy
    assert compare(proxy_only, history.previous(proxy_only)).headline == "6 now pass where 5 did"
    history.record(proxy_only)
    third = full("r3", "2026-01-01T00:00:03", 6)

    deltas = compare(third, history.previous(third))

    assert deltas.previous == "r1" and deltas.headline == "23 now pass where 22 did"
    assert [d.nodeid for d in deltas.fixed] == ["t.py::p5"]
    history.close()


def test_a_red_test_now_blocked_for_a_missing_requirement_is_not_called_filtered() -> None:
    before = run("r1", "1", {"t.py::needs_model": "error", "t.py::skipped_now": "failed"})
    now = run("r2", "2", {"t.py::needs_model": "blocked", "t.py::skipped_now": "skipped"})

    deltas = compare(now, before)

    assert [(d.nodeid, d.after) for d in deltas.filtered] == [("t.py::skipped_now", "skipped")]
    assert deltas.fixed == () and deltas.newly_failing == ()


def test_on_one_commit_a_flip_is_flaky_not_fixed_nor_newly_failing() -> None:
    sha = "8228aec" + "0" * 33
    before = run("r1", "1", {"t.py::flaky": "failed", "t.py::other": "passed", "t.py::gone": "failed"}, commit=sha)
    now = run("r2", "2", {"t.py::flaky": "passed", "t.py::other": "failed"}, commit=sha)

    deltas = compare(now, before, tally=lambda package, test: (2, 7))

    assert deltas.fixed == () and deltas.newly_failing == ()
    assert [(d.nodeid, d.after, d.failed_of) for d in deltas.flipped] == [
        ("t.py::flaky", "passed", (2, 7)),
        ("t.py::other", "failed", (2, 7)),
    ]
    assert [d.nodeid for d in deltas.filtered] == ["t.py::gone"], "a red test gone is filtered on any commit"
    assert deltas.to_json()["same_commit"][0]["flaky"] == {"failed": 2, "runs": 7}
    # The same two runs on two commits: a fix and a new failure, as before.
    elsewhere = compare(run("r2", "2", {"t.py::flaky": "passed", "t.py::other": "failed"}), before)
    assert [d.nodeid for d in elsewhere.fixed] == ["t.py::flaky"] and elsewhere.flipped == ()
    assert [d.nodeid for d in elsewhere.newly_failing] == ["t.py::other"]


def test_pruning_keeps_the_newest_runs_in_the_same_transaction(tmp_path: Path) -> None:
    history = History(tmp_path)
    for n in range(6):
        history.record(stored(f"r{n}", f"2026-01-01T00:00:0{n}", "pkg"), keep=4)
    assert history.run_ids() == ["r5", "r4", "r3", "r2"]
    assert history.read("SELECT COUNT(*) FROM outcomes")[0][0] == 4
    assert history.read("SELECT COUNT(*) FROM findings")[0][0] == 0
    assert [r.tests[0].nodeid for r in map(history.get, history.run_ids())] == [f"t.py::r{n}" for n in (5, 4, 3, 2)]
    # Each run had a test id of its own (a parameter drawn at random): the ids of the pruned runs go with them.
    assert sorted(r[0] for r in history.read("SELECT nodeid FROM test_ids")) == [f"t.py::r{n}" for n in (2, 3, 4, 5)]
    history.close()
