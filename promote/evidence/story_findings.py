"""The stories read from the history, said: one line per test, and the findings `test` and `audit` report."""

from __future__ import annotations

from dataclasses import replace

from promote.config import Config
from promote.core.findings import Finding
from promote.core.git import run_git
from promote.core.vocab import FAIL, Severity, assert_never, worst
from promote.evidence import stories, story_window
from promote.evidence.deltas import Delta
from promote.evidence.gates import Gate
from promote.evidence.history import History, StoredRun
from promote.evidence.stories import Drop, GateStreak, StoryReport, TestStory

SHOWN_MODULES = 3  # modules a drop names before counting the rest


def read(config: Config, history: History, pending: StoredRun | None = None, *, shared: bool = False) -> StoryReport:
    """Every story of the configured window, `pending` (a run not stored yet) counted as the newest run.

    `shared`: `history` is the cache of the published pages (docs_history), whose runs list only what did not pass.
    """
    settings = config.history
    runs = max(settings.window, settings.never_ran_after)
    window = story_window.load(history, runs=runs, tolerance=settings.drop_tolerance, pending=pending, implied=shared)
    report = stories.tell(window, settings)
    drops = tuple(replace(d, removed_by=_removed_by(config, d)) for d in report.drops)
    return replace(report, drops=drops)


def _removed_by(config: Config, drop: Drop) -> str | None:
    """The commit, between the two runs' commits, that deleted the module losing the most tests (when git says)."""
    if not drop.commit or not drop.previous_commit or drop.commit == drop.previous_commit:
        return None
    module = drop.modules[0][0]
    done = run_git(
        config.root, "log", "--format=%H", "--diff-filter=D", "-1", f"{drop.previous_commit}..{drop.commit}", "--",
        f":(glob)**/{module}", timeout=30,
    )  # fmt: skip
    return done.stdout.strip() or None if done.ok else None


def _pct(rate: float) -> str:
    return f"{round(rate * 100)}%"


def _day(moment: str) -> str:
    return moment[:10]


def _runs(n: int) -> str:
    return f"{n} run{'s' if n != 1 else ''}"


def line(story: TestStory) -> str:
    """What one test's story is, in one line."""
    if story.kind == "flaky-history":
        ago = "in the latest run" if story.since_failure == 0 else f"{_runs(story.since_failure)} ago"
        reruns = f"; reruns: {', '.join(story.verdicts)}" if story.verdicts else ""
        return (
            f"failed {story.failed_on_commit} of {story.on_commit} runs on {(story.commit or '')[:7]} (last failed"
            f" {ago}); flip rate {_pct(story.flip_rate)}, failure rate {_pct(story.failure_rate)}{reruns}"
        )
    if story.kind == "never-ran":
        said = f"{story.outcome} in all {story.streak} {story.streak_of} since {_day(story.since)}"
        if story.severity == "error":
            return f"{said}: needs {story.reason}, which no station has"
        if story.outcome == "blocked" and story.reason:  # a blocked test's reason is what it lacks
            return f"{said}: needs {story.reason}"
        return f"{said}: {story.reason}" if story.reason else said
    if story.kind == "red-streak":
        return f"red for {story.streak} runs since {_day(story.since)}"
    assert_never(story.kind)


def drop_line(drop: Drop) -> str:
    """Which tests a package lost, where, and the commit that removed them."""
    modules = ", ".join(f"{m} ({n})" for m, n in drop.modules[:SHOWN_MODULES])
    if len(drop.modules) > SHOWN_MODULES:
        modules += f" and {len(drop.modules) - SHOWN_MODULES} more modules"
    if drop.removed_by:
        by = f"removed by {drop.removed_by[:7]}"
    elif drop.commit and drop.previous_commit and drop.commit != drop.previous_commit:
        by = f"removed between {drop.previous_commit[:7]} and {drop.commit[:7]}"
    else:
        by = f"gone on {(drop.commit or 'an unknown commit')[:7]}, which the previous run also ran"
    return (
        f"{len(drop.tests)} tests gone from {drop.package} ({drop.before} -> {drop.after} collected,"
        f" run {drop.run} against {drop.previous}): {modules}; {by}"
    )


def gate_line(gate: GateStreak) -> str:
    return f"gate {gate.gate} failed in each of the last {gate.audits} audits, since {_day(gate.since)}"


def flipped_line(delta: Delta) -> str:
    """A test that passed (or failed) again on the same commit: said as flaky, never as fixed or newly failing."""
    again = "passed again" if delta.after == "passed" else f"{delta.after} on a commit it passed on"
    if delta.failed_of is None:
        return f"{again} on the same commit: flaky"
    return f"{again}, flaky: {delta.failed_of[0]} of {delta.failed_of[1]}"


SHOWN_TESTS = 3  # tests a grouped never-ran finding names before counting the rest


def _never_ran(report: StoryReport) -> list[Finding]:
    """One never-ran finding per package and sentence: the tests blocked by one checkpoint since promote first ran
    them are one line, not one each (the stories list them one by one)."""
    groups: dict[tuple[Severity, str, str], list[str]] = {}
    for s in report.stories:
        if s.kind == "never-ran":
            groups.setdefault((s.severity, s.package, line(s)), []).append(s.test)
    found = []
    for (severity, _, said), tests in groups.items():
        if len(tests) == 1:
            found.append(Finding("never-ran", severity, tests[0], said))
            continue
        named = ", ".join(tests[:SHOWN_TESTS]) + (
            f" (+{len(tests) - SHOWN_TESTS} more)" if len(tests) > SHOWN_TESTS else ""
        )
        message = f"{len(tests)} tests {said}: {named}"
        found.append(Finding("never-ran", severity, tests[0], message, tests=tuple(tests)))
    return found


def findings(report: StoryReport) -> list[Finding]:
    """flaky-history for every such story, never-ran grouped by sentence, tests-dropped for a fall found by the newest
    run."""
    found = [Finding("flaky-history", s.severity, s.test, line(s)) for s in report.stories if s.kind == "flaky-history"]
    found += _never_ran(report)
    for d in report.drops:
        if d.run == report.latest:
            found.append(
                Finding("tests-dropped", "error", d.modules[0][0], drop_line(d), cause=d.removed_by, tests=d.tests)
            )
    return found


def gates_told(decided: dict[str, Gate], report: StoryReport) -> dict[str, Gate]:
    """The gates with what the history adds: tests gone fail Tested; a gate failing again says for how long."""
    out = dict(decided)
    drops = [d for d in report.drops if d.run == report.latest]
    if drops and "tested" in out:
        tested = out["tested"]
        lines = tuple(drop_line(d) for d in drops)
        out["tested"] = replace(tested, status=worst([tested.status, FAIL]), evidence=(*tested.evidence, *lines))
    before = {g.gate: g for g in report.gates}
    for key, gate in decided.items():
        prior = before.get(key)
        if gate.status == FAIL and prior is not None and prior.audits + 1 >= stories.RED_STREAK:
            streak = GateStreak(key, prior.audits + 1, prior.since)
            out[key] = replace(out[key], evidence=(*out[key].evidence, gate_line(streak)))
    return out


def section(report: StoryReport | None) -> dict[str, object] | None:
    """The page's "Tests with a story": each story with its line, the drops, the gates failing in a row."""
    if report is None:
        return None
    data = report.to_json()
    data["tests"] = [{**s.to_json(), "line": line(s)} for s in report.stories]
    data["dropped"] = [{**d.to_json(), "line": drop_line(d)} for d in report.drops]
    data["gates"] = [{**g.to_json(), "line": gate_line(g)} for g in report.long_failing]
    return data
