"""`promote test`: run every configured test package with isolation and gather what ran."""

from __future__ import annotations

import importlib
import json
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from promote.config import Config, PackageConfig, StationConfig
from promote.core import state
from promote.core.errors import ConfigError, UsageError
from promote.core.state import new_run_id
from promote.runners import package as runner
from promote.runners.package import ProgressCallback

if TYPE_CHECKING:
    from promote.core.findings import Finding
    from promote.runners.plugin.station import Station
    from promote.runners.stations import Inventory
    from promote.runners.summary import PackageResult

# Imported only once the tests have started: pytest's start-up leaves a core idle, and loading these
# before it would delay every run by their import time (issue 3's overhead budget).
_AFTER_START = (
    "promote.runners.requirements",
    "promote.runners.causes.investigate",
    "promote.runners.junit",
    "promote.runners.remote.run",
    "promote.runners.summary",
)
# Held by whichever thread imports them: two threads importing into the same import cycle at once
# can be handed a partly initialised module (an ImportError that comes and goes).
_IMPORTING = threading.Lock()
STATION_FILE = "station.json"

__all__ = ["RunResult", "new_run_id", "run_tests", "select"]


@dataclass(frozen=True)
class RunResult:
    """One `promote test` run: every package's result and every finding."""

    run_id: str
    started: str
    finished: str
    packages: tuple[PackageResult, ...]
    out_dir: Path
    stations: Inventory | None = None

    @property
    def findings(self) -> tuple[Finding, ...]:
        return tuple(f for p in self.packages for f in p.findings)

    @property
    def green(self) -> bool:
        return all(p.green for p in self.packages)

    def to_json(self) -> dict[str, object]:
        return {
            "run": self.run_id,
            "started": self.started,
            "finished": self.finished,
            "packages": [p.to_json() for p in self.packages],
            "findings": [f.to_json() for f in self.findings],
            "results": str(self.out_dir),
            "stations": self.stations.to_json() if self.stations is not None else None,
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
    if not config.packages:
        raise ConfigError(f"{config.path}: {config.prefix}.packages: no test packages configured")
    chosen = tuple(p for p in config.packages if name is None or p.name == name)
    if not chosen:
        known = ", ".join(p.name for p in config.packages)
        raise UsageError(f"--package {name!r}: no such package in {config.path} (packages: {known})")
    for p in chosen:
        if not p.path.is_dir():
            raise ConfigError(f"{config.path}: package {p.name!r}: path {p.path} is not a directory")
        # Its own interpreter runs it here (a remote station runs it with the station's).
        if p.python and station_of(config, p) is None:
            import shutil

            # As pytest will be started: a relative path from the package's directory, a bare name from PATH.
            relative = "/" in p.python and not os.path.isabs(p.python)
            if shutil.which(str(p.path / p.python) if relative else p.python) is None:
                raise ConfigError(f"{config.path}: package {p.name!r}: python {p.python} is not an executable here")
    return chosen


def last_run_dir(config: Config, package: str) -> Path | None:
    """The newest stored run of `package`, if any (run ids sort by time)."""
    runs = config.root / ".promote" / "runs"
    if not runs.is_dir():
        return None
    found = sorted(d / package for d in runs.iterdir() if (d / package).is_dir())
    return found[-1] if found else None


def station_of(config: Config, pkg: PackageConfig) -> StationConfig | None:
    """The ssh station `pkg` runs on, or None when it runs here."""
    sc = next((s for s in config.stations if s.name == pkg.station), None)
    return sc if sc is not None and sc.ssh is not None else None


def run_one(
    pkg: PackageConfig,
    run_dir: Path,
    on_progress: ProgressCallback | None,
    station: Station,
    *,
    remote_station: StationConfig | None = None,
    started: runner.PackageRun | None = None,
    live: _Live | None = None,
) -> PackageResult:
    """Run one package (or follow it to its end, when `started`) and summarize what it did."""
    if remote_station is not None:
        with _IMPORTING:
            from promote.runners.remote import run as remote

        # Same pytest command and plugin, run there over ssh; results come back into run_dir as a local run's.
        return remote.run_remote(pkg, remote_station, run_dir, on_progress)
    run = started or start(pkg, run_dir)
    if live is not None:
        live.add(run)
    parts = run.finish(on_progress)
    with _IMPORTING:
        from promote.runners.summary import summarize
    name = f"{station.name} ({station.platform})"
    return summarize(pkg.name, pkg.path, run.out_dir, station=name, parts=parts, timeout_s=pkg.timeout_s)


def start(pkg: PackageConfig, run_dir: Path) -> runner.PackageRun:
    # The plugin skips tests whose declared requirements this station lacks.
    return runner.PackageRun(
        pkg, run_dir / pkg.name, python=pkg.python or sys.executable, leaks=pkg.leaks, station=run_dir / STATION_FILE
    )


def run_tests(
    config: Config,
    *,
    package: str | None = None,
    on_progress: ProgressCallback | None = None,
    run_id: str | None = None,
    meanwhile: Callable[[], None] | None = None,
) -> RunResult:
    """Run the selected packages concurrently (bounded by cores) and store the run.

    `meanwhile` is called once the packages have started, while they run: the place for work
    (such as imports) that the caller needs only afterwards. It runs holding the import lock.
    """
    chosen = select(config, package)
    run_id = run_id or new_run_id()
    run_dir = state.runs_dir(config.root) / run_id
    run_dir.mkdir(parents=True)
    started = datetime.now(timezone.utc).isoformat(timespec="microseconds")
    t0 = time.monotonic()
    slots = max(1, min(len(chosen), os.cpu_count() or 1))
    launched: dict[int, runner.PackageRun] = {}
    try:
        # The first local packages start before anything else: detecting this station, and the imports
        # below, then happen while pytest starts up (issue 3's overhead budget).
        for i, pkg in enumerate(chosen):
            if len(launched) < slots and station_of(config, pkg) is None:
                launched[i] = start(pkg, run_dir)
        with _IMPORTING:
            from concurrent.futures import ThreadPoolExecutor

            from promote.runners import stations
            from promote.runners.plugin.records import write_atomic
        fleet = stations.inventory(config)
        # Whole or not at all: the plugin reads it as soon as it appears.
        write_atomic(run_dir / STATION_FILE, json.dumps(fleet.local.to_json(), indent=1))
    except BaseException:
        # Nothing will follow these processes any more: do not leave them running unseen.
        for run in launched.values():
            run.stop()
        raise
    live = _Live()
    for run in launched.values():
        live.add(run)
    with ThreadPoolExecutor(max_workers=slots) as pool:
        # The started packages take the first slots; the others wait for one.
        order = [*launched, *(i for i in range(len(chosen)) if i not in launched)]
        futures = {
            i: pool.submit(
                run_one,
                chosen[i],
                run_dir,
                on_progress,
                fleet.local,
                remote_station=station_of(config, chosen[i]),
                started=launched.get(i),
                live=live,
            )
            for i in order
        }
        try:
            with _IMPORTING:
                for module in _AFTER_START:
                    importlib.import_module(module)
                if meanwhile is not None:
                    meanwhile()
            results = tuple(futures[i].result() for i in range(len(chosen)))
        except BaseException:
            # Interrupted (Ctrl-C, SIGTERM): end every pytest now; the pool then waits only for their ends.
            for future in futures.values():
                future.cancel()
            live.stop_all()
            raise
    from promote.core.redact import current as current_redactor
    from promote.runners import requirements
    from promote.runners.causes.investigate import Budget, investigate
    from promote.runners.junit import write_junit
    from promote.runners.remote import run as remote

    # Tests no station here can run are blocked, not failed; they are not rerun or bisected below.
    rules = requirements.rules_of(config.requirements)
    results = tuple(requirements.classify(r, remote.inventory_for(fleet, r), rules) for r in results)
    # Then the cause of each failure: reruns alone and bisection, one package after another (shared budget).
    # Reruns happen here, so a package that ran on another station is not rerun (here is not where it ran).
    budget = Budget(config.max_reruns)
    results = tuple(
        r if station_of(config, p) else investigate(p, r, budget) for p, r in zip(chosen, results, strict=True)
    )
    for r in results:
        write_junit(r, r.out_dir / "junit.xml")
    result = RunResult(
        run_id=run_id,
        started=started,
        finished=datetime.now(timezone.utc).isoformat(timespec="microseconds"),
        packages=results,
        out_dir=run_dir,
        # As each station was when the tests ran: detected here, and detected there for remote packages.
        stations=remote.as_detected(fleet, results),
    )
    # Secrets redacted (promote.redact): a package-error's log lines come from the package's own output.
    data = current_redactor().data({**result.to_json(), "wall_s": round(time.monotonic() - t0, 3)})
    (run_dir / "run.json").write_text(json.dumps(data, indent=1), encoding="utf-8")
    return result
