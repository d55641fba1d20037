"""Where a repository's tests are: the test roots its inventory collects from, and what named each one.

Three things name a root: the repository's own pytest configuration (`testpaths` of the file at its top), the
tracked test modules `test_paths` matches (each under its test directory), and the directories the CI's test
commands name (given by the caller, who reads the CI). A root inside another is left out: collecting the outer
one, as pytest does when given that directory, collects it too.
"""

from __future__ import annotations

import fnmatch
import glob
import posixpath
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from promote.core import paths
from promote.core.pytest_ini import CANDIDATES, read_ini

# pytest's default `python_files`: a file of another name is no test module unless a configuration says so.
TEST_MODULES = ("test_*.py", "*_test.py")
# A directory of this name holds a suite: its tests are counted under it, not under each subdirectory.
TEST_DIRS = ("tests", "test")
CONFIGURATION = "the repository's pytest configuration"
TEST_PATHS = "test_paths"


@dataclass(frozen=True)
class RootSpec:
    """A directory to collect tests from (repo-relative, "" for the repository's top) and what named it."""

    path: str
    sources: tuple[str, ...]


def directory_of(module: str, root: str) -> str:
    """The test directory a module is counted under: its outermost `tests` directory below `root`, else `root`."""
    parts = module.split("/")[:-1]
    start = len(root.split("/")) if root else 0
    for i in range(start, len(parts)):
        if parts[i] in TEST_DIRS:
            return "/".join(parts[: i + 1])
    return root


def discovered(files: Iterable[str], test_paths: Sequence[str]) -> list[str]:
    """The test directories of the tracked files that `test_paths` matches and pytest would take for test modules."""
    found: dict[str, None] = {}
    for rel in files:
        name = posixpath.basename(rel)
        if any(fnmatch.fnmatchcase(name, p) for p in TEST_MODULES) and paths.matches(rel, test_paths):
            parent = posixpath.dirname(rel)
            found.setdefault(directory_of(rel, "") or parent, None)
    return list(found)


def configured(root: Path) -> list[str]:
    """The directories `testpaths` of the pytest configuration at the repository's top names (none: no such file)."""
    ini = next((i for i in (read_ini(root, name) for name in CANDIDATES) if i is not None), None)
    found: dict[str, None] = {}
    for pattern in ini.testpaths if ini is not None else ():
        for hit in sorted(glob.glob(pattern, root_dir=root, recursive=True)):
            rel = posixpath.normpath(hit.replace("\\", "/"))
            if rel.startswith("../") or rel == "..":
                continue
            found.setdefault("" if rel == "." else rel if (root / rel).is_dir() else posixpath.dirname(rel), None)
    return list(found)


def merged(named: Iterable[tuple[str, str]]) -> tuple[RootSpec, ...]:
    """(directory, source) pairs as roots, each once with all its sources; a root inside another is left out."""
    sources: dict[str, list[str]] = {}
    for path, source in named:
        rel = "" if path in ("", ".") else posixpath.normpath(path)
        sources.setdefault(rel, [])
        if source not in sources[rel]:
            sources[rel].append(source)
    kept: list[str] = []
    for rel in sorted(sources, key=lambda p: (p.count("/") if p else -1, p)):
        if not any(_under(rel, outer) for outer in kept):
            kept.append(rel)
    return tuple(RootSpec(rel, tuple(sources[rel])) for rel in sorted(kept))


def _under(path: str, outer: str) -> bool:
    return not outer or path == outer or path.startswith(outer + "/")
