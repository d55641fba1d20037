"""Which rootdir and ini file pytest chose for a package, as its workers recorded them; and, before it runs, what
its own options ask of the way promote runs it."""

from __future__ import annotations

import posixpath
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath

from promote.core.findings import Finding, Location, Rootdir
from promote.core.git import run_git
from promote.core.pytest_ini import PytestConfigError
from promote.core.pytest_ini import locate as locate_ini
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


@dataclass(frozen=True)
class OwnOptions:
    """The package's own pytest options as pytest will see them: its ini file's addopts, PYTEST_ADDOPTS, its args.

    `unreadable`: why its configuration file could not be read (pytest will stop on it too, and say so).
    """

    inifile: Path | None = None
    addopts: tuple[str, ...] = ()
    env_addopts: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    unreadable: str | None = None

    def blocks(self, plugin: str) -> str | None:
        """Where `-p no:PLUGIN` is among its options (the ini file, PYTEST_ADDOPTS or args); None: nowhere."""
        for where, words in (
            (str(self.inifile), self.addopts),
            ("PYTEST_ADDOPTS", self.env_addopts),
            ("its args", self.args),
        ):
            if f"no:{plugin}" in _blocked(words):
                return where
        return None


def own_options(package: Path, args: tuple[str, ...], env: Mapping[str, str]) -> OwnOptions:
    """What pytest started in `package` with `args` and `env` will read as its options, before it runs."""
    try:
        found = locate_ini(package.resolve())
    except PytestConfigError as e:
        return OwnOptions(args=args, unreadable=str(e))
    try:
        env_words = tuple(shlex.split(env.get("PYTEST_ADDOPTS", "")))
    except ValueError:
        env_words = tuple(env.get("PYTEST_ADDOPTS", "").split())
    if found is None:
        return OwnOptions(env_addopts=env_words, args=args)
    return OwnOptions(found[0], found[1].addopts, env_words, args)


def _blocked(words: tuple[str, ...]) -> set[str]:
    """The `no:NAME` values of `-p` in `words` (`-p no:NAME` or `-pno:NAME`, as pytest reads them early)."""
    found = set()
    for i, word in enumerate(words):
        value = words[i + 1] if word == "-p" and i + 1 < len(words) else word[2:] if word.startswith("-p") else ""
        if value.startswith("no:"):
            found.add(value)
    return found
