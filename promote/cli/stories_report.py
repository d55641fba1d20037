"""`promote history --tests` and `--test ID`: each test's story over the window, and one test's timeline."""

from __future__ import annotations

from collections import Counter
from contextlib import closing
from typing import Any

from promote.cli.terminal import SEVERITY_TONES, STORY_TONES, joined, mark
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


def _opened(config: Config, from_docs: bool) -> History:
    """This clone's history, or the cache of the pages published in the docs repository."""
    return docs_history.cache(config) if from_docs else History(state.state_dir(config.root))


def _skips(history: History, from_docs: bool) -> tuple[list[dict[str, str]], list[str]]:
    """The published pages left out of the shared history: for `--json`, and one line each."""
    pages = docs_history.skipped(history) if from_docs else []
    data = [{"page": p.path, "fault": p.fault, "detail": p.detail} for p in pages]
    return data, [f"skipped {p.path}: {p.detail}" for p in pages]


def show_stories(config: Config, *, from_docs: bool = False) -> tuple[dict[str, Any], str]:
    """(JSON data, text) for `promote history --tests`: from this clone's history, or from the published pages."""
    with closing(_opened(config, from_docs)) as history:
        report = story_findings.read(config, history, shared=from_docs)
        skips, skip_lines = _skips(history, from_docs)
    data = story_findings.section(report) or {}
    if from_docs:
        data["skipped"] = skips
    kinds = Counter(s.kind for s in report.stories)
    counted = [f"{n} {kind}" for kind, n in kinds.most_common()]
    counted += [f"{len(report.drops)} tests-dropped"] if report.drops else []
    counted += [f"{len(report.long_failing)} gate(s) failing audit after audit"] if report.long_failing else []
    head = f"stories over the last {report.runs} runs (window {report.window}): {', '.join(counted)}"
    lines = [story_line(s) for s in report.stories]
    lines += [
        f"{mark('error', 'alarm')} {mark('tests-dropped', 'alarm')} {story_findings.drop_line(d)}" for d in report.drops
    ]
    lines += [mark(story_findings.gate_line(g), "bad") for g in report.long_failing]
    if not lines:
        return data, joined([f"no test has a story over the last {report.runs} runs (window {report.window})",
                                *skip_lines])  # fmt: skip
    return data, joined([head, *lines, *skip_lines])


def _entry(o: story_window.Outing) -> dict[str, object]:
    return {
        "run": o.run.run_id, "kind": o.run.kind, "started": o.run.started, "commit": o.run.commit,
        "package": o.test.package, "outcome": o.test.outcome, "verdict": o.test.verdict, "reason": o.test.reason,
        "blocker": o.test.blocker, "ci": o.test.ci,
    }  # fmt: skip


def _outing_line(o: story_window.Outing) -> str:
    why = "; ".join(
        x
        for x in (
            o.test.verdict and f"reruns: {o.test.verdict}",
            o.test.reason,
            o.test.ci and f"no CI job runs it: {o.test.ci}",
        )
        if x
    )
    return (
        f"  {o.run.started[:19]}  {o.run.run_id}  {(o.run.commit or '-')[:7]}  {o.test.package}  {o.test.outcome}"
        + (f"  ({why})" if why else "")
    )


def show_timeline(config: Config, test_id: str, *, from_docs: bool = False) -> tuple[dict[str, Any], str]:
    """(JSON data, text) for `promote history --test ID`: every run of it, and its story when it has one.

    From the published pages (`from_docs`), which list only the tests that did not pass or that CI left out, the
    runs of its package that do not list it are counted apart: it passed there, or was not collected yet.
    """
    with closing(_opened(config, from_docs)) as history:
        outings = story_window.timeline(history, test_id)
        unlisted = story_window.unlisted(history, outings) if from_docs and outings else []
        report = story_findings.read(config, history, shared=from_docs)
        skips, skip_lines = _skips(history, from_docs)
    stories = [s for s in report.stories if s.test == test_id]
    data: dict[str, Any] = {
        "test": test_id,
        "source": "docs" if from_docs else "history",
        "stories": [{**s.to_json(), "line": story_findings.line(s)} for s in stories],
        "timeline": [_entry(o) for o in outings],
    }
    if from_docs:
        data["unlisted"] = unlisted
        data["skipped"] = skips
    if not outings:
        where = (
            "listed on no published page (a page lists only the tests that did not pass)"
            if from_docs
            else "in no stored run"
        )
        return data, joined([f"{test_id}: {where}", *skip_lines])
    lines = [story_line(s) for s in stories] or [f"{test_id}: no story over the last {report.runs} runs"]
    lines += [_outing_line(o) for o in outings]
    if unlisted:
        lines.append(
            f"  and {len(unlisted)} more runs of its package whose pages do not list it:"
            " passed there, or not collected yet"
        )
    return data, joined([*lines, *skip_lines])
