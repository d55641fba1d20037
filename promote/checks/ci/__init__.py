"""CI audit: which collected tests no CI job runs, and which jobs cannot run here at all."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from promote.checks.ci.jobs import RUNS_HERE, JobPlan, Readers, plan
from promote.checks.ci.reasons import Reason, sentence, subject_of
from promote.checks.ci.runner_station import runner_station
from promote.checks.ci.terms import NodeId
from promote.checks.ci.tools import Tools
from promote.checks.ci.workflows import WORKFLOWS, Job, read_workflows
from promote.config import CIConfig, Config
from promote.core.errors import PromoteError
from promote.core.findings import Finding, Location
from promote.core.git import Repo
from promote.core.outcome import FAIL, PASS, UNDECIDED, CheckOutcome
from promote.core.station import Station

NAME = "ci"
_GITHUB = re.compile(r"^(?:[a-z+]+://)?(?:[^@/]+@)?github\.com[:/]([^/]+)/([^/]+?)(?:\.git)?/?$", re.IGNORECASE)


@dataclass(frozen=True)
class NotRun:
    """A test id no CI job runs, and every reason a job drops it for; the first one groups its finding."""

    test: str
    reasons: tuple[Reason, ...]

    @property
    def why(self) -> str:
        return "; ".join(dict.fromkeys(sentence(r) for r in self.reasons))

    @property
    def cause(self) -> str | None:
        """The first reason, as its finding's cause; None when it is no job's (nothing covers the test)."""
        return sentence(self.reasons[0]) if self.reasons[0].job is not None else None

    @property
    def subject(self) -> str:
        """What its finding names: the job (and filter) of the first reason, the workflows without one."""
        return subject_of(self.reasons[0])


@dataclass(frozen=True)
class UndecidedTest:
    """A test id no job is seen to run, and the first reason some job may (what could not be evaluated)."""

    test: str
    reason: Reason

    @property
    def why(self) -> str:
        return sentence(self.reason)


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
    missing_tools: tuple[str, ...] = ()  # tools its commands need to be read, not installed where promote runs
    # What its runner has (None: its labels do not say), and the test ids it runs, as `collected` names them.
    runner: Station | None = None
    tests: tuple[str, ...] = ()


@dataclass(frozen=True)
class CIReport:
    """Every job, every test id's fate, and the findings."""

    repository: str | None
    jobs: tuple[JobReport, ...]
    problems: tuple[str, ...]
    collected: int  # test ids the run collected
    run: int
    not_run: tuple[NotRun, ...]
    undecided: tuple[UndecidedTest, ...]
    findings: tuple[Finding, ...]
    workflows: int
    # Test ids the repository's inventory found that no package ran and no CI job runs: told as `unowned-tests`
    # by the inventory, not as `ci-filtered` here (one finding per cause).
    unowned: tuple[NotRun, ...] = ()
    job_of: dict[str, str] = field(default_factory=dict)  # the first job that runs each test id it runs

    @property
    def left_out(self) -> int:
        """Test ids no CI job runs, the inventory's included."""
        return len(self.not_run) + len(self.unowned)


@dataclass(frozen=True)
class CIOutcome(CheckOutcome):
    """The CI audit's outcome, with the number of test commands its jobs run (each a CI step) as a value, and the
    test ids no job runs (each test's story keeps them)."""

    steps: int = 0
    not_run: tuple[NotRun, ...] = ()
    jobs: tuple[JobReport, ...] = ()  # each job's runner and the tests it runs: places a test can run


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


def job_plans(
    root: Path, ci: CIConfig, repository: str | None, jobs: Sequence[Job], tool_path: str | None = None
) -> list[JobPlan]:
    """Each job's reachability and test commands; the tools are asked what they run once per question."""
    readers = Readers(root, {}, Tools(root, tool_path, collecting=True))
    for job in jobs:  # noting the questions for the tools, so that tox answers them in one call
        plan(job, ci, repository, readers)
    readers.tools.prefetch()
    return [plan(job, ci, repository, readers) for job in jobs]


def survey_ci(
    root: Path,
    config: Config,
    collected: Sequence[str],
    inventory: Sequence[str] = (),
    *,
    tool_path: str | None = None,
) -> CIReport:
    """Read the workflows and decide, for every test id in `collected` (what the packages ran) and in `inventory`
    (the rest of the repository's tests), whether some CI job runs it. `tool_path`: where tox, make and hatch are
    looked for (default: beside promote's interpreter, then PATH)."""
    repository = repository_of(root, config.ci.repository)
    jobs, problems = read_workflows(root, repository, config.trunk)
    plans = job_plans(root, config.ci, repository, jobs, tool_path)
    testing = [p for p in plans if p.commands]
    run_by: dict[int, list[str]] = {i: [] for i in range(len(testing))}
    job_of: dict[str, str] = {}
    not_run: list[NotRun] = []
    unowned: list[NotRun] = []
    undecided: list[UndecidedTest] = []
    ran = set(collected)
    every = [*collected, *(raw for raw in dict.fromkeys(inventory) if raw not in ran)]
    for raw in every:
        if not jobs and not problems:
            undecided.append(UndecidedTest(raw, Reason("no-workflows")))
            continue
        fate = _fate(raw, testing, root, run_by, job_of)
        if isinstance(fate, UndecidedTest):
            undecided.append(fate)
        elif fate is not None:
            (not_run if raw in ran else unowned).append(fate)
    findings = [
        Finding("ci-workflow-invalid", "error", p.source, p.message, location=Location(p.source, p.line))
        for p in problems
    ]
    findings += _grouped(not_run, plans, Counter(NodeId.parse(raw).module for raw in every))
    reports = tuple(_report(p, run_by[testing.index(p)] if p in testing else []) for p in plans)
    return CIReport(
        repository=repository,
        jobs=reports,
        problems=tuple(p.message for p in problems),
        collected=len(every),
        run=len(every) - len(not_run) - len(unowned) - len(undecided),
        not_run=tuple(not_run),
        undecided=tuple(undecided),
        findings=tuple(findings),
        workflows=len({j.source for j in jobs} | {p.source for p in problems}),
        unowned=tuple(unowned),
        job_of=job_of,
    )


def _fate(
    raw: str, testing: Sequence[JobPlan], root: Path, run_by: dict[int, list[str]], job_of: dict[str, str]
) -> NotRun | UndecidedTest | None:
    """None when some job runs the test (noted in `run_by` and `job_of`); else why it is not run, or may not be."""
    test = NodeId.parse(raw)
    reasons: list[Reason] = []
    for index, p in enumerate(testing):
        reason = p.decide(test, root)
        if reason is None:
            run_by[index].append(raw)
            job_of.setdefault(raw, p.label)
        else:
            reasons.append(reason)
    if len(reasons) < len(testing):
        return None
    maybe = [(r, p) for r, p in zip(reasons, testing, strict=True) if not r.drops]
    if maybe:
        # Said by a job with a test command the audit reads, where one is undecided: not a packaging job's `rstcheck`.
        return UndecidedTest(raw, min(maybe, key=lambda rp: all(c.run is None for c in rp[1].commands))[0])
    filters = tuple(dict.fromkeys(r for r in reasons if r.kind != "outside"))
    return NotRun(raw, filters or (Reason("no-command" if reasons else "no-test-job"),))


def outcome(r: CIReport) -> CIOutcome:
    """The CheckOutcome (status, reason, evidence lines, findings) of a CI survey."""
    running = [j for j in r.jobs if j.state == RUNS_HERE and j.tests_run]
    steps = sum(len(j.commands) for j in r.jobs)
    evidence = [
        f"{r.workflows} workflow file(s) in {WORKFLOWS}, {len(r.jobs)} job(s); repository {r.repository or 'unknown'}",
        *r.problems,
    ]
    for j in r.jobs:
        state = "" if j.state == RUNS_HERE else f" {j.why}"
        count = f": runs {j.tests_run} of {r.collected} test ids" if j.commands else ": runs no tests"
        evidence.append(f"job `{j.job}` of {j.source} on [{j.runs_on}]{state}{count}")
        evidence += [f"  `{c}`" for c in j.commands]
    evidence.append(f"{len(running)} job(s) run {r.run} of {r.collected} test ids")
    for tool, n in Counter(t for j in r.jobs for t in j.missing_tools).items():
        evidence.append(f"{tool} is not installed where promote runs: {n} job(s) unread (install it beside promote)")
    for reason, n in Counter(u.reason for u in r.undecided).most_common():
        evidence.append(f"{n} test id(s) undecided: {sentence(reason)}")
    errors = [f for f in r.findings if f.severity == "error"]
    if errors:
        parts = []
        if r.left_out:
            parts.append(f"{r.left_out} of {r.collected} test ids are run by no CI job")
        if r.undecided:
            parts.append(f"{len(r.undecided)} of {r.collected} test ids cannot be decided")
        unreachable = sum(f.check == "ci-unreachable-runner" for f in r.findings)
        if unreachable:
            parts.append(f"{unreachable} job(s) cannot run in this repository")
        if r.problems:
            parts.append(f"{len(r.problems)} workflow file(s) GitHub would refuse")
        return CIOutcome(NAME, FAIL, "; ".join(parts), tuple(evidence), r.findings, steps, r.not_run, r.jobs)
    if not r.workflows:
        why = f"no GitHub Actions workflows in {WORKFLOWS} (the audit reads no other CI)"
        return CIOutcome(NAME, UNDECIDED, why, tuple(evidence), r.findings, steps, r.not_run, r.jobs)
    if not r.collected:
        why = "no test inventory to compare with (run `promote test` first)"
        return CIOutcome(NAME, UNDECIDED, why, tuple(evidence), r.findings, steps, r.not_run, r.jobs)
    if r.unowned:
        # Only tests no package runs are left out: `unowned-tests` names them, and "all" would not be true.
        why = f"{r.left_out} of {r.collected} test ids are run by no CI job (nor by any package: see unowned-tests)"
        return CIOutcome(NAME, FAIL, why, tuple(evidence), r.findings, steps, r.not_run, r.jobs)
    if r.undecided:
        why = f"{len(r.undecided)} of {r.collected} test ids cannot be decided: {r.undecided[0].why}"
        return CIOutcome(NAME, UNDECIDED, why, tuple(evidence), r.findings, steps, r.not_run, r.jobs)
    return CIOutcome(
        NAME, PASS, f"CI runs all {r.collected} test ids", tuple(evidence), r.findings, steps, r.not_run, r.jobs
    )


def _grouped(not_run: list[NotRun], plans: list[JobPlan], per_module: Counter[str]) -> list[Finding]:
    """One finding per job that cannot run and per filter, each listing the modules and tests it leaves out.

    A test is grouped under its first reason (a filter, or a job that never runs here), as a typed key:
    two jobs whose reasons read alike stay two findings. The tests only an unreachable job would run are
    told in that job's `ci-unreachable-runner` finding, not once more as `ci-filtered`.
    """
    groups: dict[Reason, list[NotRun]] = {}
    for n in not_run:
        groups.setdefault(n.reasons[0], []).append(n)
    found = []
    for p in plans:
        if p.unreachable:
            tests = groups.pop(p.reach, [])
            left_out = f": {_counted(tests, per_module)} no other job runs" if tests else ""
            message = f"{sentence(p.reach)}; none of its tests run in CI{left_out}"
            found.append(Finding("ci-unreachable-runner", "error", p.subject, message, location=Location(p.job.source)))
    for tests in groups.values():
        whys = dict.fromkeys(sentence(r) for n in tests for r in n.reasons)
        message = f"no CI job runs {_counted(tests, per_module)}: {'; '.join(whys)}"
        job = tests[0].reasons[0].job
        where = Location(job.source) if job is not None else None
        found.append(Finding("ci-filtered", "error", tests[0].subject, message, tests[0].cause, location=where))
    return found


def _counted(tests: list[NotRun], per_module: Counter[str], shown: int = 10, named: int = 5) -> str:
    """`N test id(s) in M module(s) (a, b (1 of 2: test_x) +K more)`, every module up to `shown`.

    A module is named alone when all its tests are in (the filter drops the module); of a module
    only partly in, the tests are named when the whole group has at most `named` of them.
    """
    ids: dict[str, list[str]] = {}
    for n in tests:
        node = NodeId.parse(n.test)
        ids.setdefault(node.module, []).append("::".join(node.parts) or n.test)
    names = []
    for m, inside in ids.items():
        k = len(inside)
        listed = f": {', '.join(inside)}" if len(tests) <= named else ""
        names.append(m if k == per_module[m] else f"{m} ({k} of {per_module[m]}{listed})")
    more = f" +{len(names) - shown} more" if len(names) > shown else ""
    return f"{len(tests)} test id(s) in {len(names)} module(s) ({', '.join(names[:shown])}{more})"


def _report(p: JobPlan, tests: list[str]) -> JobReport:
    runs_on = ", ".join(p.job.labels) if p.job.labels is not None else "unknown"
    runner = runner_station(f"[{runs_on}]", p.job.labels) if p.job.labels is not None else None
    missing = tuple(dict.fromkeys(c.missing for c in p.commands if c.missing))
    commands = tuple(c.text for c in p.commands)
    return JobReport(
        p.job.source, p.job.name, runs_on, p.state, p.why, commands, len(tests),
        missing_tools=missing, runner=runner, tests=tuple(tests),
    )  # fmt: skip
