"""The runs a test's story is read over, loaded from the history in a few queries: every run's counts, and only
the tests that did something other than pass (the rest of a 10,000-test suite has no story and is never read)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from promote.core.vocab import is_red
from promote.evidence.history import SWITCH_KIND, History, StoredRun, TestOutcome

Key = tuple[str, str]  # (package, test id)


@dataclass(frozen=True)
class WindowRun:
    """One run as a story reads it: when, on which commit, its gates, and how many tests each package collected."""

    run_id: str
    started: str
    commit: str | None
    kind: str
    gates: dict[str, str]
    collected: dict[str, int]  # package -> tests collected (every outcome)


@dataclass(frozen=True)
class Fall:
    """A package that collected fewer tests than in its previous run: both runs' test ids, to name what went."""

    package: str
    before: WindowRun
    after: WindowRun
    gone: tuple[str, ...]  # ids in `before` and not in `after`
    appeared: tuple[str, ...]  # ids in `after` and not in `before` (a rename is one gone and one appeared)


@dataclass(frozen=True)
class Window:
    """The newest runs (oldest first), and each test that did not pass in one of them, run by run."""

    runs: tuple[WindowRun, ...]
    outcomes: dict[Key, dict[str, TestOutcome]]  # (package, test) -> run id -> its outcome there
    falls: tuple[Fall, ...] = ()


def _runs(history: History, limit: int, pending: StoredRun | None) -> list[WindowRun]:
    rows = history.read(
        "SELECT id, started, commit_sha, kind, gates FROM runs WHERE interrupted = 0 AND kind != ?"
        " AND id != ? ORDER BY started DESC, id DESC LIMIT ?",
        (SWITCH_KIND, pending.run_id if pending else "", limit - (pending is not None)),
    )
    runs = [WindowRun(r[0], r[1], r[2], r[3], json.loads(r[4]), {}) for r in reversed(rows)]
    if runs:
        counted: dict[str, dict[str, int]] = {r.run_id: r.collected for r in runs}
        for run_id, package, n in history.read(
            f"SELECT run_id, package, COUNT(*) FROM tests WHERE run_id IN ({_marks(runs)}) GROUP BY run_id, package",
            tuple(r.run_id for r in runs),
        ):
            counted[run_id][package] = n
    if pending is not None:
        collected: dict[str, int] = {}
        for t in pending.tests:
            collected[t.package] = collected.get(t.package, 0) + 1
        runs.append(WindowRun(pending.run_id, pending.started, pending.commit, pending.kind, pending.gates, collected))
    return runs


def _marks(runs: list[WindowRun]) -> str:
    return ", ".join("?" * len(runs))


def _not_passing(
    history: History, runs: list[WindowRun], pending: StoredRun | None
) -> dict[Key, dict[str, TestOutcome]]:
    """Every outcome, in every run, of each test that did not pass in at least one of them."""
    stored = [r for r in runs if pending is None or r.run_id != pending.run_id]
    keys = {(t.package, t.nodeid) for t in (pending.tests if pending else ()) if t.outcome != "passed"}
    ids = tuple(r.run_id for r in stored)
    if stored:
        sql = f"SELECT DISTINCT package, nodeid FROM tests WHERE run_id IN ({_marks(stored)}) AND outcome != 'passed'"
        keys |= {(r[0], r[1]) for r in history.read(sql, ids)}
    out: dict[Key, dict[str, TestOutcome]] = {key: {} for key in keys}
    if stored and keys:
        # A temporary table of the keys, then one lookup per (run, key) on the primary key.
        history.read("CREATE TEMP TABLE IF NOT EXISTS story_keys (package TEXT, nodeid TEXT)")
        history.read("DELETE FROM story_keys")
        history.many("INSERT INTO story_keys VALUES (?, ?)", sorted(keys))
        for row in history.read(
            "SELECT t.run_id, t.package, t.nodeid, t.outcome, t.duration_s, t.station, t.reason, t.blocker, t.verdict"
            f" FROM story_keys AS k JOIN tests AS t ON t.package = k.package AND t.nodeid = k.nodeid"
            f" WHERE t.run_id IN ({_marks(stored)})",
            ids,
        ):
            out[(row[1], row[2])][row[0]] = TestOutcome(*row[1:])
    for t in pending.tests if pending else ():
        if (t.package, t.nodeid) in out:
            out[(t.package, t.nodeid)][pending.run_id if pending else ""] = t
    return out


def _ids(history: History, run: WindowRun, package: str, pending: StoredRun | None) -> set[str]:
    if pending is not None and run.run_id == pending.run_id:
        return {t.nodeid for t in pending.tests if t.package == package}
    rows = history.read("SELECT nodeid FROM tests WHERE run_id = ? AND package = ?", (run.run_id, package))
    return {r[0] for r in rows}


def _falls(history: History, runs: list[WindowRun], tolerance: float, pending: StoredRun | None) -> list[Fall]:
    """Each package whose collected count fell by more than `tolerance` from one of its runs to the next."""
    falls: list[Fall] = []
    last: dict[str, WindowRun] = {}
    for run in runs:
        for package, n in sorted(run.collected.items()):
            before = last.get(package)
            if before is not None and before.collected[package] - n > tolerance * before.collected[package]:
                was, now = _ids(history, before, package, pending), _ids(history, run, package, pending)
                falls.append(Fall(package, before, run, tuple(sorted(was - now)), tuple(sorted(now - was))))
            last[package] = run
    return falls


def load(history: History, *, runs: int, tolerance: float, pending: StoredRun | None = None) -> Window:
    """The newest `runs` runs (with `pending`, a run not stored yet, as the newest), read in a few queries."""
    found = _runs(history, runs, pending)
    return Window(
        tuple(found), _not_passing(history, found, pending), tuple(_falls(history, found, tolerance, pending))
    )


def tally(history: History, now: StoredRun) -> Callable[[str, str], tuple[int, int]]:
    """(red runs, runs) of one test on `now`'s commit, up to and including `now`: the "2 of 7" of a flaky test."""

    def count(package: str, nodeid: str) -> tuple[int, int]:
        rows = history.read(
            "SELECT t.outcome FROM runs AS r JOIN tests AS t ON t.run_id = r.id AND t.package = ? AND t.nodeid = ?"
            " WHERE r.commit_sha = ? AND r.interrupted = 0 AND r.kind != ? AND (r.started, r.id) < (?, ?)",
            (package, nodeid, now.commit, SWITCH_KIND, now.started, now.run_id),
        )
        outcomes = [r[0] for r in rows] + [t.outcome for t in now.tests if (t.package, t.nodeid) == (package, nodeid)]
        return sum(1 for o in outcomes if is_red(o)), len(outcomes)

    return count


@dataclass(frozen=True)
class RunCounts:
    """One run's tests counted by outcome and package, without loading them: what the history chart needs."""

    run_id: str
    started: str
    interrupted: bool
    by_package: dict[str, dict[str, int]]  # package -> outcome -> tests

    @property
    def packages(self) -> set[str]:
        return set(self.by_package)

    def count(self, outcome: str) -> int:
        return sum(counts.get(outcome, 0) for counts in self.by_package.values())


def run_counts(history: History, limit: int) -> list[RunCounts]:
    """The newest `limit` runs (newest first), each counted in SQL: one grouped query, not a row per test."""
    rows = history.read("SELECT id, started, interrupted FROM runs ORDER BY started DESC, id DESC LIMIT ?", (limit,))
    counts: dict[str, dict[str, dict[str, int]]] = {r[0]: {} for r in rows}
    if rows:
        marks = ", ".join("?" * len(rows))
        for run_id, package, outcome, n in history.read(
            f"SELECT run_id, package, outcome, COUNT(*) FROM tests WHERE run_id IN ({marks})"
            " GROUP BY run_id, package, outcome",
            tuple(counts),
        ):
            counts[run_id].setdefault(package, {})[outcome] = n
    return [RunCounts(r[0], r[1], bool(r[2]), counts[r[0]]) for r in rows]


@dataclass(frozen=True)
class Outing:
    """One test in one run: the timeline `promote history --test ID` shows."""

    run: WindowRun
    test: TestOutcome


def timeline(history: History, nodeid: str) -> list[Outing]:
    """Every stored run (oldest first) that ran `nodeid`, in any package, with its outcome there."""
    runs = history.read("SELECT stations FROM runs WHERE kind != ?", (SWITCH_KIND,))
    packages = sorted({p for (stations,) in runs for p in json.loads(stations)})
    if not packages:
        return []
    # The packages named first, so that each run's row is found on the primary key (run, package, test).
    rows = history.read(
        "SELECT r.id, r.started, r.commit_sha, r.kind, r.gates, t.package, t.nodeid, t.outcome, t.duration_s,"
        " t.station, t.reason, t.blocker, t.verdict FROM runs AS r JOIN tests AS t ON t.run_id = r.id"
        f" AND t.package IN ({', '.join('?' * len(packages))}) AND t.nodeid = ?"
        " WHERE r.interrupted = 0 AND r.kind != ? ORDER BY r.started, r.id",
        (*packages, nodeid, SWITCH_KIND),
    )
    return [Outing(WindowRun(r[0], r[1], r[2], r[3], json.loads(r[4]), {}), TestOutcome(*r[5:])) for r in rows]
