"""A fleet's members: each station made ready (the commit synced, the plugin shipped, its inventory detected)
and the execnet spec that starts xdist workers there.

A station promote cannot get ready is left out with a `station-error`; the others still run the package.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from promote.config import PackageConfig, StationConfig
from promote.core.findings import Finding
from promote.core.station import FLEET_LOCAL, Station
from promote.runners.remote import sync as station_sync
from promote.runners.remote.faults import station_error
from promote.runners.remote.ssh import StationError, Target


@dataclass(frozen=True)
class Member:
    """One station of a fleet, ready: what it has, how many workers, and how execnet starts one there."""

    name: str
    station: Station
    workers: int
    spec: str  # an execnet XSpec, without the worker count
    scratch: str  # where its workers write their own records (each in a directory named after it)
    label: str  # as reports name it: `local`, `mini (ssh bert@mini.local:2222)`
    cleanup: Target | None = None  # a station whose scratch directory promote removes after the run

    @property
    def remote(self) -> bool:
        return self.cleanup is not None


@dataclass(frozen=True)
class Repository:
    """The candidate every station runs: the top of its repository, the commit, and the package inside it."""

    top: Path
    sha: str
    package: str  # the package's directory, relative to `top`
    dirty: bool


def repository(pkg: PackageConfig) -> Repository:
    top, sha, dirty = station_sync.candidate(pkg.path)
    if not pkg.path.resolve().is_relative_to(top.resolve()):
        raise StationError(f"package {pkg.name} ({pkg.path}) is outside the repository {top}")
    return Repository(top, sha, pkg.path.resolve().relative_to(top.resolve()).as_posix(), dirty)


def local(pkg: PackageConfig, station: Station, sc: StationConfig | None, scratch: Path) -> Member:
    """This machine: workers started by execnet's popen, in the package's directory, with its interpreter."""
    workers = sc.workers if sc is not None and sc.workers is not None else pkg.workers
    spec = f"popen//python={pkg.interpreter}//promote_station={FLEET_LOCAL}"
    return Member(FLEET_LOCAL, station, workers, spec, str(scratch), FLEET_LOCAL)


def _spec_words(target: Target) -> str:
    """ssh's options and destination as one `ssh=` value: execnet splits it on whitespace, so none may hold any."""
    words = [*target.ssh_command()[1:], target.destination]
    spaced = [w for w in words if not w or any(c.isspace() for c in w) or "//" in w]
    if spaced:
        raise StationError(
            f"station {target.label}: ssh option {spaced[0]!r} holds a space or '//', which execnet's ssh spec "
            "cannot carry; use a path or option without one (an ssh config file, for instance)"
        )
    return " ".join(words)


def _env_words(env: Mapping[str, str]) -> str:
    for name, value in env.items():
        if "//" in value or "//" in name:
            raise StationError(f"the value of {name} holds '//', which execnet's spec cannot carry to a station")
    return "".join(f"//env:{name}={value}" for name, value in env.items())


def remote(pkg: PackageConfig, sc: StationConfig, repo: Repository, run_id: str, env: Mapping[str, str]) -> Member:
    """A station over ssh: the commit pushed to its workdir, workers started there by execnet's ssh gateway."""
    target = Target.from_config(sc)
    workdir = sc.workdir or station_sync.default_workdir(repo.top)
    ws = station_sync.prepare(target, repo.top, repo.sha, workdir, repo.package, sync=sc.sync, configured=sc.station)
    chdir = f"{ws.workdir}/{repo.package}"
    scratch = f"{ws.workdir}/{station_sync.OUT}/{run_id}/{pkg.name}"
    for word in (ws.lib, target.python, chdir, scratch):
        if "//" in word or any(c.isspace() for c in word):
            raise StationError(
                f"station {target.label}: {word!r} holds a space or '//', which execnet's spec cannot carry"
            )
    # The login shell there runs `PYTHON -c ...`: `env` sets the plugin's path whatever that shell is.
    python = f"env PYTHONPATH={shlex.quote(ws.lib)} {shlex.quote(target.python)}"
    spec = f"ssh={_spec_words(target)}//python={python}//chdir={chdir}{_env_words(env)}//promote_station={sc.name}"
    workers = sc.workers if sc.workers is not None else pkg.workers
    return Member(sc.name, ws.station, workers, spec, scratch, target.label, cleanup=target)


def prepare(
    pkg: PackageConfig,
    stations: Mapping[str, StationConfig],
    here: Station,
    scratch: Path,
    run_id: str,
    env: Mapping[str, str],
) -> tuple[list[Member], list[Finding]]:
    """Every station of `pkg`'s fleet made ready at once; the ones that could not be, as station-errors."""
    try:
        repo = repository(pkg) if any(name != FLEET_LOCAL for name in pkg.stations) else None
    except StationError as e:
        return [], [station_error(name, str(e)) for name in pkg.stations if name != FLEET_LOCAL]

    def one(name: str) -> Member | Finding:
        if name == FLEET_LOCAL:
            return local(pkg, here, stations.get(name), scratch)
        if stations[name].ssh is None or repo is None:
            return station_error(name, f"station {name} has no ssh destination: this machine is `local` in a fleet")
        try:
            return remote(pkg, stations[name], repo, run_id, env)
        except StationError as e:
            return station_error(name, str(e))

    with ThreadPoolExecutor(max_workers=len(pkg.stations)) as pool:
        ready = list(pool.map(one, pkg.stations))
    members = [m for m in ready if isinstance(m, Member)]
    said = [f for f in ready if isinstance(f, Finding)]
    pushed = [m for m in members if m.remote and stations[m.name].sync == "git"]
    if repo is not None and repo.dirty and pushed:
        where = ", ".join(m.name for m in pushed)
        message = f"{where} ran commit {repo.sha[:12]}; uncommitted changes to tracked files here did not go there"
        said.append(Finding("remote-uncommitted", "warning", where, message))
    return members, said
