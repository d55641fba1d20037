"""`promote init`'s proposal: a test package for each test directory of the repository, with its test count.

The directories and counts are the audit's own inventory (its test roots, one `pytest --collect-only` each, side by
side), and who runs each directory now is the CI survey's answer: a new user starts from the whole repository.
"""

from __future__ import annotations

import posixpath
import re
import sys
from pathlib import Path

from promote.checks.ci import survey_ci
from promote.config import CONFIG_NAME, Config
from promote.config.starter import Proposed
from promote.core.pytest_ini import PytestConfigError, locate
from promote.evidence import inventory_audit
from promote.runners import environments
from promote.runners.inventory import Collecting, Collector, TestRoot, tally
from promote.runners.test_roots import TEST_DIRS

_NOT_NAME = re.compile(r"[^A-Za-z0-9._-]+")


def propose(root: Path, trunk: str) -> tuple[Proposed, ...]:
    """A package for each directory of tests in the repository at `root`, biggest first."""
    config = Config(path=root / CONFIG_NAME, prefix="promote", trunk=trunk, mirrors=None)
    found = inventory_audit.roots(root, config)
    envs = _Environments(root)
    # Each root counted by the interpreter of the project that holds it: promote's own may not import it.
    collecting = Collecting(
        root,
        [Collector(r, envs.python(where(root, r.path or ".")[0])) for r in found],
        inventory_audit.slots(alone=True),
    )
    collections = collecting.results()
    report = survey_ci(root, config, [], [t for c in collections for t in (*c.ids, *c.errors)])
    whole = tally(collections, {}, inventory_audit.owner_of(report))
    by_dir: dict[str, list[TestRoot]] = {}
    for r in whole.roots:
        by_dir.setdefault(r.path, []).append(r)
    taken: set[str] = set()
    proposed = []
    for tests, roots in sorted(by_dir.items(), key=lambda kv: (-sum(r.count for r in kv[1]), kv[0])):
        # Who runs most of them says who runs the directory.
        most = max(roots, key=lambda r: r.count)
        path, args = where(root, tests)
        env = envs.of(path)
        python = environments.written(env.python, root / path, root) if env is not None else None
        proposed.append(Proposed(_name(root, path, taken), path, args, tests, sum(r.count for r in roots), most.owner,
                                 most.by, python, env.source if env is not None else None, envs.python(path),
                                 sum(len(r.errors) for r in roots)))  # fmt: skip
    return tuple(proposed)


class _Environments:
    """The environment of each package directory, looked for once (asking hatch or poetry takes a moment)."""

    def __init__(self, root: Path) -> None:
        self._root = root
        self._found: dict[str, environments.Environment | None] = {}

    def of(self, path: str) -> environments.Environment | None:
        if path not in self._found:
            self._found[path] = environments.find(self._root / path, self._root)
        return self._found[path]

    def python(self, path: str) -> str:
        """The interpreter that counts the tests of the package at `path`: its environment's, else promote's."""
        env = self.of(path)
        return str(env.python) if env is not None else sys.executable


def where(root: Path, tests: str) -> tuple[str, tuple[str, ...]]:
    """(the package's directory, its args) for the tests in `tests`: from the directory of the pytest configuration
    that governs them (inside the repository), else from the project holding a `tests` directory."""
    rel = "" if tests == "." else tests
    try:
        found = locate(root / rel)
    except PytestConfigError:
        found = None
    top = root.resolve()
    config_dir = Path(found[1].directory).resolve() if found is not None else None
    if config_dir is not None and config_dir.is_relative_to(top):
        path = config_dir.relative_to(top).as_posix()
    elif posixpath.basename(rel) in TEST_DIRS:
        path = posixpath.dirname(rel)
    else:
        path = rel
    path = "" if path == "." else path
    args = () if path == rel else (posixpath.relpath(rel or ".", path or "."),)
    return path or ".", args


def _name(root: Path, path: str, taken: set[str]) -> str:
    """A package name from its directory (the repository's for the top), unique among those proposed."""
    base = _NOT_NAME.sub("-", posixpath.basename(path) if path != "." else root.name).lstrip(".-") or "tests"
    name, n = base, 1
    while name in taken:
        n += 1
        name = f"{base}-{n}"
    taken.add(name)
    return name
