"""Failures grouped by cause: the same exception type raised through the same innermost line of the project's code.

Sixty tests that fail with the same `FileNotFoundError` at the same line are one problem, not sixty: the reruns
that tell a test's own failure from one an earlier test caused are spent once per group (its representative and a
sample of the others), and the group is said once. The choice of who is rerun depends only on the tests' ids, so
the same failures get the same reruns whatever order the workers ran them in.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from promote.core.findings import Finding
from promote.core.vocab import GENUINE
from promote.runners.causes.verdict_findings import listed, verdict_finding
from promote.runners.rerun_verdict import Group, Verdict
from promote.runners.summary import PackageResult


def cause_groups(result: PackageResult, victims: Sequence[str]) -> tuple[list[Group], list[str]]:
    """The victims that share a cause with another, in groups (ordered by their first id), and the rest in order."""
    sites = {
        t.nodeid: (t.raised, t.raised_at, t.raised_own)
        for t in result.tests
        if t.parent is None and t.raised is not None and t.raised_at is not None
    }
    by_site: dict[tuple[str, str, bool], list[str]] = {}
    for victim in victims:
        site = sites.get(victim)
        if site is not None:
            by_site.setdefault((str(site[0]), str(site[1]), bool(site[2])), []).append(victim)
    groups = [Group(raised, at, own, tuple(sorted(tests))) for (raised, at, own), tests in by_site.items()]
    groups = sorted((g for g in groups if len(g.tests) > 1), key=lambda g: g.tests[0])
    grouped = {t for g in groups for t in g.tests}
    return groups, [v for v in victims if v not in grouped]


def agree(verdicts: Sequence[Verdict]) -> bool:
    """Whether the sampled members' reruns said the same of each: then the group shares that verdict."""
    return len({v.kind for v in verdicts}) == 1


def inherited(group: Group, first: Verdict, test: str) -> Verdict:
    """The verdict of a member not rerun itself: its representative's, said to come from there."""
    detail = f"not rerun itself: it fails with the same {group.raised} at {group.at} as {first.test}"
    return replace(first, test=test, reruns=0, detail=detail)


def group_finding(
    group: Group, verdicts: Sequence[Verdict], leaks: Sequence[Finding], result: PackageResult
) -> Finding | None:
    """The one finding of a group whose sample agreed: its cause, where, its tests, and what the reruns said."""
    first = verdicts[0]
    path, _, line = group.at.rpartition(":")
    where = result.locate(path, int(line)) if group.own and path and line.isdigit() else None
    n, reruns = len(group.tests), sum(v.reruns for v in verdicts)
    head = f"{n} tests fail with {group.cause}: {listed(group.tests)}"
    if first.kind == GENUINE:
        message = f"{head}; rerun alone, {listed(group.sample)} failed again ({reruns} reruns for the group)"
        return Finding("same-cause", "error", first.test, message, cause=group.at, location=where, tests=group.tests)
    own = verdict_finding(first, leaks, where)
    if own is None:
        return None
    message = f"{head}; {listed(group.sample)} rerun, the same for each: {own.message}"
    return replace(own, message=message, location=where or own.location, tests=group.tests)
