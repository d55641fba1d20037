"""Store a `promote test` run in the history, like an audit's."""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from promote.config import Config
from promote.core import state
from promote.core.findings import Finding
from promote.core.git import run_git
from promote.core.vocab import DESELECTED, NOT_RUN
from promote.evidence import story_findings
from promote.evidence.deltas import FILTERED
from promote.evidence.history import SWITCH_KIND, History, HistoryError, StoredRun, TestOutcome
from promote.evidence.stories import StoryReport
from promote.runners.suite import RedStreak, RunResult

if TYPE_CHECKING:
    from promote.accel.verify import AccelReport


LEFT_OUT = "left out by the package's own options (-k, -m or --deselect, in its pytest configuration or its args)"
STOPPED = "collected, and never started: pytest stopped before it (see pytest-stopped)"


def outcomes_of(run: RunResult | None) -> tuple[TestOutcome, ...]:
    """Each top-level test's fate in the run, as the history keeps it."""
    if run is None:
        return ()
    found = []
    for p in run.packages:
        blocked = set(p.blocked_tests)
        blockers = {b.test: b for b in p.blockers if b.parent is None}
        verdicts = {v.test: v.kind for v in p.verdicts}
        for t in p.tests:
            if t.parent is None:
                why = blockers.get(t.nodeid)
                outcome = "blocked" if t.nodeid in blocked else t.outcome
                skipped = t.skip_reason.removeprefix("Skipped: ") if t.skip_reason and outcome in FILTERED else None
                reason = " and ".join(why.requirements) if why is not None else skipped
                check = why.check if why is not None else None
                found.append(
                    TestOutcome(
                        p.name, t.nodeid, outcome, t.duration_s, p.station, reason, check, verdicts.get(t.nodeid)
                    )
                )
        found += [TestOutcome(p.name, n, "crashed", 0.0, p.station, verdict=verdicts.get(n)) for n in p.crashed_tests]
        found += [TestOutcome(p.name, n, DESELECTED, 0.0, p.station, LEFT_OUT) for n in p.deselected]
        found += [TestOutcome(p.name, n, NOT_RUN, 0.0, p.station, STOPPED) for n in p.unrun]
    return tuple(found)


def head_commit(config: Config) -> str | None:
    """The commit checked out in the repository under test (None before its first commit)."""
    head = run_git(config.root, "rev-parse", "--verify", "--quiet", "HEAD")
    return head.stdout.strip() if head.ok else None


def record_test_run(
    config: Config, run: RunResult, command: str, commit: str | None, *, kind: str = "test"
) -> RunResult:
    """Store `run`, made on `commit` (as `head_commit` read it when the tests started); HistoryError if it cannot.

    Returns `run` with what the history tells of its tests (`told`), stored with it: flaky-history, never-ran and
    tests-dropped; and its tests red for several runs in a row (`red_streaks`). A switch run is stored as it is:
    it is judged with the path, not as a night of the package.
    """
    stored = StoredRun(
        run_id=run.run_id,
        kind=kind,
        started=run.started,
        finished=run.finished or datetime.now(timezone.utc).isoformat(),
        commit=commit,
        command=command,
        stations={p.name: p.station for p in run.packages},
        tests=outcomes_of(run),
        findings=run.findings,
    )
    history = History(state.state_dir(config.root))
    try:
        told: tuple[Finding, ...] = ()
        red: tuple[RedStreak, ...] = ()
        if kind != SWITCH_KIND:
            report = _stories(history, config, stored)
            told = tuple(story_findings.findings(report))
            red = tuple(
                RedStreak(s.package, s.test, s.streak, s.since) for s in report.stories if s.kind == "red-streak"
            )
        record_into(history, replace(stored, findings=stored.findings + told), keep=kept(config))
    finally:
        history.close()
    return replace(run, told=told, red_streaks=red)


def kept(config: Config) -> int:
    """How many runs the history keeps: `keep`, never fewer than a story's window."""
    return max(config.history.keep, config.history.window, config.history.never_ran_after)


def _stories(history: History, config: Config, pending: StoredRun) -> StoryReport:
    try:
        return story_findings.read(config, history, pending)
    except sqlite3.Error as e:
        raise HistoryError(f"{history.path}: cannot read the history database: {e}") from None


def record_switch_runs(config: Config, report: AccelReport, command: str, commit: str | None) -> None:
    """Store the test runs each path's switch made (off, then on), so the run ids `accel` shows are in the history."""
    for r in report.results:
        if r.switch is not None:
            for way, run in zip((r.switch.off, r.switch.on), r.switch.runs, strict=False):
                record_test_run(config, run, f"{command} ({r.env}={way.value})", commit, kind=SWITCH_KIND)


def record_into(history: History, run: StoredRun, *, keep: int | None = None) -> None:
    """Store `run` in `history`, keeping its last `keep` runs; HistoryError (one line) when the database cannot."""
    try:
        history.record(run, keep=keep)
    except sqlite3.Error as e:  # another process holding the database past the wait, a full disk
        raise HistoryError(f"{history.path}: cannot write the history database: {e}") from None


def record_interrupted_run(config: Config, run_id: str, started: str, command: str, commit: str | None) -> None:
    """Keep a `promote test` stopped by a signal in the history, marked, instead of leaving no trace of it."""
    note = Finding("package-error", "error", "promote test", "interrupted before its tests finished: nothing counted")
    history = History(state.state_dir(config.root))
    try:
        history.record(
            StoredRun(
                run_id=run_id,
                kind="test",
                started=started,
                finished=datetime.now(timezone.utc).isoformat(),
                commit=commit,
                command=command,
                findings=(note,),
                interrupted=True,
            )
        )
    finally:
        history.close()


# How many earlier runs a victim's polluters are compared over (the history window's default).
BLAME_WINDOW = 30


def blamed_elsewhere(config: Config, run: RunResult) -> RunResult:
    """`run`, with each `order-dependent` finding whose victim earlier runs blamed on other polluters made `flaky`.

    A real order dependence has the same polluter whenever it shows; a victim pinned on a different test
    in each run fails after whatever ran before it, which is a race, not a cause.
    """
    victims = {f.subject for f in run.findings if f.check == "order-dependent"}
    if not victims:
        return run
    history = History(state.state_dir(config.root))
    try:
        earlier: dict[str, list[tuple[str, str]]] = {}
        for run_id in history.run_ids(BLAME_WINDOW):
            for f in history.get(run_id).findings:
                if f.check == "order-dependent" and f.subject in victims and f.cause:
                    earlier.setdefault(f.subject, []).append((run_id, f.cause))
    finally:
        history.close()
    packages = []
    for p in run.packages:
        findings = tuple(
            _unblamed(f, earlier.get(f.subject, [])) if f.check == "order-dependent" else f for f in p.findings
        )
        changed = {f.subject for f, g in zip(p.findings, findings, strict=True) if f is not g}
        verdicts = tuple(replace(v, kind="flaky", polluters=()) if v.test in changed else v for v in p.verdicts)
        packages.append(replace(p, findings=findings, verdicts=verdicts))
    return replace(run, packages=tuple(packages))


def _unblamed(finding: Finding, earlier: list[tuple[str, str]]) -> Finding:
    others = [(run_id, cause) for run_id, cause in earlier if cause != finding.cause]
    if not others:
        return finding
    run_id, cause = others[0]
    message = (
        f"flaky: blamed on {finding.cause} in this run, on {cause} in run {run_id}"
        f"{f' and on {len(others) - 1} more elsewhere' if len(others) > 1 else ''}: a different polluter each run"
    )
    return Finding("flaky", "warning", finding.subject, message, location=finding.location)
