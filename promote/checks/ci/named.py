"""The test directories the CI's test commands name: where the repository's inventory collects tests too."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from pathlib import Path

from promote.checks.ci import job_plans, repository_of
from promote.checks.ci.pytest_run import PytestRun
from promote.checks.ci.unittest_run import UnittestRun
from promote.checks.ci.workflows import read_workflows
from promote.config import CIConfig


@dataclass(frozen=True)
class NamedDir:
    """A directory (repo-relative, "" for the root) a CI test command runs tests from, and its job."""

    path: str
    job: str
    command: str


def named_dirs(root: Path, ci: CIConfig, trunk: str) -> tuple[NamedDir, ...]:
    """Every directory a test command of a workflow job names (a file named: its directory), each once."""
    repository = repository_of(root, ci.repository)
    jobs, _ = read_workflows(root, repository, trunk)
    found: dict[str, NamedDir] = {}
    for p in job_plans(root, ci, repository, jobs):
        for command in p.commands:
            for path in _paths(command.run, root):
                found.setdefault(path, NamedDir(path, p.label, command.text))
    return tuple(found.values())


def _paths(run: PytestRun | UnittestRun | None, root: Path) -> list[str]:
    """The directories one command selects tests from, as its own parse read them (never parsed again here)."""
    if isinstance(run, PytestRun):
        named = [rel.partition("::")[0] for rel, _ in run.paths]
    elif isinstance(run, UnittestRun):
        named = [run.start] if run.start is not None else [module for module, _, _ in run.names]
    else:
        return []
    return [rel if (root / rel).is_dir() else posixpath.dirname(rel) for rel in named]
