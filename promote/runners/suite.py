"""`promote test`: run every configured test package with isolation and gather what ran.

One run, step by step (`run_tests`): choose the packages, start the first local ones, detect
this station while their pytest starts, follow every package to its end, classify the tests no
station here can run as blocked, find the cause of each failure, then write JUnit and run.json.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from collections.abc import Callable, Mapping, Sequence, Set
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path

from promote.config import Config, PackageConfig, StationConfig
from promote.core import state
from promote.core.errors import ConfigError, UsageError
from promote.core.findings import Finding, Rootdir
from promote.core.redact import current as current_redactor
from promote.core.state import new_run_id
from promote.core.station import Station
from promote.runners import leak_groups, requirements
from promote.runners import package as runner
from promote.runners.causes import hidden
from promote.runners.causes.budget import Budget
from promote.runners.causes.investigate import StepCallback, investigate
from promote.runners.configuration import own_options, rootdir_of
from promote.runners.fleet.run import as_detected, check_fleet, fleet_inventories, run_fleet
from promote.runners.junit import write_junit
from promote.runners.package import ProgressCallback
from promote.runners.plugin.records import write_atomic
from promote.runners.plugin.requirement_rules import Rule
from promote.runners.stations import Inventory, inventory
from promote.runners.stored_runs import durations_of, latest_before
from promote.runners.summary import PackageResult, summarize

STATION_FILE = "station.json"

__all__ = ["FirstPass", "RunResult", "finish", "first_pass", "new_run_id", "run_tests", "select"]


@dataclass(frozen=True)
class RedStreak:
    """A test red in each of its package's latest runs, this one included, as the history told it."""

    package: str
    test: str
    runs: int
    since: str  # when the first of those runs started

    def to_json(self) -> dict[str, object]:
        return {"package": self.package, "test": self.test, "runs": self.runs, "since": self.since}


@dataclass(frozen=True)
class RunResult:
    """One `promote test` run: every package's result and every finding."""

    run_id: str
    started: str
    finished: str
    packages: tuple[PackageResult, ...]
    out_dir: Path
    stations: Inventory | None = None
    unstored: str | None = None  # why the run's records could not be stored (a full disk); its results stand
    # What the history told of its tests over earlier runs (flaky-history, never-ran, tests-dropped), added once
    # the run is stored: findings of the run, though no package's own.
    told: tuple[Finding, ...] = ()
    red_streaks: tuple[RedStreak, ...] = ()  # its red tests that were red in the runs before it too

    @property
    def findings(self) -> tuple[Finding, ...]:
        return tuple(f for p in self.packages for f in p.findings) + self.told

    @property
    def green(self) -> bool:
        return all(p.green for p in self.packages) and not any(f.severity == "error" for f in self.told)

    def to_json(self) -> dict[str, object]:
        return {
            "run": self.run_id,
            "started": self.started,
            "finished": self.finished,
            "packages": [p.to_json() for p in self.packages],
            "findings": [f.to_json() for f in self.findings],
            "results": str(self.out_dir),
            "stations": self.stations.to_json() if self.stations is not None else None,
            "unstored": self.unstored,
            "red_streaks": [s.to_json() for s in self.red_streaks],
        }


class _Live:
    """The package runs under way, so that an interrupted run can end every one of them."""

    def __init__(self) -> None:
        self.runs: list[runner.PackageRun] = []
        self.stopping = False
        self.lock = threading.Lock()

    def add(self, run: runner.PackageRun) -> None:
        with self.lock:
            self.runs.append(run)
            stopping = self.stopping
        if stopping:  # started just as the run was given up
            run.stop()

    def stop_all(self) -> None:
        with self.lock:
            self.stopping = True
            runs = list(self.runs)
        for run in runs:
            run.stop()


def select(config: Config, name: str | None) -> tuple[PackageConfig, ...]:
    """The packages to run (all, or the one named), each checked before anything starts."""
    if not config.packages:
        raise ConfigError(f"{config.path}: {config.prefix}.packages: no test packages configured")
    chosen = tuple(p for p in config.packages if name is None or p.name == name)
    if not chosen:
        known = ", ".join(p.name for p in config.packages)
        raise UsageError(f"--package {name!r}: no such package in {config.path} (packages: {known})")
    for p in chosen:
        if not p.path.is_dir():
            raise ConfigError(f"{config.path}: package {p.name!r}: path {p.path} is not a directory")
        # Its own interpreter runs it here, or runs the fleet's session here (its stations' workers, theirs).
        here = not p.stations
        if p.python and shutil.which(p.interpreter) is None:
            raise ConfigError(f"{config.path}: package {p.name!r}: python {p.python} is not an executable here")
        # One worker runs as plain pytest; more than one needs xdist, unless the package's own options disable it.
        own = own_options(p.path, p.args, runner.environment(p, p.interpreter)) if here and p.workers > 1 else None
        if p.stations:
            check_fleet(config, p)
        if own is not None and runner.on_xdist(p, own) and not runner.has_xdist(p.interpreter):
            raise ConfigError(
                f"{config.path}: package {p.name!r}: workers = {p.workers} needs pytest-xdist, which {p.interpreter} "
                f"cannot import (install it: {p.interpreter} -m pip install pytest-xdist; or set workers = 1)"
            )
    return chosen


@dataclass(frozen=True)
class Plan:
    """One run's packages and where their results go; `slots` packages run at once (one per core)."""

    config: Config
    packages: tuple[PackageConfig, ...]
    run_dir: Path
    slots: int


def run_tests(
    config: Config,
    *,
    package: str | None = None,
    on_progress: ProgressCallback | None = None,
    run_id: str | None = None,
    on_step: StepCallback | None = None,
) -> RunResult:
    """Run the selected packages concurrently (bounded by cores) and store the run; `on_step`: each rerun."""
    return finish(first_pass(config, package=package, on_progress=on_progress, run_id=run_id), on_step)


@dataclass(frozen=True)
class FirstPass:
    """A run's first pass, before any rerun: every package followed to its end, its blocked tests classified."""

    plan: Plan
    results: tuple[PackageResult, ...]
    fleet: Inventory
    started: str
    t0: float  # time.monotonic() when it started


def first_pass(
    config: Config,
    *,
    package: str | None = None,
    on_progress: ProgressCallback | None = None,
    run_id: str | None = None,
) -> FirstPass:
    """Start the selected packages (concurrently, bounded by cores) and follow each to its end."""
    chosen = select(config, package)
    run_id = run_id or new_run_id()
    plan = Plan(config, chosen, state.runs_dir(config.root) / run_id, max(1, min(len(chosen), os.cpu_count() or 1)))
    state.private_dir(plan.run_dir)
    started, t0 = now(), time.monotonic()
    live = _Live()
    try:
        launched = start_local(plan, live)
        fleet = detect_station(plan)
    except BaseException:
        # Nothing will follow these processes any more: do not leave them running unseen.
        live.stop_all()
        raise
    results = follow_all(plan, fleet, launched, live, on_progress)
    return FirstPass(plan, classify_blocked(plan, fleet, results), fleet, started, t0)


def finish(
    done: FirstPass, on_step: StepCallback | None = None, *, only: Callable[[PackageResult], Set[str]] | None = None
) -> RunResult:
    """The causes of the first pass's failures, then the stored run. `only`: per package, the failed tests whose
    cause is asked for (every one by default; with it, the pass without restores is not made either)."""
    plan = done.plan
    results = find_causes(plan, done.results, on_step, only)
    result = RunResult(
        run_id=plan.run_dir.name,
        started=done.started,
        finished=now(),
        packages=results,
        out_dir=plan.run_dir,
        # As each station was when the tests ran: detected here, and detected there for a fleet's stations.
        stations=as_detected(done.fleet, results),
    )
    try:
        write_reports(result, wall_s=time.monotonic() - done.t0)
    except state.StateError as e:
        # Every test ran and the report can still be printed: a full disk takes the stored records only.
        result = replace(result, unstored=str(e))
    return result


def start_local(plan: Plan, live: _Live) -> dict[int, runner.PackageRun]:
    """Start the first local packages, one per slot, before anything else: their pytest starts up meanwhile."""
    launched: dict[int, runner.PackageRun] = {}
    for i, pkg in enumerate(plan.packages):
        if len(launched) < plan.slots and not plan.packages[i].stations:
            launched[i] = start(pkg, plan.run_dir)
            live.add(launched[i])
    return launched


def detect_station(plan: Plan) -> Inventory:
    """Detect this station and hand it to the plugin, which skips tests whose requirements it lacks."""
    fleet = inventory(plan.config)
    # Whole or not at all: the plugin reads it as soon as it appears.
    write_atomic(plan.run_dir / STATION_FILE, json.dumps(fleet.local.to_json(), indent=1))
    return fleet


def follow_all(
    plan: Plan,
    fleet: Inventory,
    launched: dict[int, runner.PackageRun],
    live: _Live,
    on_progress: ProgressCallback | None,
) -> tuple[PackageResult, ...]:
    """Follow every package to its end, in the configured order; the others start as slots free up."""
    with ThreadPoolExecutor(max_workers=plan.slots) as pool:
        # The started packages take the first slots; the others wait for one.
        order = [*launched, *(i for i in range(len(plan.packages)) if i not in launched)]
        futures = {
            i: pool.submit(
                run_one,
                plan.packages[i],
                plan.run_dir,
                on_progress,
                fleet.local,
                started=launched.get(i),
                live=live,
                rootdir=rootdir_of(plan.config.root, plan.packages[i].path),
                stations={s.name: s for s in plan.config.stations},
                rules=requirements.configured_rules(plan.config.requirements),
            )
            for i in order
        }
        try:
            return tuple(futures[i].result() for i in range(len(plan.packages)))
        except BaseException:
            # Interrupted (Ctrl-C, SIGTERM): end every pytest now; the pool then waits only for their ends.
            for future in futures.values():
                future.cancel()
            live.stop_all()
            raise


def run_one(
    pkg: PackageConfig,
    run_dir: Path,
    on_progress: ProgressCallback | None,
    station: Station,
    *,
    started: runner.PackageRun | None = None,
    live: _Live | None = None,
    rootdir: Rootdir | None = None,
    stations: Mapping[str, StationConfig] | None = None,
    rules: Sequence[Rule] = (),
) -> PackageResult:
    """Run one package (or follow it to its end, when `started`) and summarize what it did.

    `rootdir`: where the package is in the repository, which its findings' locations are relative to.
    """
    if pkg.stations:
        on_start = live.add if live is not None else None
        durations = durations_of(latest_before(run_dir, pkg.name))
        return run_fleet(
            pkg, stations or {}, run_dir, station, on_progress, rootdir=rootdir, on_start=on_start, durations=durations,
            rules=rules,
        )  # fmt: skip
    run = started
    if run is None:
        run = start(pkg, run_dir)
        if live is not None:
            live.add(run)
    parts = run.finish(on_progress)
    name = f"{station.name} ({station.platform})"
    return summarize(
        pkg.name, pkg.path, run.out_dir, station=name, parts=parts, timeout_s=pkg.timeout_s, rootdir=rootdir
    )


def start(pkg: PackageConfig, run_dir: Path) -> runner.PackageRun:
    """Start `pkg`'s first pytest process here."""
    # The plugin skips tests whose declared requirements this station lacks.
    return runner.PackageRun(
        pkg, run_dir / pkg.name, python=pkg.interpreter, leaks=pkg.leaks, station=run_dir / STATION_FILE
    )


def classify_blocked(plan: Plan, fleet: Inventory, results: tuple[PackageResult, ...]) -> tuple[PackageResult, ...]:
    """Tests no station here can run are blocked, not failed; they are not rerun or bisected below."""
    rules = requirements.rules_of(plan.config.requirements)
    return tuple(requirements.classify(r, fleet, rules, *fleet_inventories(fleet, r)) for r in results)


def find_causes(
    plan: Plan,
    results: tuple[PackageResult, ...],
    on_step: StepCallback | None = None,
    only: Callable[[PackageResult], Set[str]] | None = None,
) -> tuple[PackageResult, ...]:
    """The cause of each failure: reruns alone and bisection, one package after another (one shared budget)."""
    budget = Budget(plan.config.max_reruns)
    found = []
    for i, r in enumerate(results):
        # Over a fleet, each failure is rerun on the station where it failed.
        r = investigate(plan.packages[i], r, budget, on_step, only=None if only is None else only(r))
        # What restores hid: over a fleet, each worker's pass runs on the station that worker ran on.
        if only is None:
            r = hidden.measure(plan.packages[i], r, budget, on_step)
        found.append(leak_groups.group(r))
    return tuple(found)


def write_reports(result: RunResult, *, wall_s: float) -> None:
    """Each package's junit.xml, then the run's run.json."""
    for r in result.packages:
        write_junit(r, r.out_dir / "junit.xml")
    _write_run_json(result, round(wall_s, 3))


def _write_run_json(result: RunResult, wall_s: float) -> None:
    # Secrets redacted (promote.core.redact): a package-error's log lines come from the package's own output.
    data = current_redactor().data({**result.to_json(), "wall_s": wall_s})
    state.write_private(result.out_dir / "run.json", json.dumps(data, indent=1))


def write_told(result: RunResult) -> None:
    """run.json again, with what the history told of the run's tests: known only once the run was stored."""
    path = result.out_dir / "run.json"
    try:
        wall_s = float(json.loads(path.read_text(encoding="utf-8"))["wall_s"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise state.StateError(f"cannot read {path}: {e}") from None
    _write_run_json(result, wall_s)


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")
