"""Turn one workflow job into what it runs: can it run here at all, and which test commands it has."""

from __future__ import annotations

import fnmatch
import posixpath
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from promote.checks.ci.commands import Classified, NoxCall, Opaque, ShellCall, classify
from promote.checks.ci.nox import Noxfile
from promote.checks.ci.pytest_run import PytestRun
from promote.checks.ci.reasons import Reason, job_subject
from promote.checks.ci.shell import Invocation, invocations
from promote.checks.ci.terms import RUN, Decision, NodeId, label, show
from promote.checks.ci.tools import Tools
from promote.checks.ci.unittest_run import UnittestRun
from promote.checks.ci.workflows import Job
from promote.config import CIConfig
from promote.core.vocab import NEVER, UNDECIDED, JobReach
from promote.core.vocab import RUNS_HERE as RUNS_HERE

HOSTED = ("ubuntu-*", "macos-*", "windows-*")
MAX_SCRIPT_BYTES = 1_000_000
# A tool that calls a tool (make -> tox -> pytest): followed this many levels.
MAX_DEPTH = 4


@dataclass(frozen=True)
class Command:
    """One test command of a job; `run` None when it may run tests in a way the audit cannot read."""

    text: str
    run: PytestRun | UnittestRun | None
    why: str = ""  # why it cannot be read, or why its step may not run
    missing: str = ""  # the tool that would tell what it runs, not installed where promote runs

    def decide(self, test: NodeId, root: Path) -> Decision:
        if self.run is None:
            return Decision(UNDECIDED, f"`{self.text}`: {self.why}")
        decision = self.run.decide(test, root)
        if decision.verdict == RUN and self.why:
            return Decision(UNDECIDED, self.why)
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

    def decide(self, test: NodeId, root: Path) -> Reason | None:
        """None when this job runs `test` on this repository's CI; else why it does not, or may not."""
        decisions = [c.decide(test, root) for c in self.commands]
        if any(d.verdict == RUN for d in decisions):
            trigger = self.job.trigger
            if self.state != NEVER and trigger.filtered() and not trigger.fires_for(test.module):
                return Reason("not-started", self.job, (test.module,))
            return None if self.state == RUNS_HERE else self.reach
        undecided = _grouped_whys(self.commands, decisions)
        if undecided and self.state != NEVER:
            return Reason("commands-undecided", self.job, undecided)
        if undecided:  # the job never runs here, whatever its commands would select
            return self.reach
        filters = tuple(dict.fromkeys(d.why for d in decisions if not d.scope))
        if filters:
            return Reason("filtered", self.job, filters)
        return Reason("outside", self.job, tuple(dict.fromkeys(d.why for d in decisions)))

    @property
    def reach(self) -> Reason:
        """Why the job itself does not (or may not) run here; its unreachable finding is found by this key."""
        return Reason("job-never" if self.state == NEVER else "job-undecided", self.job, (self.why,))

    @property
    def subject(self) -> str:
        """The job as a finding names it: `source: job name`."""
        return job_subject(self.job)


def _grouped_whys(commands: Sequence[Command], decisions: Sequence[Decision]) -> tuple[str, ...]:
    """Why each undecided command is so; unread commands for the same reason said once, with their texts."""
    unread: dict[str, list[str]] = {}
    whys: list[str] = []
    for command, decision in zip(commands, decisions, strict=True):
        if decision.verdict != UNDECIDED:
            continue
        if command.run is None:
            if command.why not in unread:
                whys.append(command.why)
            unread.setdefault(command.why, []).append(f"`{command.text}`")
        else:
            whys.append(decision.why)
    return tuple(dict.fromkeys(f"{', '.join(unread[w])}: {w}" if w in unread else w for w in whys))


def available(label_: str, ci: CIConfig) -> bool:
    """A runner label this repository has: configured, or a GitHub-hosted one (unless configured otherwise)."""
    name = label_.casefold()
    if ci.runners is not None and name in (r.casefold() for r in ci.runners):
        return True
    return ci.hosted_available and name != "self-hosted" and any(fnmatch.fnmatchcase(name, p) for p in HOSTED)


_SHELLS = {"sh", "bash", "dash", "zsh", "ksh"}


@dataclass
class Readers:
    """What the jobs of one audit share: each noxfile read once, each tool asked each question once."""

    root: Path
    noxfiles: dict[str, Noxfile | str]
    tools: Tools


def plan(job: Job, ci: CIConfig, repository: str | None, readers: Readers) -> JobPlan:
    """Reachability and test commands of `job`."""
    commands = tuple(_commands(job, readers))
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


def _commands(job: Job, readers: Readers) -> list[Command]:
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
        read = _reader(readers.root)
        for inv in invocations(step.script, cwd=step.cwd, env=dict(step.env), read_script=read):
            out.extend(_expand(classify(inv, readers.root), readers, maybe, ""))
    return out


def _expand(found: Classified, readers: Readers, maybe: str, via: str, depth: int = 0) -> list[Command]:
    """The test commands one classified command stands for: nox sessions and tools' commands followed (`via`:
    the chain of commands that led here, shown with each)."""
    if found is None:
        return []
    text = f"{via}: {found.text})" if via else found.text
    if isinstance(found, Opaque):
        return [Command(text, None, found.why)]
    if isinstance(found, (PytestRun, UnittestRun)):
        return [Command(text, found, maybe)]
    if depth >= MAX_DEPTH:
        return [Command(text, None, f"more than {MAX_DEPTH} tools deep, not followed")]
    if isinstance(found, ShellCall):
        # The shell's command line read as a step's script would be: a repository script it names is followed.
        inner = invocations(
            show(found.inv.argv), cwd=found.inv.cwd, env=dict(found.inv.env), read_script=_reader(readers.root)
        )
        runs, out = [("shell", inv) for inv in inner], []
    elif isinstance(found, NoxCall):
        runs, unreadable = _nox_runs(found, readers)
        out = [Command(text, None, r) for r in unreadable]
    else:
        answer = readers.tools.ask(found)
        missing = found.tool if answer.missing else ""
        runs, out = list(answer.runs), ([Command(text, None, answer.why, missing)] if answer.why else [])
    for where, inv in runs:
        out += _expand(classify(inv, readers.root), readers, maybe, f"{text} ({where}", depth + 1)
    return out


def _nox_runs(call: NoxCall, readers: Readers) -> tuple[list[tuple[str, Invocation]], list[str]]:
    if call.noxfile not in readers.noxfiles:
        readers.noxfiles[call.noxfile] = Noxfile.read(readers.root, call.noxfile)
    noxfile = readers.noxfiles[call.noxfile]
    if isinstance(noxfile, str):
        return [], [noxfile]
    runs, unreadable = noxfile.expand(call)
    return [(f"session {session}", inv) for session, inv in runs], unreadable


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
        shell_script = path.suffix in (".sh", ".bash") or _shell_shebang(text.split("\n", 1)[0])
        return text if shell_script else None

    return read


def _shell_shebang(first: str) -> bool:
    """`#!/bin/sh`, `#!/bin/sh -e`, `#!/usr/bin/env bash`: a script a shell runs, whatever flags it is given."""
    if not first.startswith("#!"):
        return False
    words = first[2:].split()
    if words and posixpath.basename(words[0]) == "env":
        words = [w for w in words[1:] if not w.startswith("-")]
    return bool(words) and posixpath.basename(words[0]) in _SHELLS
