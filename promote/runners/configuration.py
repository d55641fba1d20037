"""Which rootdir and ini file pytest chose for a package, as its workers recorded them."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath

from promote.core.findings import Finding, Location, Rootdir
from promote.core.git import run_git
from promote.runners.plugin.records import WorkerResults


@dataclass(frozen=True)
class Configuration:
    """The rootdir and ini file pytest chose for a package, relative to the repository root.

    `known` is False when no worker said (none recorded, or an older plugin): then `rootdir` is the
    package's own directory, where its node ids are rooted unless a configuration above it says otherwise.
    """

    rootdir: Rootdir | None
    inifile: str | None = None
    known: bool = False


def chosen(package: Rootdir | None, workers: list[WorkerResults]) -> Configuration:
    """What pytest chose, as the workers recorded it relative to `package` (their invocation directory)."""
    said = next((w for w in workers if w.rootdir is not None), None)
    if said is None or said.rootdir is None:
        return Configuration(package)
    if package is None:  # outside a repository: nothing to place it in, but the ini file is still named
        return Configuration(None, said.inifile, known=True)
    rootdir = posixpath.normpath((package.path / said.rootdir).as_posix())
    inifile = None if said.inifile is None else posixpath.normpath((package.path / said.inifile).as_posix())
    # A rootdir above the repository (an ini file outside it) places nothing in the repository.
    inside = rootdir != ".." and not rootdir.startswith("../")
    return Configuration(Rootdir(PurePosixPath(rootdir)) if inside else None, inifile, known=True)


def rootdir_of(root: Path, package: Path) -> Rootdir | None:
    """Where `package` (its pytest rootdir) is in the git repository holding `root`; None outside one."""
    top = run_git(root, "rev-parse", "--show-toplevel")
    if not top.ok:
        return None
    repo, here = Path(top.stdout.strip()).resolve(), package.resolve()
    if not here.is_relative_to(repo):
        return None  # a package outside the repository has no place in it to name
    return Rootdir(PurePosixPath(here.relative_to(repo).as_posix()))


def locate(rootdir: Rootdir | None, nodeid: str, line: int | None = None) -> Location | None:
    """Where the file of a node id under `rootdir` is, relative to the repository root (None outside one)."""
    return None if rootdir is None else rootdir.locate(nodeid, line)


def rebased(finding: Finding, rootdir: Rootdir | None) -> Finding:
    """A plugin's finding, whose location is relative to the rootdir, with it relative to the repository root."""
    if rootdir is None:
        return replace(finding, location=None)  # no repository to place it in
    return rootdir.rebase(finding)
