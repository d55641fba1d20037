"""The repository's whole test inventory: every test pytest collects from each test root, without running any.

One `python -m pytest --collect-only ROOT` per root, run where the package that holds the root runs (`cd PACKAGE`),
else from the root's project (the directory of the configuration pytest finds for it, or of its setup.py), by that
package's interpreter, in the background while the packages run (`Collecting`). `python -m` puts its directory first
on sys.path: started elsewhere, a test module could import an installed copy of the code instead of the repository's.
`tally` then says who runs each test: a package (its run recorded it), a CI job, or nobody.
"""

from __future__ import annotations

import os
import posixpath
import shutil
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from promote.core.process import run_bounded
from promote.core.pytest_ini import PytestConfigError, locate
from promote.core.vocab import Owner
from promote.runners.collect_output import MAX_BYTES, CollectionUnreadable, read_collection
from promote.runners.test_roots import RootSpec, directory_of

TIMEOUT_S = 600.0  # collecting imports every test module: far longer than that is a hang, not a suite
# pytest's own statuses for a collection that ran: collected, collected with errors, nothing to collect.
COLLECTED = (0, 2, 5)


@dataclass(frozen=True)
class Collector:
    """How one root is collected: by which Python, with which environment added (a package's `env`)."""

    root: RootSpec
    python: str
    env: tuple[tuple[str, str], ...] = ()
    cwd: Path | None = None  # where the package that holds it runs (None: from the root's own project)


@dataclass(frozen=True)
class Collected:
    """What one root's collection found: test ids and uncollectable modules, relative to the repository root."""

    path: str
    sources: tuple[str, ...]
    ids: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()
    error_count: int = 0
    problem: str | None = None  # why nothing could be read from it (it timed out, pytest could not start, ...)

    def to_json(self) -> dict[str, object]:
        return {"path": self.path or ".", "sources": list(self.sources), "count": len(self.ids),
                "errors": self.error_count, "problem": self.problem}  # fmt: skip


def command(python: str, root: str = ".") -> list[str]:
    """The collection's command line for the directory `root` (relative to where it runs)."""
    # --verbosity=-1 is `-q` whatever the configuration's addopts add (`-q` there would make it -qq, no ids);
    # the directory is given, so `testpaths` does not narrow it; no cache is written into the team's tree.
    return [python, "-m", "pytest", "--collect-only", "--verbosity=-1", "-p", "no:cacheprovider", root]


def yielding(argv: list[str]) -> list[str]:
    """`argv` at a lower CPU priority (`nice -n 10`, where there is one): the collection runs beside the packages'
    own runs, which are the audit's critical path, and takes the cores they leave idle."""
    nice = shutil.which("nice")
    return [nice, "-n", "10", *argv] if nice is not None else argv


def collect(repo: Path, c: Collector) -> Collected:
    """Collect one root; every way it can go wrong is its `problem`, never an exception."""
    here = repo / c.root.path
    project = _project(here)
    inside = project is not None and (project == repo or repo in project.parents)
    cwd = c.cwd if c.cwd is not None else project if project is not None and inside else here
    # Without a configuration or a setup.py, pytest roots the ids where it was started and the root meet.
    rootdir = project if project is not None else Path(os.path.commonpath([cwd, here]))
    env = {**os.environ, **dict(c.env)}
    argv = yielding(command(c.python, os.path.relpath(here, cwd)))
    try:
        done = run_bounded(argv, cwd=cwd, env=env, timeout=TIMEOUT_S, die_with_promote=True, max_output=MAX_BYTES)
    except OSError as e:
        return Collected(c.root.path, c.root.sources, problem=f"cannot start {c.python}: {e.strerror or e}")
    if done.status is None:
        why = "wrote too much output" if len(done.output) > MAX_BYTES else f"took longer than {TIMEOUT_S:.0f}s"
        return Collected(c.root.path, c.root.sources, problem=f"pytest {why} and was stopped")
    if done.status not in COLLECTED:
        return Collected(c.root.path, c.root.sources, problem=f"pytest exited with status {done.status}: {done.reason}")
    try:
        read = read_collection(done.output)
    except CollectionUnreadable as e:
        return Collected(c.root.path, c.root.sources, problem=f"pytest's output could not be read: {e}")
    ids = tuple(i for i in (_rebased(repo, rootdir, t) for t in read.ids) if i is not None)
    # pytest's short summary names a module relative to where it was started, not to its rootdir.
    errors = tuple(e for e in (_rebased(repo, cwd, m) for m in read.errors) if e is not None)
    return Collected(c.root.path, c.root.sources, ids, errors, read.error_count)


def _project(here: Path) -> Path | None:
    """Where pytest given the directory `here` roots its test ids, when something says so: the directory of the
    configuration it finds at or above `here`, else of the nearest setup.py; None when neither is found."""
    try:
        found = locate(here)
    except PytestConfigError:
        found = None
    if found is not None:
        return Path(found[1].directory)
    return next((d for d in (here, *here.parents) if (d / "setup.py").is_file()), None)


def _rebased(repo: Path, rootdir: Path, nodeid: str) -> str | None:
    """A node id relative to the repository root; None for one outside the repository."""
    file, sep, rest = nodeid.partition("::")
    rel = posixpath.normpath(os.path.relpath(rootdir / file, repo).replace(os.sep, "/"))
    if rel == ".." or rel.startswith("../"):
        return None
    return f"{rel}{sep}{rest}"


class Collecting:
    """Collections under way in the background, on `slots` threads; `results` waits for every one."""

    def __init__(self, repo: Path, collectors: Sequence[Collector], slots: int = 1) -> None:
        self._repo = repo
        self._collectors = list(collectors)
        self._results: dict[int, Collected] = {}
        self._next = 0
        self._lock = threading.Lock()
        # Daemon threads: an interrupted audit does not wait for them, and their pytest dies with promote.
        self._threads = [
            threading.Thread(target=self._work, name=f"promote-inventory-{i}", daemon=True)
            for i in range(max(1, min(slots, len(self._collectors))))
        ]
        for t in self._threads:
            t.start()

    def _work(self) -> None:
        while True:
            with self._lock:
                i = self._next
                self._next += 1
            if i >= len(self._collectors):
                return
            c = self._collectors[i]
            try:
                found = collect(self._repo, c)
            except Exception as e:
                found = Collected(c.root.path, c.root.sources, problem=f"could not be collected: {e}")
            self._results[i] = found

    def results(self) -> tuple[Collected, ...]:
        for t in self._threads:
            t.join()
        return tuple(self._results[i] for i in range(len(self._collectors)))


@dataclass(frozen=True)
class TestRoot:
    """The tests of one directory that one owner runs: how many, one of them, and who (a package, a CI job)."""

    path: str  # repo-relative, "." for the top
    count: int
    example: str
    owner: Owner
    by: str | None = None  # the package's name, the CI job, or why whether a CI job runs them is undecided
    errors: tuple[str, ...] = ()  # its modules pytest could not collect (none when a package ran them)

    def to_json(self) -> dict[str, object]:
        return {"path": self.path, "count": self.count, "example": self.example, "owner": self.owner,
                "by": self.by, "errors": list(self.errors)}  # fmt: skip


@dataclass(frozen=True)
class TestInventory:
    """Every test the repository holds, by directory and owner; `packaged` of `total` ran in a package."""

    roots: tuple[TestRoot, ...]
    total: int
    packaged: int
    collections: tuple[Collected, ...]

    def of(self, owner: Owner) -> tuple[TestRoot, ...]:
        return tuple(r for r in self.roots if r.owner == owner)

    def to_json(self) -> dict[str, object]:
        return {"total": self.total, "packaged": self.packaged, "roots": [r.to_json() for r in self.roots],
                "collections": [c.to_json() for c in self.collections]}  # fmt: skip


OwnerOf = Callable[[str], tuple[Owner, str | None]]


def tally(collections: Sequence[Collected], packaged: Mapping[str, str], ci: OwnerOf) -> TestInventory:
    """Who runs each test: the package whose run recorded it (or its module's collection error), else `ci(id)`.

    A module a root could not collect, and no package ran, is counted under its directory with its owner too:
    a directory none of whose modules can be collected is still one nothing runs.
    """
    groups: dict[tuple[str, Owner, str | None], tuple[list[str], list[str]]] = {}
    seen: set[str] = set()
    for c in collections:
        for tid in (*c.ids, *c.errors):
            if tid in seen:
                continue
            seen.add(tid)
            module = tid.partition("::")[0]
            name = packaged.get(tid) or packaged.get(module)
            owner: tuple[Owner, str | None] = ("package", name) if name is not None else ci(tid)
            ids, errors = groups.setdefault((directory_of(module, c.path), *owner), ([], []))
            (ids if "::" in tid else errors).append(tid)
    # What a package ran that no root collected (a package outside every test directory) is in the inventory too.
    for tid, name in packaged.items():
        if "::" in tid and tid not in seen:
            seen.add(tid)
            groups.setdefault((directory_of(tid.partition("::")[0], ""), "package", name), ([], []))[0].append(tid)
    roots = [
        TestRoot(path or ".", len(ids), ids[0] if ids else errors[0], owner, by, tuple(errors))
        for (path, owner, by), (ids, errors) in sorted(
            groups.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2] or "")
        )
        if ids or owner != "package"
    ]
    total = sum(r.count for r in roots)
    return TestInventory(tuple(roots), total, sum(r.count for r in roots if r.owner == "package"), tuple(collections))
