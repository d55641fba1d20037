"""`promote history --tests` and `--test ID`: each test's story over the window, and one test's timeline."""

from __future__ import annotations

from contextlib import closing
from typing import Any

from promote.cli.terminal import SEVERITY_TONES, STORY_TONES, mark
from promote.config import Config
from promote.core import state
from promote.evidence import docs_history, story_findings, story_window
from promote.evidence.history import History
from promote.evidence.stories import TestStory

SHOWN_COMMITS = 3


def _commits(shas: tuple[str, ...]) -> str:
    shown = ", ".join(c[:7] for c in shas[-SHOWN_COMMITS:])
    return f"{shown} and {len(shas) - SHOWN_COMMITS} earlier" if len(shas) > SHOWN_COMMITS else shown or "no commit"


def story_line(s: TestStory) -> str:
    """One test's story with its counts, first and last seen, and the commits it ran on."""
    return (
        f"{mark(s.severity, SEVERITY_TONES[s.severity])} {mark(s.kind, STORY_TONES[s.kind])} {s.package} {s.test}:"
        f" {story_findings.line(s)}; {s.failed} of {s.runs} runs red, seen {s.first_seen[:10]} to"
        f" {s.last_seen[:10]} on {_commits(s.commits)}"
    )


def show_stories(config: Config, *, from_docs: bool = False) -> tuple[dict[str, Any], str]:
    """(JSON data, text) for `promote history --tests`: from this clone's history, or from the published pages."""
    opened = docs_history.cache(config) if from_docs else History(state.state_dir(config.root))
    with closing(opened) as history:
        report = story_findings.read(config, history, shared=from_docs)
    data = story_findings.section(report) or {}
    head = f"stories over the last {report.runs} runs (window {report.window})"
    lines = [story_line(s) for s in report.stories]
    lines += [
        f"{mark('error', 'alarm')} {mark('tests-dropped', 'alarm')} {story_findings.drop_line(d)}" for d in report.drops
    ]
    lines += [f"{mark('gate', 'bad')} {story_findings.gate_line(g)}" for g in report.long_failing]
    if not lines:
        return data, f"no test has a story over the last {report.runs} runs (window {report.window})"
    return data, "\n".join([f"{head}:", *lines])


def show_timeline(config: Config, test_id: str) -> tuple[dict[str, Any], str]:
    """(JSON data, text) for `promote history --test ID`: every run of it, and its story when it has one."""
    with closing(History(state.state_dir(config.root))) as history:
        outings = story_window.timeline(history, test_id)
        report = story_findings.read(config, history)
    stories = [s for s in report.stories if s.test == test_id]
    entries = [
        {"run": o.run.run_id, "kind": o.run.kind, "started": o.run.started, "commit": o.run.commit,
         "package": o.test.package, "outcome": o.test.outcome, "verdict": o.test.verdict, "reason": o.test.reason,
         "blocker": o.test.blocker}
        for o in outings
    ]  # fmt: skip
    data = {
        "test": test_id,
        "stories": [{**s.to_json(), "line": story_findings.line(s)} for s in stories],
        "timeline": entries,
    }
    if not outings:
        return data, f"{test_id}: in no stored run"
    lines = [story_line(s) for s in stories] or [f"{test_id}: no story over the last {report.runs} runs"]
    for o in outings:
        why = "; ".join(x for x in (o.test.verdict and f"reruns: {o.test.verdict}", o.test.reason) if x)
        lines.append(
            f"  {o.run.started[:19]}  {o.run.run_id}  {(o.run.commit or '-')[:7]}  {o.test.package}  {o.test.outcome}"
            + (f"  ({why})" if why else "")
        )
    return data, "\n".join(lines)
