"""Each test's story over the nights: flaky on one commit, never ran, red for a while, gone; and gates failing in a row.

Pure: reads a `Window` (story_window) and gives a frozen `StoryReport`; the sentences are made by `story_text`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from itertools import pairwise
from typing import Literal

from promote.config import HistoryConfig
from promote.core.vocab import CRASHES_ALONE, RED, Severity, StoryKind, is_red
from promote.core.vocab import NOT_RUN as STOPPED_FIRST
from promote.evidence.deltas import file_and_name, renamed
from promote.evidence.history import TestOutcome
from promote.evidence.story_window import Key, Window, WindowRun

# Not run, though collected: the outcomes a test can have every night without ever doing its job.
NOT_RUN = ("blocked", "skipped", "xfailed", "deselected", STOPPED_FIRST)
RED_STREAK = 3  # a test red this many runs in a row, or a gate failing this many audits in a row, is told
NO_STATION = "impossible-requirement"  # the blocker that no station of the fleet can lift
LEFT_OUT = "left out by CI"  # a never-ran test's outcome when it ran here but no CI job runs it
StreakOf = Literal["runs", "audits"]  # what a never-ran streak counts: every run, or the audits (which read CI)
Seen = list[tuple[WindowRun, TestOutcome]]


@dataclass(frozen=True)
class TestStory:
    """One test's story over the window: what kind, the counts, and the facts its line is made of."""

    __test__ = False  # a data class, not something for pytest to collect

    package: str
    test: str
    kind: StoryKind
    severity: Severity
    runs: int  # runs of its package in the window that collected it
    failed: int  # of them red
    flaky: int  # of them red on a commit it also passed on
    not_run: int  # of them skipped, blocked, xfailed or deselected
    first_seen: str  # when the first of them started
    last_seen: str
    commits: tuple[str, ...]  # the commits it ran on, oldest first
    flip_rate: float  # how often its outcome changed between consecutive runs on one commit
    failure_rate: float  # failed / runs
    commit: str | None = None  # flaky-history: the commit it both passed and failed on
    on_commit: int = 0  # flaky-history: its runs on that commit
    failed_on_commit: int = 0
    since_failure: int = 0  # flaky-history: runs of its package since it last failed (0: the latest)
    verdicts: tuple[str, ...] = ()  # what the reruns showed each time it was red there
    streak: int = 0  # never-ran and red-streak: runs in a row, up to the latest
    streak_of: StreakOf = "runs"  # never-ran: "audits" when CI left it out of each (only audits read CI)
    since: str = ""  # when the streak began
    outcome: str = ""  # never-ran: what it was each time ("skipped", "blocked", LEFT_OUT, ... "not run" when mixed)
    reason: str | None = None  # never-ran: why, as the latest run said

    def to_json(self) -> dict[str, object]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in self.__dict__.items()}


@dataclass(frozen=True)
class Drop:
    """A package's collected count fell by more than the tolerance: the tests gone (renames left out)."""

    package: str
    run: str
    previous: str
    commit: str | None
    previous_commit: str | None
    since: str  # when the run that found it started
    before: int
    after: int
    modules: tuple[tuple[str, int], ...]  # (module, tests of it gone), most first
    tests: tuple[str, ...]
    removed_by: str | None = None  # the commit that deleted the module, when git could say

    def to_json(self) -> dict[str, object]:
        data: dict[str, object] = {k: v for k, v in self.__dict__.items() if k != "modules"}
        data["tests"] = list(self.tests)
        data["modules"] = [{"module": m, "tests": n} for m, n in self.modules]
        return data


@dataclass(frozen=True)
class GateStreak:
    """A gate that failed in each of the latest audits."""

    gate: str
    audits: int
    since: str

    def to_json(self) -> dict[str, object]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class RunMarks:
    """What the chart adds to one run's bar: its flaky failures and the tests not run for `never_ran_after` runs."""

    run: str
    flaky: int
    never_ran: int


@dataclass(frozen=True)
class StoryReport:
    """Every story of the window, newest run last."""

    window: int
    runs: int  # runs read
    latest: str | None  # the newest run's id
    stories: tuple[TestStory, ...]
    drops: tuple[Drop, ...]
    gates: tuple[GateStreak, ...]  # each gate failing in the newest audit read, with how many audits in a row
    marks: tuple[RunMarks, ...]

    @property
    def long_failing(self) -> tuple[GateStreak, ...]:
        """The gates that failed in each of the last RED_STREAK audits or more."""
        return tuple(g for g in self.gates if g.audits >= RED_STREAK)

    def story_of(self, package: str, test: str) -> TestStory | None:
        return next((s for s in self.stories if (s.package, s.test) == (package, test)), None)

    def to_json(self) -> dict[str, object]:
        return {
            "window": self.window,
            "runs_read": self.runs,
            "tests": [s.to_json() for s in self.stories],
            "dropped": [d.to_json() for d in self.drops],
            "gates": [g.to_json() for g in self.long_failing],
        }


def _flips(outcomes: list[str]) -> int:
    return sum(1 for a, b in pairwise(outcomes) if is_red(a) != is_red(b))


def _base(key: Key, seen: Seen, kind: StoryKind, severity: Severity) -> TestStory:
    """The counts every story has, over the runs (oldest first) it was seen in."""
    outcomes = [t.outcome for _, t in seen]
    commits = tuple(dict.fromkeys(r.commit for r, _ in seen if r.commit))
    by_commit: dict[str, list[str]] = {}
    for r, t in seen:
        by_commit.setdefault(r.commit or "", []).append(t.outcome)
    pairs = sum(len(o) - 1 for o in by_commit.values())
    both = set(_flaky_commits(seen))
    flips = sum(_flips(o) for o in by_commit.values())
    failed = sum(1 for o in outcomes if is_red(o))
    return TestStory(
        package=key[0], test=key[1], kind=kind, severity=severity, runs=len(seen), failed=failed,
        flaky=sum(1 for r, t in seen if r.commit in both and is_red(t.outcome)),
        not_run=sum(1 for o in outcomes if o in NOT_RUN), first_seen=seen[0][0].started, last_seen=seen[-1][0].started,
        commits=commits, flip_rate=round(flips / pairs, 3) if pairs else 0.0,
        failure_rate=round(failed / len(seen), 3),
    )  # fmt: skip


def _quiet(t: TestOutcome) -> bool:
    """It did not do its job in that run: it did not run here, or it did and no CI job runs it."""
    return t.outcome in NOT_RUN or t.ci is not None


def _quiet_streak(seen: Seen, runs: list[WindowRun], quiet: Callable[[TestOutcome], bool]) -> Seen:
    """The latest of `runs` in a row (oldest first) in which the test was `quiet`."""
    at = {r.run_id: t for r, t in seen}
    streak: Seen = []
    for r in reversed(runs):
        t = at.get(r.run_id)
        if t is None or not quiet(t):
            break
        streak.append((r, t))
    return streak[::-1]


def _never_ran(key: Key, seen: Seen, runs: list[WindowRun], after: int) -> tuple[TestStory, Seen] | None:
    """Quiet in each of its package's last `after` runs, or left out by CI in each of the last `after` audits: the
    story, and the runs of the streak."""
    streak = _quiet_streak(seen, runs, _quiet)
    if len(streak) < after:
        # Only audits read CI: a test no CI job runs is told over them, whatever a `promote test` between them saw.
        streak = _quiet_streak(seen, [r for r in runs if r.ci_read], lambda t: t.ci is not None)
        if len(streak) < after:
            return None
    latest = streak[-1][1]
    kinds = {t.outcome if t.outcome in NOT_RUN else LEFT_OUT for _, t in streak}
    outcome = next(iter(kinds)) if len(kinds) == 1 else "not run"
    severity: Severity = "error" if latest.blocker == NO_STATION else "warning"
    story = _with(
        _base(key, seen, "never-ran", severity), streak=len(streak), since=streak[0][0].started,
        streak_of="audits" if outcome == LEFT_OUT else "runs", outcome=outcome,
        reason=latest.reason if latest.outcome in NOT_RUN else latest.ci,
    )  # fmt: skip
    return story, streak


def _flaky_commits(seen: Seen) -> list[str]:
    """The commits (oldest first) the test both passed and failed on, but for those where it crashed when run alone:
    there it is red (it passed only after other tests in its process), not flaky."""
    reds: dict[str, set[bool]] = {}
    crashed_alone = {r.commit for r, t in seen if t.verdict == CRASHES_ALONE}
    for r, t in seen:
        if r.commit and t.outcome not in NOT_RUN:
            reds.setdefault(r.commit, set()).add(is_red(t.outcome))
    return [c for c, seen_red in reds.items() if seen_red == {True, False} and c not in crashed_alone]


def _flaky(key: Key, seen: Seen, runs: list[WindowRun]) -> TestStory | None:
    """Passed and failed on one commit: the latest such commit, with its counts."""
    flaky_on = _flaky_commits(seen)
    if not flaky_on:
        return None
    commit = flaky_on[-1]
    there = [t for r, t in seen if r.commit == commit and t.outcome not in NOT_RUN]
    red_in = {r.run_id for r, t in seen if is_red(t.outcome)}
    last_red = max(i for i, r in enumerate(runs) if r.run_id in red_in)
    story = _base(key, seen, "flaky-history", "warning")
    return _with(
        story, commit=commit, on_commit=len(there), failed_on_commit=sum(1 for t in there if is_red(t.outcome)),
        since_failure=len(runs) - 1 - last_red,
        verdicts=tuple(t.verdict for t in there if is_red(t.outcome) and t.verdict),
    )  # fmt: skip


def _red(key: Key, seen: Seen, runs: list[WindowRun]) -> TestStory | None:
    streak = _quiet_streak(seen, runs, lambda t: t.outcome in RED)
    if len(streak) < RED_STREAK:
        return None
    return _with(_base(key, seen, "red-streak", "warning"), streak=len(streak), since=streak[0][0].started)


def _with(story: TestStory, **changes: object) -> TestStory:
    return TestStory(**{**story.__dict__, **changes})


def _package_runs(window: Window, package: str) -> list[WindowRun]:
    return [r for r in window.runs if package in r.collected]


def _drops(window: Window) -> list[Drop]:
    drops = []
    for fall in window.falls:
        appeared = {file_and_name(t): t for t in fall.appeared}
        gone = [t for t in fall.gone if renamed(t, appeared) is None]
        if not gone:
            continue
        modules: dict[str, int] = {}
        for t in gone:
            modules[t.split("::")[0]] = modules.get(t.split("::")[0], 0) + 1
        drops.append(
            Drop(
                fall.package, fall.after.run_id, fall.before.run_id, fall.after.commit, fall.before.commit,
                fall.after.started, fall.before.collected[fall.package], fall.after.collected[fall.package],
                tuple(sorted(modules.items(), key=lambda m: (-m[1], m[0]))), tuple(gone),
            )
        )  # fmt: skip
    return drops


def _gates(window: Window) -> list[GateStreak]:
    audits = [r for r in window.runs if r.gates]
    out = []
    for gate in audits[-1].gates if audits else {}:
        n = 0
        for r in reversed(audits):
            if r.gates.get(gate) != "fail":
                break
            n += 1
        if n:
            out.append(GateStreak(gate, n, audits[-n].started))
    return out


def tell(window: Window, settings: HistoryConfig) -> StoryReport:
    """Every story the window holds: one per test at most (never ran, else flaky, else red for a while)."""
    stories: list[TestStory] = []
    flaky_at: dict[str, int] = {}
    quiet_at: dict[str, int] = {}
    per_package = {p: _package_runs(window, p) for r in window.runs for p in r.collected}
    for key, by_run in sorted(window.outcomes.items()):
        runs = per_package.get(key[0], [])
        recent = runs[-settings.window :]
        seen = [(r, by_run[r.run_id]) for r in recent if r.run_id in by_run]
        if not seen:
            continue
        never = _never_ran(key, [(r, by_run[r.run_id]) for r in runs if r.run_id in by_run], runs,
                           settings.never_ran_after)  # fmt: skip
        story = never[0] if never else _flaky(key, seen, recent) or _red(key, seen, recent)
        if story is not None:
            stories.append(story)
        if story is not None and story.kind == "flaky-history":
            for r, t in seen:
                if r.commit == story.commit and is_red(t.outcome):
                    flaky_at[r.run_id] = flaky_at.get(r.run_id, 0) + 1
        for r, _ in never[1] if never else ():
            quiet_at[r.run_id] = quiet_at.get(r.run_id, 0) + 1
    marks = tuple(RunMarks(r.run_id, flaky_at.get(r.run_id, 0), quiet_at.get(r.run_id, 0)) for r in window.runs)
    order = {"error": 0, "warning": 1, "info": 2}
    return StoryReport(
        window=settings.window,
        runs=len(window.runs),
        latest=window.runs[-1].run_id if window.runs else None,
        stories=tuple(sorted(stories, key=lambda s: (order[s.severity], s.kind, s.package, s.test))),
        drops=tuple(_drops(window)),
        gates=tuple(_gates(window)),
        marks=marks,
    )
