"""Run one package over a fleet: one pytest session here, its xdist workers on every station that is ready.

Step 1: make each station ready at once (members.prepare); one that cannot be is a `station-error`.
Step 2: start pytest here with a `--tx` spec per station and the fleet's description (`--promote-fleet`):
        the plugin's controller places each test where its requirements are met and writes the records the
        workers send in xdist's channel into the out directory.
Step 3: summarize those records as any local run's, and say which station each test ran on, which stations
        dropped out, and what could run nowhere else.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from promote.config import Config, PackageConfig, StationConfig
from promote.core import state
from promote.core.errors import ConfigError
from promote.core.findings import Rootdir
from promote.core.redact import PACKAGE_ENV_NAMES
from promote.core.station import FLEET_LOCAL, Station
from promote.runners import package as runner
from promote.runners.causes.station_rerun import SPEC, addopts, places
from promote.runners.configuration import own_options
from promote.runners.fleet import members as fleet_members
from promote.runners.fleet.faults import crashes_on_stations, fleet_findings, merged, read_outcome, started_by
from promote.runners.fleet.members import Member
from promote.runners.package import ProgressCallback
from promote.runners.plugin.fleet_worker import read_elsewhere
from promote.runners.plugin.records import TestRecord, write_atomic
from promote.runners.plugin.requirement_rules import Rule
from promote.runners.remote.faults import station_error
from promote.runners.stations import Inventory
from promote.runners.summary import PackageResult, crashed_tests, summarize


def worker_env(pkg: PackageConfig) -> dict[str, str]:
    """What a station's workers need in their environment: the package's own, and its args."""
    env = {**dict(pkg.env), PACKAGE_ENV_NAMES: ",".join(name for name, _ in pkg.env)}
    if pkg.args or os.environ.get("PYTEST_ADDOPTS"):
        env["PYTEST_ADDOPTS"] = addopts(pkg)
    return env


def start(
    pkg: PackageConfig,
    ready: list[Member],
    out_dir: Path,
    durations: Mapping[str, float],
    rules: Sequence[Rule] = (),
) -> runner.PackageRun:
    """Start the controller here: pytest with one `--tx` per station, workers wherever the specs say.

    `rules`: the configured requirement rules, which each worker reads its skips with as promote will.
    """
    spec = {
        "stations": {m.name: m.station.to_json() for m in ready},
        "scratch": {m.name: m.scratch for m in ready},
        "remote": [m.name for m in ready if m.remote],
        "tx": {m.name: m.spec for m in ready},
        "durations": dict(durations),
        "timeout_s": pkg.timeout_s,
        "rules": [{"pattern": r.pattern, "requirement": r.requirement, "frames": list(r.frames)} for r in rules],
    }
    path = write_atomic(out_dir / SPEC, json.dumps(spec, indent=1))

    def tx(each: Callable[[Member], int]) -> tuple[str, ...]:
        restarts = f"--max-worker-restart={runner.MAX_RESTARTS * sum(each(m) for m in ready)}"
        return (restarts, *(f"--tx={each(m)}*{m.spec}" for m in ready))

    # As on one machine: the tests its `serial` setting or marker names run after the others, one at a time on
    # each station, in a second session that starts only when the first left some (docs/stations.md).
    parts = {"parallel": tx(lambda m: m.workers), "serial": tx(lambda m: 1)}
    controller = replace(pkg, workers=1, args=())
    env = {"PYTEST_ADDOPTS": addopts(pkg)} if pkg.args else {}
    extra = ("--dist=load", f"--promote-fleet={path}")
    return runner.PackageRun(
        controller, out_dir, python=pkg.interpreter, leaks=pkg.leaks, extra=extra, env=env, parts=parts
    )


def run_fleet(
    pkg: PackageConfig,
    stations: Mapping[str, StationConfig],
    run_dir: Path,
    here: Station,
    on_progress: ProgressCallback | None = None,
    *,
    rootdir: Rootdir | None = None,
    durations: Mapping[str, float] | None = None,
    on_start: Callable[[runner.PackageRun], None] | None = None,
    rules: Sequence[Rule] = (),
) -> PackageResult:
    """Run `pkg` over its fleet; never raises for what went wrong on a station, it becomes a finding.

    `on_start`: given the controller's process as soon as it runs (so that an interrupt can end it).
    `rules`: the configured requirement rules (requirements.configured_rules), for placing device skips.
    """
    out_dir = run_dir / pkg.name
    state.private_dir(out_dir)
    t0 = time.monotonic()
    ready, unready = fleet_members.prepare(pkg, stations, here, out_dir / "scratch", run_dir.name, worker_env(pkg))
    label = label_of(pkg, ready)
    if not ready:
        if on_progress is not None:
            on_progress(pkg.name, 0, 0, True)
        nothing = station_error(", ".join(pkg.stations), "no station of the fleet could run the package: nothing ran")
        # A fleet of one: its station's own error says why nothing ran.
        said = (*unready, nothing) if len(pkg.stations) > 1 or not unready else tuple(unready)
        took = time.monotonic() - t0
        return PackageResult(
            pkg.name, pkg.path, label, 255, took, (), (), said, out_dir, stations_down=pkg.stations, fleet=pkg.stations
        )
    run = start(pkg, ready, out_dir, durations or {}, rules)
    if on_start is not None:
        on_start(run)
    # Each worker removes its own scratch directory (and the run's, once empty) as it finishes.
    parts = run.finish(on_progress)
    # A station's tests past the timeout were ended by the controller; this machine's, by the run's own watch.
    outcomes = {p.part: read_outcome(p.out_dir) for p in parts}
    parts = [replace(p, timed_out=(*p.timed_out, *outcomes[p.part].timed_out)) for p in parts]
    result = summarize(
        pkg.name, pkg.path, out_dir, station=label, parts=parts, timeout_s=pkg.timeout_s, rootdir=rootdir
    )
    outcome = merged(outcomes)  # its workers known as `part/name`, as below
    crashed = [(test, f"{p.part}/{w}") for p in parts for test, w in crashed_tests(p.out_dir)]
    started = {test: f"{p.part}/{w}" for p in parts for test, w in started_by(p.out_dir)}
    # Left by every worker to a station that then ran none of them: never ran, said once with the unplaced.
    elsewhere = set().union(*(read_elsewhere(p.out_dir) for p in parts))
    nowhere = sorted(elsewhere - set(started) - set(outcome.unplaced))
    outcome = replace(outcome, unplaced=(*outcome.unplaced, *nowhere))
    findings = [*crashes_on_stations(list(result.findings), outcome, ready, crashed), *unready]
    findings += fleet_findings(outcome, ready, crashed)
    placed = tuple(sorted((test, outcome.workers.get(worker, worker)) for test, worker in started.items()))
    workers = sum(m.workers for m in ready)
    down = tuple(sorted(outcome.down))
    return replace(
        result, findings=tuple(findings), placed=placed, stations_down=down, workers=workers, fleet=pkg.stations
    )


def label_of(pkg: PackageConfig, ready: list[Member]) -> str:
    """Where the package ran, as reports say it: the station of a fleet of one, else the fleet's."""
    if len(pkg.stations) == 1 and ready:
        return ready[0].label
    return "fleet: " + ", ".join(m.label for m in ready) if ready else "fleet: no station"


def check_fleet(config: Config, p: PackageConfig) -> None:
    """A fleet's session is pytest-xdist's, here: its interpreter needs xdist, and the package must not disable it."""
    where = ", ".join(p.stations)
    if not runner.has_xdist(p.interpreter):
        raise ConfigError(
            f"{config.path}: package {p.name!r}: it runs on {where} through one pytest-xdist session here, and "
            f"{p.interpreter} cannot import pytest-xdist (install it: {p.interpreter} -m pip install pytest-xdist)"
        )
    blocked = own_options(p.path, p.args, runner.environment(p, p.interpreter)).blocks("xdist")
    if blocked is not None:
        raise ConfigError(
            f"{config.path}: package {p.name!r}: it runs on {where} over pytest-xdist's workers, which its own "
            f"options disable ({blocked}); run it on this machine (no `station`, no `stations`) or let xdist load"
        )


def stations_of(result: PackageResult) -> dict[str, Station]:
    """The stations of the fleet `result` ran on, each as detected there when it ran (none for a local package)."""
    found = {}
    for name, place in places(result.out_dir).items():
        try:
            found[name] = Station.from_json(place.station)
        except (KeyError, TypeError, ValueError):
            continue  # not as promote wrote it: that station is known as configured only
    return found


def as_detected(inventory: Inventory, results: Sequence[PackageResult]) -> Inventory:
    """The inventory with every station a fleet reached over ssh as detected there, not as configured."""
    seen = {s.name: s for r in results for name, s in stations_of(r).items() if name != FLEET_LOCAL}
    return Inventory(
        tuple(replace(seen[s.name], local=False, ssh=s.ssh) if s.name in seen else s for s in inventory.stations),
        inventory.notes,
    )


def fleet_inventories(
    inventory: Inventory, result: PackageResult
) -> tuple[Callable[[TestRecord], Inventory] | None, str | None]:
    """For a fleet's result: each test's inventory as the station it ran on sees it, and the fleet as findings name
    it ("here" is where it ran); (None, None) for a package run here."""
    fleet = stations_of(result)
    if not result.placed or not fleet:
        return None, None
    seen = {name: replace(station, local=True) for name, station in fleet.items()}
    # This machine is one of the others when the fleet does not include it (then it is `local` in `seen`).
    others = tuple(
        replace(s, local=False)
        for s in inventory.stations
        if s.name not in seen and not (s.local and FLEET_LOCAL in seen)
    )
    each = {name: Inventory((station, *others), inventory.notes) for name, station in seen.items()}
    anywhere = Inventory((*seen.values(), *others), inventory.notes)

    def ran_on(test: TestRecord) -> Inventory:
        return each.get(result.ran_on(test.parent or test.nodeid) or "", anywhere)

    return ran_on, next(iter(fleet)) if len(fleet) == 1 else "the fleet (" + ", ".join(fleet) + ")"
