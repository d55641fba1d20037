"""CI audit: which collected tests no CI job runs, and which jobs cannot run here at all."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from promote.checks import FAIL, PASS, UNDECIDED, CheckOutcome
from promote.checks.ci_jobs import RUNS_HERE, JobPlan, plan
from promote.checks.ci_model import DROPPED, RUN, Decision, NodeId
from promote.checks.ci_nox import Noxfile
from promote.checks.ci_workflows import WORKFLOWS, read_workflows
from promote.config import Config
from promote.errors import PromoteError
from promote.findings import Finding
from promote.git import Repo

NAME = "ci"
_GITHUB = re.compile(r"^(?:[a-z+]+://)?(?:[^@/]+@)?github\.com[:/]([^/]+)/([^/]+?)(?:\.git)?/?$", re.IGNORECASE)


@dataclass(frozen=True)
class NotRun:
    """A test id no CI job runs: every reason (`why`) and the first filter that drops it (`cause`)."""

    test: str
    why: str
    cause: str | None


@dataclass(frozen=True)
class JobReport:
    """What one CI job (or matrix entry) runs, for the evidence page."""

    source: str
    job: str
    runs_on: str
    state: str  # runs | never | undecided
    why: str
    commands: tuple[str, ...]
    tests_run: int


@dataclass(frozen=True)
class CIReport:
    """Every job, every test id's fate, and the findings."""

    repository: str | None
    jobs: tuple[JobReport, ...]
    problems: tuple[str, ...]
    inventory: int
    run: int
    not_run: tuple[NotRun, ...]
    undecided: tuple[tuple[str, str], ...]  # (test id, what could not be evaluated)
    findings: tuple[Finding, ...]
    workflows: int


def repository_of(root: Path, configured: str | None) -> str | None:
    """owner/name of this repository: configured, or read from a GitHub `origin` URL."""
    if configured:
        return configured
    try:
        url = Repo(root).remote_urls().get("origin", "")
    except PromoteError:
        return None
    m = _GITHUB.match(url)
    return f"{m.group(1)}/{m.group(2)}" if m else None


def survey_ci(root: Path, config: Config, inventory: Sequence[str]) -> CIReport:
    """Read the workflows and decide, for every test id in `inventory`, whether some CI job runs it."""
    repository = repository_of(root, config.ci.repository)
    jobs, problems = read_workflows(root, repository)
    noxfiles: dict[str, Noxfile | str] = {}
    plans = [plan(job, root, config.ci, repository, noxfiles) for job in jobs]
    testing = [p for p in plans if p.commands]
    run_by: Counter[int] = Counter()
    not_run: list[NotRun] = []
    undecided: list[tuple[str, str]] = []
    for raw in inventory:
        if not jobs and not problems:
            undecided.append((raw, f"no GitHub Actions workflows in {WORKFLOWS}"))
            continue
        test = NodeId.parse(raw)
        decisions: list[Decision] = []
        for index, p in enumerate(testing):
            decision = p.decide(test, root)
            if decision.verdict == RUN:
                run_by[index] += 1
            decisions.append(decision)
        if any(d.verdict == RUN for d in decisions):
            continue
        maybe = [d.why for d in decisions if d.verdict != DROPPED]
        if maybe:
            undecided.append((raw, maybe[0]))
        else:
            filters = list(dict.fromkeys(d.why for d in decisions if not d.scope))
            if filters:
                not_run.append(NotRun(raw, "; ".join(filters), filters[0]))
            else:
                why = "no CI test command covers it" if decisions else "no CI job runs pytest or unittest"
                not_run.append(NotRun(raw, why, None))
    findings = [Finding("ci-workflow-invalid", "error", p.source, p.message) for p in problems]
    findings += [_unreachable(p) for p in plans if p.unreachable]
    findings += _filtered(not_run, Counter(NodeId.parse(raw).module for raw in inventory))
    reports = tuple(_report(p, run_by[testing.index(p)] if p in testing else 0) for p in plans)
    return CIReport(
        repository=repository,
        jobs=reports,
        problems=tuple(p.message for p in problems),
        inventory=len(inventory),
        run=len(inventory) - len(not_run) - len(undecided),
        not_run=tuple(not_run),
        undecided=tuple(undecided),
        findings=tuple(findings),
        workflows=len({j.source for j in jobs} | {p.source for p in problems}),
    )


def audit_ci(root: Path, config: Config, inventory: Sequence[str]) -> CheckOutcome:
    """The CI gate: fail on tests no CI job runs or jobs that cannot run; undecided on what cannot be read."""
    return outcome(survey_ci(root, config, inventory))


def outcome(r: CIReport) -> CheckOutcome:
    """The CheckOutcome (status, reason, evidence lines, findings) of a CI survey."""
    running = [j for j in r.jobs if j.state == RUNS_HERE and j.tests_run]
    evidence = [
        f"{r.workflows} workflow file(s) in {WORKFLOWS}, {len(r.jobs)} job(s); repository {r.repository or 'unknown'}",
        *r.problems,
    ]
    for j in r.jobs:
        state = "" if j.state == RUNS_HERE else f" {j.why}"
        count = f": runs {j.tests_run} of {r.inventory} test ids" if j.commands else ": runs no tests"
        evidence.append(f"job `{j.job}` of {j.source} on [{j.runs_on}]{state}{count}")
        evidence += [f"  `{c}`" for c in j.commands]
    evidence.append(f"{len(running)} job(s) run {r.run} of {r.inventory} test ids")
    for why, n in Counter(why for _, why in r.undecided).most_common():
        evidence.append(f"{n} test id(s) undecided: {why}")
    errors = [f for f in r.findings if f.severity == "error"]
    if errors:
        parts = []
        if r.not_run:
            parts.append(f"{len(r.not_run)} of {r.inventory} test ids are run by no CI job")
        unreachable = sum(f.check == "ci-unreachable-runner" for f in r.findings)
        if unreachable:
            parts.append(f"{unreachable} job(s) cannot run in this repository")
        if r.problems:
            parts.append(f"{len(r.problems)} workflow file(s) GitHub would refuse")
        return CheckOutcome(NAME, FAIL, "; ".join(parts), tuple(evidence), r.findings)
    if not r.workflows:
        why = f"no GitHub Actions workflows in {WORKFLOWS} (the audit reads no other CI)"
        return CheckOutcome(NAME, UNDECIDED, why, tuple(evidence), r.findings)
    if not r.inventory:
        why = "no test inventory to compare with (run `promote test` first)"
        return CheckOutcome(NAME, UNDECIDED, why, tuple(evidence), r.findings)
    if r.undecided:
        why = f"{len(r.undecided)} of {r.inventory} test ids cannot be decided: {r.undecided[0][1]}"
        return CheckOutcome(NAME, UNDECIDED, why, tuple(evidence), r.findings)
    return CheckOutcome(NAME, PASS, f"CI runs all {r.inventory} test ids", tuple(evidence), r.findings)


def _unreachable(p: JobPlan) -> Finding:
    subject = f"{p.job.source}: job {p.job.name}"
    return Finding("ci-unreachable-runner", "error", subject, f"{p.label} {p.why}; none of its tests run in CI")


def _filtered(not_run: list[NotRun], per_module: Counter[str]) -> list[Finding]:
    """One finding per module when CI runs none of its tests for one reason, else one per test."""
    by_module: dict[str, list[NotRun]] = {}
    for n in not_run:
        by_module.setdefault(NodeId.parse(n.test).module, []).append(n)
    found = []
    for module, tests in by_module.items():
        whys = {n.why for n in tests}
        if len(tests) == per_module[module] and len(whys) == 1:
            message = f"no CI job runs {module} ({len(tests)} test(s)): {tests[0].why}"
            found.append(Finding("ci-filtered", "error", module, message, tests[0].cause))
        else:
            found += [Finding("ci-filtered", "error", n.test, f"no CI job runs it: {n.why}", n.cause) for n in tests]
    return found


def _report(p: JobPlan, tests_run: int) -> JobReport:
    runs_on = ", ".join(p.job.labels) if p.job.labels is not None else "unknown"
    return JobReport(p.job.source, p.job.name, runs_on, p.state, p.why, tuple(c.text for c in p.commands), tests_run)
