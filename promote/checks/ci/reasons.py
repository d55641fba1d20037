"""Why no CI job runs a test, or why that cannot be told: a typed value the audit groups and counts by.

A reason holds the job itself and the commands' own words (a filter as written); the sentence a finding or
an evidence line says is made from it by `sentence` and `subject_of`, and nothing is keyed on that text.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from promote.checks.ci.terms import label
from promote.checks.ci.workflows import WORKFLOWS, Job
from promote.core.vocab import assert_never

ReasonKind = Literal[
    "filtered",  # a filter of the job's test commands drops it (-k, -m, --ignore, --deselect, unittest -p)
    "outside",  # the job's test commands do not reach it at all (other paths, not a TestCase)
    "not-started",  # the workflow's `paths` filters do not start it for a change to the test's module
    "job-never",  # the job never runs in this repository (its runner, its `if:`, its `on:`)
    "job-undecided",  # whether the job runs in this repository cannot be told
    "commands-undecided",  # a command that may run it cannot be read, or its step may not run
    "no-command",  # jobs run tests, but no test command of any covers it
    "no-test-job",  # no job runs pytest or unittest
    "no-workflows",  # there is no workflow to read
]


@dataclass(frozen=True)
class Reason:
    """Why `job` does not run a test, or may not (`job` None: no job in particular).

    `job` is the job (or matrix entry) itself, not its name: two entries whose names render alike are two
    reasons. `details` are what the sentence quotes: the filters or unreadable commands as written, the
    test's module (`not-started`), or the job's reach as `plan` worded it (`job-never`, `job-undecided`).
    """

    kind: ReasonKind
    job: Job | None = None
    details: tuple[str, ...] = ()

    @property
    def drops(self) -> bool:
        """The test is not run (rather than undecided)."""
        kind = self.kind
        if kind == "filtered" or kind == "outside" or kind == "not-started" or kind == "job-never":
            return True
        if kind == "no-command" or kind == "no-test-job":
            return True
        if kind == "job-undecided" or kind == "commands-undecided" or kind == "no-workflows":
            return False
        assert_never(kind)


def sentence(r: Reason) -> str:
    """The reason as a finding's message and the evidence say it."""
    kind = r.kind
    if kind == "no-command":
        return "no CI test command covers it"
    if kind == "no-test-job":
        return "no CI job runs pytest or unittest"
    if kind == "no-workflows":
        return f"no GitHub Actions workflows in {WORKFLOWS}"
    job = r.job
    assert job is not None, f"a {kind} reason names its job"
    where = label(job.source, job.name)
    if kind == "filtered" or kind == "outside":
        return f"{' and '.join(r.details)} in {where}"
    if kind == "commands-undecided":
        return f"{'; '.join(r.details)} in {where}"
    if kind == "not-started":
        events = ", ".join(e.describe() for e in job.trigger.events)
        return f"{where} does not start for a change to {r.details[0]} (on: {events})"
    if kind == "job-never" or kind == "job-undecided":
        return f"{where} {r.details[0]}"
    assert_never(kind)


def subject_of(r: Reason) -> str:
    """What a finding about the reason names: the job, and the filter when one dropped the test."""
    if r.job is None:
        return WORKFLOWS
    if r.kind == "filtered" or r.kind == "outside":
        return f"{job_subject(r.job)}: {' and '.join(r.details)}"
    return job_subject(r.job)


def job_subject(job: Job) -> str:
    """The job as a finding names it: `source: job name`."""
    return f"{job.source}: job {job.name}"
