"""A fleet's worker (an xdist worker started by execnet, here or on a station): its records travel in xdist's channel.

The controller hands each worker its station and the fleet's other stations in `workerinput`. The worker
records as any other into a scratch directory of its own; every progress line it writes also rides on the
next report it sends (the lines of a test's end on that test's teardown report), and its files at the end
ride on its `workeroutput`. Nothing is copied back by ssh.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Generator, Mapping
from pathlib import Path
from typing import Any

import pytest

from promote.core.station import Station
from promote.runners.plugin.items import requirements_of
from promote.runners.plugin.records import write_atomic

FLEET = "promote_fleet"  # workerinput: this worker's station, the others, its scratch directory
LINES = "promote_progress"  # on a report, and in workeroutput: progress lines written since the last one
FILES = "promote_files"  # workeroutput: the worker's record files, by name
# Written by the controller at the end: each worker's station, the stations lost, the tests placed nowhere.
RESULT = "fleet.json"


def fleet_input(config: pytest.Config) -> Mapping[str, Any] | None:
    """What the fleet's controller handed this worker, or None outside a fleet's worker."""
    workerinput = getattr(config, "workerinput", None)
    if not isinstance(workerinput, dict):
        return None
    value = workerinput.get(FLEET)
    return value if isinstance(value, dict) else None


def station(given: Mapping[str, Any]) -> Station:
    return Station.from_json(given["station"])


def placed_elsewhere(given: Mapping[str, Any], items: list[pytest.Item]) -> list[pytest.Item]:
    """The items another station of the fleet must run: this one lacks what they need, another has it all.

    A test no station can run stays, and is skipped here saying what it needs (impossible-requirement).
    """
    here = station(given)
    others = [Station.from_json(s) for s in given.get("others", ())]
    away = []
    for item in items:
        needs = requirements_of(item)
        if needs and here.lacking(needs) and any(not s.lacking(needs) for s in others):
            away.append(item)
    return away


def note_elsewhere(scratch: Path, worker: str, nodeids: list[str]) -> None:
    """The tests this worker left to other stations: if none of them runs one, it is said to have run nowhere."""
    write_atomic(scratch / f"elsewhere-{worker}.txt", "".join(f"{n}\n" for n in nodeids))


def read_elsewhere(out_dir: Path) -> set[str]:
    """Every test some worker of the run left to another station."""
    found: set[str] = set()
    for path in out_dir.glob("elsewhere-*.txt"):
        found.update(line for line in path.read_text(encoding="utf-8", errors="replace").splitlines() if line)
    return found


class Relay:
    """Registered in a fleet's worker: hands the progress lines to the reports xdist sends to the controller."""

    def __init__(self, config: pytest.Config, scratch: Path, worker: str, outbox: list[str]) -> None:
        self.config, self.scratch, self.worker, self.outbox = config, scratch, worker, outbox
        self.item: pytest.Item | None = None

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> None:
        self.item = item

    def _drain(self) -> list[str]:
        lines = list(self.outbox)
        self.outbox.clear()
        return lines

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> Generator[None, None, None]:
        # Before xdist's own hook serializes the report: the test's end is written now, not after it is sent.
        recorder = self.config.pluginmanager.get_plugin("promote-recorder")
        run = getattr(recorder, "running", None)
        item = self.item
        here = report.when == "teardown" and run is not None and item is not None and run.nodeid == report.nodeid
        if recorder is not None and here:
            recorder.pytest_runtest_logreport(report)
            recorder.conclude(run, item)
        if self.outbox:
            setattr(report, LINES, self._drain())
        return (yield)

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_sessionfinish(self) -> Generator[None, None, None]:
        # Inside xdist's own wrapper: its `workerfinished` is sent after this has filled the output.
        result = yield
        output: dict[str, Any] = getattr(self.config, "workeroutput", {})
        output[LINES] = self._drain()
        # Every file it wrote (results, what it collected, what it left to other stations) but the log already sent.
        own = f"progress-{self.worker}.jsonl"
        files = {}
        for path in sorted(self.scratch.iterdir()) if self.scratch.is_dir() else ():
            if path.is_file() and path.name != own:
                files[path.name] = path.read_text(encoding="utf-8", errors="replace")
        output[FILES] = files
        # Its records now travel in the output: nothing is left on the station (the log's descriptor stays open).
        shutil.rmtree(self.scratch, ignore_errors=True)
        with contextlib.suppress(OSError):
            os.removedirs(self.scratch.parent)  # the run's directories above it too, once every worker is done
        return result
