"""CI jobs as places a test can run: the CI audit's jobs handed to the requirements the run judged.

The runners judge a test against the stations; the CI audit knows which jobs run which tests on which runners.
Neither layer knows the other, so they meet here: a test no station can run, that a CI job runs on a runner
that has what it needs, is bound to that job rather than impossible.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from promote.checks.ci import JobReport, survey_ci
from promote.config import Config
from promote.core.errors import PromoteError
from promote.core.git import Repo
from promote.core.vocab import IMPOSSIBLE, RUNS_HERE
from promote.runners.requirements import with_ci
from promote.runners.suite import RunResult
from promote.runners.summary import CIJob


def collected_ids(root: Path, run: RunResult | None) -> dict[str, tuple[str, str]]:
    """Every test id that ran, relative to the repository root (what CI configurations name): its package and id."""
    ids: dict[str, tuple[str, str]] = {}
    for p in run.packages if run else ():
        # Node ids are rooted at the rootdir pytest chose (a configuration above the package moves it up).
        rooted = p.rootdir.path.as_posix() if p.rootdir is not None else None
        prefix = rooted or os.path.relpath(p.path, root).replace(os.sep, "/")
        base = "" if prefix == "." else f"{prefix}/"
        for nodeid in [*(t.nodeid for t in p.tests if t.parent is None), *p.crashed_tests]:
            ids[f"{base}{nodeid}"] = (p.name, nodeid)
    return ids


def places(root: Path, run: RunResult, jobs: Sequence[JobReport]) -> dict[str, dict[str, tuple[CIJob, ...]]]:
    """By package and test id: the CI jobs that run the test here, on a runner whose labels say what it has."""
    rooted = collected_ids(root, run)
    found: dict[str, dict[str, tuple[CIJob, ...]]] = {}
    for j in jobs:
        if j.state != RUNS_HERE or j.runner is None:
            continue
        job = CIJob(j.source, j.job, j.runs_on, j.runner)
        for test in j.tests:
            if test in rooted:
                package, nodeid = rooted[test]
                tests = found.setdefault(package, {})
                tests[nodeid] = (*tests.get(nodeid, ()), job)
    return found


def in_ci(root: Path, run: RunResult, jobs: Sequence[JobReport]) -> RunResult:
    """`run` with its tests that no station can run judged again against the CI jobs that run them."""
    if not any(b.check == IMPOSSIBLE for p in run.packages for b in p.judged):
        return run
    where = places(root, run, jobs)
    return replace(run, packages=tuple(with_ci(p, where.get(p.name, {})) for p in run.packages))


def surveyed(config: Config, run: RunResult) -> RunResult:
    """`in_ci` for `promote test`, which runs no CI audit: the workflows read here (none, or no repository: as is)."""
    if not any(b.check == IMPOSSIBLE for p in run.packages for b in p.judged):
        return run
    try:
        root = Repo(config.root).root
    except PromoteError:
        return run
    report = survey_ci(root, config, list(collected_ids(root, run)))
    return in_ci(root, run, report.jobs) if report.workflows else run
