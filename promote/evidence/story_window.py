"""The runs a test's story is read over, loaded from the history in a few queries: every run's counts, and only
the tests that did something other than pass (the rest of a 10,000-test suite has no story and is never read)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from promote.core.vocab import is_red
from promote.evidence.history import OUTCOME_COLUMNS, SWITCH_KIND, History, StoredRun, TestOutcome, outcome_from

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
    seq: int = 0  # its number in the database (0: not stored yet)
    ci_read: bool = False  # it read the CI workflows: each test's `ci` says whether a CI job runs it


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


def _runs(history: History, limit: int, pending: StoredRun | None, *, implied: bool) -> list[WindowRun]:
    rows = history.read(
        "SELECT id, started, commit_sha, kind, gates, seq, stations, ci FROM runs WHERE interrupted = 0 AND kind != ?"
        " AND id != ? ORDER BY started DESC, id DESC LIMIT ?",
        (SWITCH_KIND, pending.run_id if pending else "", limit - (pending is not None)),
    )
    # Implied: a run keeps only its tests that did not pass; the packages it ran are its stations' keys.
    runs = [
        WindowRun(
            r[0], r[1], r[2], r[3], json.loads(r[4]), dict.fromkeys(json.loads(r[6]), 0) if implied else {}, r[5],
            bool(r[7]),
        )
        for r in reversed(rows)
    ]  # fmt: skip
    if runs:
        counted: dict[int, dict[str, int]] = {r.seq: r.collected for r in runs}
        for seq, package, n in history.read(
            "SELECT o.run, i.package, COUNT(*) FROM outcomes AS o JOIN test_ids AS i ON i.id = o.test"
            f" WHERE o.run IN ({_marks(runs)}) GROUP BY o.run, i.package",
            tuple(r.seq for r in runs),
        ):
            counted[seq][package] = n
    if pending is not None:
        runs.append(
            WindowRun(
                pending.run_id, pending.started, pending.commit, pending.kind, pending.gates, pending.collected,
                ci_read=pending.ci_read,
            )
        )  # fmt: skip
    return runs


def _marks(runs: list[WindowRun]) -> str:
    return ", ".join("?" * len(runs))


def _not_passing(
    history: History, runs: list[WindowRun], pending: StoredRun | None
) -> dict[Key, dict[str, TestOutcome]]:
    """Every outcome, in every run, of each test that did not pass (or that CI left out) in at least one of them."""
    stored = [r for r in runs if r.seq]
    news = [(t.package, t.nodeid) for t in (pending.tests if pending else ()) if t.outcome != "passed" or t.ci]
    out: dict[Key, dict[str, TestOutcome]] = {key: {} for key in news}
    if stored:
        seqs, marks = tuple(r.seq for r in stored), _marks(stored)
        # The tests with a story to tell, by number, then one lookup per (run, test) on the primary key.
        history.read("CREATE TEMP TABLE IF NOT EXISTS story_keys (id INTEGER PRIMARY KEY)")
        history.read("DELETE FROM story_keys")
        history.read(
            "INSERT OR IGNORE INTO story_keys"
            f" SELECT DISTINCT test FROM outcomes WHERE run IN ({marks}) AND (outcome != 'passed' OR ci IS NOT NULL)",
            seqs,
        )
        history.many(
            "INSERT OR IGNORE INTO story_keys SELECT id FROM test_ids WHERE package = ? AND nodeid = ?", list(news)
        )
        by_seq = {r.seq: r.run_id for r in stored}
        for row in history.read(
            f"SELECT o.run, i.package, i.nodeid, {OUTCOME_COLUMNS} FROM story_keys AS k"
            f" JOIN test_ids AS i ON i.id = k.id JOIN outcomes AS o ON o.test = k.id AND o.run IN ({marks})",
            seqs,
        ):
            # A story reads no station: a row's own, or "" where it ran on its package's.
            outcome = outcome_from(row[1], row[2], row[3:], {})
            out.setdefault((row[1], row[2]), {})[by_seq[row[0]]] = outcome
    for t in pending.tests if pending else ():
        if (t.package, t.nodeid) in out:
            out[(t.package, t.nodeid)][pending.run_id if pending else ""] = t
    return out


def _passed_where_unlisted(runs: list[WindowRun], out: dict[Key, dict[str, TestOutcome]]) -> None:
    """In runs that list only the tests that did not pass (published pages), a test of a package the run ran that
    it does not list passed there."""
    for (package, nodeid), by_run in out.items():
        for r in runs:
            if package in r.collected and r.run_id not in by_run:
                by_run[r.run_id] = TestOutcome(package, nodeid, "passed")


def _ids(history: History, run: WindowRun, package: str, pending: StoredRun | None) -> set[str]:
    if pending is not None and run.run_id == pending.run_id:
        return {t.nodeid for t in pending.tests if t.package == package}
    rows = history.read(
        "SELECT i.nodeid FROM outcomes AS o JOIN test_ids AS i ON i.id = o.test WHERE o.run = ? AND i.package = ?",
        (run.seq, package),
    )
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


def load(
    history: History, *, runs: int, tolerance: float, pending: StoredRun | None = None, implied: bool = False
) -> Window:
    """The newest `runs` runs (with `pending`, a run not stored yet, as the newest), read in a few queries.

    `implied`: the runs keep only the tests that did not pass (the shared history's published pages), so a test
    they do not list passed, and a fall in a count is not read from them (each page tells its own drops).
    """
    found = _runs(history, runs, pending, implied=implied)
    outcomes = _not_passing(history, found, pending)
    if implied:
        _passed_where_unlisted(found, outcomes)
        return Window(tuple(found), outcomes)
    return Window(tuple(found), outcomes, tuple(_falls(history, found, tolerance, pending)))


def tally(history: History, now: StoredRun) -> Callable[[str, str], tuple[int, int]]:
    """(red runs, runs) of one test on `now`'s commit, up to and including `now`: the "2 of 7" of a flaky test."""

    def count(package: str, nodeid: str) -> tuple[int, int]:
        rows = history.read(
            "SELECT o.outcome FROM runs AS r JOIN outcomes AS o ON o.run = r.seq"
            " AND o.test = (SELECT id FROM test_ids WHERE package = ? AND nodeid = ?)"
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
    rows = history.read(
        "SELECT id, started, interrupted, seq FROM runs ORDER BY started DESC, id DESC LIMIT ?", (limit,)
    )
    counts: dict[int, dict[str, dict[str, int]]] = {r[3]: {} for r in rows}
    if rows:
        for seq, package, outcome, n in history.read(
            "SELECT o.run, i.package, o.outcome, COUNT(*) FROM outcomes AS o JOIN test_ids AS i ON i.id = o.test"
            f" WHERE o.run IN ({', '.join('?' * len(rows))}) GROUP BY o.run, i.package, o.outcome",
            tuple(counts),
        ):
            counts[seq].setdefault(package, {})[outcome] = n
    return [RunCounts(r[0], r[1], bool(r[2]), counts[r[3]]) for r in rows]


@dataclass(frozen=True)
class Outing:
    """One test in one run: the timeline `promote history --test ID` shows."""

    run: WindowRun
    test: TestOutcome


def timeline(history: History, nodeid: str) -> list[Outing]:
    """Every stored run (oldest first) that ran `nodeid`, in any package, with its outcome there."""
    ids = {r[0]: r[1] for r in history.read("SELECT id, package FROM test_ids WHERE nodeid = ?", (nodeid,))}
    if not ids:
        return []
    rows = history.read(
        f"SELECT r.id, r.started, r.commit_sha, r.kind, r.gates, r.stations, r.ci, o.test, {OUTCOME_COLUMNS}"
        f" FROM runs AS r JOIN outcomes AS o ON o.run = r.seq AND o.test IN ({', '.join('?' * len(ids))})"
        " WHERE r.interrupted = 0 AND r.kind != ? ORDER BY r.started, r.id",
        (*ids, SWITCH_KIND),
    )
    out = []
    for r in rows:
        test = outcome_from(ids[r[7]], nodeid, r[8:], json.loads(r[5]))
        out.append(Outing(WindowRun(r[0], r[1], r[2], r[3], json.loads(r[4]), {}, ci_read=bool(r[6])), test))
    return out


def unlisted(history: History, outings: list[Outing]) -> list[str]:
    """The runs (oldest first) of the outings' packages that do not list the test: in the shared history, whose pages
    list only the tests that did not pass, it passed there or was not collected yet (a page cannot tell which)."""
    packages = {o.test.package for o in outings}
    listed = {o.run.run_id for o in outings}
    rows = history.read(
        "SELECT id, stations FROM runs WHERE interrupted = 0 AND kind != ? ORDER BY started, id", (SWITCH_KIND,)
    )
    return [r[0] for r in rows if r[0] not in listed and packages & set(json.loads(r[1]))]
