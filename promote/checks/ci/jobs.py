"""Turn one workflow job into what it runs: can it run here at all, and which test commands it has."""

from __future__ import annotations

import fnmatch
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from promote.checks.ci.commands import NoxCall, Opaque, classify
from promote.checks.ci.nox import Noxfile
from promote.checks.ci.pytest_run import PytestRun
from promote.checks.ci.shell import invocations
from promote.checks.ci.terms import RUN, RUNS, Decision, NodeId, label
from promote.checks.ci.unittest_run import UnittestRun
from promote.checks.ci.workflows import Job
from promote.config import CIConfig
from promote.core.vocab import NEVER, UNDECIDED, JobReach
from promote.core.vocab import RUNS_HERE as RUNS_HERE

HOSTED = ("ubuntu-*", "macos-*", "windows-*")
MAX_SCRIPT_BYTES = 1_000_000


@dataclass(frozen=True)
class Command:
    """One test command of a job; `run` None when it may run tests in a way the audit cannot read."""

    text: str
    run: PytestRun | UnittestRun | None
    why: str = ""  # why it cannot be read, or why its step may not run

    def decide(self, test: NodeId, root: Path) -> Decision:
        if self.run is None:
            return Decision("undecided", f"`{self.text}`: {self.why}")
        decision = self.run.decide(test, root)
        if decision.verdict == RUN and self.why:
            return Decision("undecided", self.why)
        return decision


@dataclass(frozen=True)
class JobPlan:
    """A job's reachability (runs | never | undecided, with why) and its test commands."""

    job: Job
    state: JobReach
    why: str
    commands: tuple[Command, ...]
    unreachable: bool = False  # `never` because of its runner or a repository pin: a finding of its own

    @property
    def label(self) -> str:
        return label(self.job.source, self.job.name)

    def decide(self, test: NodeId, root: Path) -> Decision:
        """Whether this job runs `test` on this repository's CI, naming the job in every reason."""
        decisions = [c.decide(test, root) for c in self.commands]
        job = self.subject
        if any(d.verdict == RUN for d in decisions):
            trigger = self.job.trigger
            if self.state != NEVER and trigger.filtered() and not trigger.fires_for(test.module):
                events = ", ".join(e.describe() for e in trigger.events)
                why = f"{self.label} does not start for a change to {test.module} (on: {events})"
                return Decision("dropped", why, subject=job)
            if self.state == RUNS_HERE:
                return RUNS
            return Decision("dropped" if self.state == NEVER else "undecided", f"{self.label} {self.why}", subject=job)
        undecided = [d.why for d in decisions if d.verdict == "undecided"]
        if undecided and self.state != NEVER:
            return Decision("undecided", f"{'; '.join(dict.fromkeys(undecided))} in {self.label}", subject=job)
        if undecided:  # the job never runs here, whatever its commands would select
            return Decision("dropped", f"{self.label} {self.why}", subject=job)
        filters = [d.why for d in decisions if not d.scope]
        shown = " and ".join(dict.fromkeys(filters or [d.why for d in decisions]))
        return Decision("dropped", f"{shown} in {self.label}", scope=not filters, subject=f"{job}: {shown}")

    @property
    def subject(self) -> str:
        """The job as a finding names it: `source: job name`."""
        return f"{self.job.source}: job {self.job.name}"


def available(label_: str, ci: CIConfig) -> bool:
    """A runner label this repository has: configured, or a GitHub-hosted one (unless configured otherwise)."""
    name = label_.casefold()
    if ci.runners is not None and name in (r.casefold() for r in ci.runners):
        return True
    return ci.hosted_available and name != "self-hosted" and any(fnmatch.fnmatchcase(name, p) for p in HOSTED)


def plan(job: Job, root: Path, ci: CIConfig, repository: str | None, noxfiles: dict[str, Noxfile | str]) -> JobPlan:
    """Reachability and test commands of `job`."""
    commands = tuple(_commands(job, root, noxfiles))
    if job.trigger.guards is False:
        return JobPlan(job, NEVER, job.trigger.why, commands)
    cond = job.condition
    if cond.value is False:
        if cond.repository:
            here = repository or "this repository"
            why = f"runs only in another repository ({cond.why} is false in {here}, e.g. in a fork)"
            return JobPlan(job, NEVER, why, commands, unreachable=True)
        return JobPlan(job, NEVER, f"never runs ({cond.why} is false)", commands)
    if job.labels is not None:
        missing = [x for x in job.labels if not available(x, ci)]
        if missing and ci.runners is None:
            # Which self-hosted runners the repository has is unknown until [promote.ci] runners says.
            labels = ", ".join(job.labels)
            why = f"needs runner [{labels}]; set [promote.ci] runners to say whether this repository has it"
            return JobPlan(job, UNDECIDED, why, commands)
        if missing:
            have = ", ".join(ci.runners or ()) or "none configured"
            why = f"needs runner [{', '.join(job.labels)}], which this repository does not have (runners: {have})"
            return JobPlan(job, NEVER, why, commands, unreachable=True)
    if cond.value is None:
        return JobPlan(job, UNDECIDED, f"may not run: {cond.why}", commands)
    if job.trigger.guards is None:
        return JobPlan(job, UNDECIDED, job.trigger.why, commands)
    if job.labels is None:
        return JobPlan(job, UNDECIDED, f"runner unknown: {job.labels_why}", commands)
    return JobPlan(job, RUNS_HERE, "", commands)


def _commands(job: Job, root: Path, noxfiles: dict[str, Noxfile | str]) -> list[Command]:
    out: list[Command] = []
    if job.calls:
        out.append(Command(f"uses: {job.calls}", None, "a reusable workflow of another repository is not read"))
    for step in job.steps:
        if step.condition.value is False:
            continue
        maybe = f"its step may not run: {step.condition.why}" if step.condition.value is None else ""
        if step.opaque:
            if "pytest" in step.script or "unittest" in step.script:
                out.append(Command(step.script.strip().splitlines()[0], None, step.opaque))
            continue
        for inv in invocations(step.script, cwd=step.cwd, env=dict(step.env), read_script=_reader(root)):
            found = classify(inv, root)
            if isinstance(found, Opaque):
                out.append(Command(found.text, None, found.why))
            elif isinstance(found, NoxCall):
                out.extend(_nox(found, root, noxfiles, maybe))
            elif found is not None:
                out.append(Command(found.text, found, maybe))
    return out


def _nox(call: NoxCall, root: Path, noxfiles: dict[str, Noxfile | str], maybe: str) -> list[Command]:
    if call.noxfile not in noxfiles:
        noxfiles[call.noxfile] = Noxfile.read(root, call.noxfile)
    noxfile = noxfiles[call.noxfile]
    if isinstance(noxfile, str):
        return [Command(call.text, None, noxfile)]
    runs, unreadable = noxfile.expand(call)
    out = [Command(call.text, None, r) for r in unreadable]
    for session, inv in runs:
        found = classify(inv, root)
        text = f"{call.text} (session {session}: {found.text if found else ''})"
        if isinstance(found, Opaque):
            out.append(Command(text, None, found.why))
        elif isinstance(found, (PytestRun, UnittestRun)):
            out.append(Command(text, found, maybe))
    return out


def _reader(root: Path) -> Callable[[str], str | None]:
    """Read repository shell scripts that `run:` steps call, so their commands are audited too."""

    def read(rel: str) -> str | None:
        path = root / rel
        try:
            if not path.is_file() or path.stat().st_size > MAX_SCRIPT_BYTES:
                return None
            text = path.read_text(errors="replace")
        except OSError:
            return None
        first = text.split("\n", 1)[0]
        shell_script = path.suffix in (".sh", ".bash") or (first.startswith("#!") and first.rstrip().endswith("sh"))
        return text if shell_script else None

    return read
