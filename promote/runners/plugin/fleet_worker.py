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
from collections.abc import Callable, Generator, Mapping
from pathlib import Path
from typing import Any

import pytest

from promote.core.station import Station
from promote.runners.plugin.items import requirements_of
from promote.runners.plugin.records import write_atomic
from promote.runners.plugin.requirement_rules import DEFAULT_RULES, Rule, infer_skip

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

    What an item needs: its `requires` markers, and the requirement a `skipif` that holds here names in its
    reason ("Metal only": `device:metal`), by the rules promote reads skips with after a run. A test no
    station can run stays, and is skipped here saying what it needs (impossible-requirement).
    """
    here = station(given)
    others = [Station.from_json(s) for s in given.get("others", ())]
    if not others:
        return []
    rules = skip_rules(given)
    away = []
    for item in items:
        needs = requirements_of(item)
        if not (needs and here.lacking(needs)):
            # Only a skip this station would take, for something another station has, is worth evaluating.
            needs = (*needs, *skip_needs(item, here, others, rules))
        if needs and here.lacking(needs) and any(not s.lacking(needs) for s in others):
            away.append(item)
    return away


def skip_rules(given: Mapping[str, Any]) -> tuple[Rule, ...]:
    """The rules promote reads a skip with: the configured ones the controller handed over, then the built-in."""
    own = tuple(Rule(r["pattern"], r["requirement"], tuple(r.get("frames", ()))) for r in given.get("rules", ()))
    return own + DEFAULT_RULES


def _conditions(mark: pytest.Mark) -> tuple[object, ...]:
    # As pytest reads a skipif: `condition=` or its positional conditions; none is an unconditional skip.
    return (mark.kwargs["condition"],) if "condition" in mark.kwargs else tuple(mark.args)


def _reasons(mark: pytest.Mark) -> list[str]:
    # pytest's own default for a string condition without a reason.
    reason = mark.kwargs.get("reason")
    return [str(reason)] if reason is not None else [f"condition: {c}" for c in _conditions(mark) if isinstance(c, str)]


def skip_evaluator() -> Callable[[pytest.Item], object] | None:
    """pytest's own evaluation of an item's skip marks (pytest 6 through 9), or None if a pytest moved it.

    It is private to pytest: without it a fleet places by `requires` markers only, and a device skip is
    judged after the run, as on one station.
    """
    try:
        from _pytest.skipping import evaluate_skip_marks
    except ImportError:
        return None
    return evaluate_skip_marks


def skip_needs(item: pytest.Item, here: Station, others: list[Station], rules: tuple[Rule, ...]) -> tuple[str, ...]:
    """What a `skipif` that holds here says the item needs, when some other station has that; else nothing.

    Its condition is evaluated as pytest will evaluate it before the test (it is evaluated again then). A
    test that skips on every station (a `skip` mark, a `skipif` without condition) is left where it is, and so
    is one whose condition raises: pytest reports that error when it runs the test.
    """
    marks = list(item.iter_markers("skipif"))
    if not marks or item.get_closest_marker("skip") is not None or not all(_conditions(m) for m in marks):
        return ()
    # The reasons first (a regex each): a condition is evaluated only when a reason may name what another has.
    named = [infer_skip(reason, rules) for m in marks for reason in _reasons(m)]
    if not any(r and here.lacking((r,)) and any(s.has(r) for s in others) for r in named):
        return ()
    evaluate = skip_evaluator()
    if evaluate is None:
        return ()
    try:
        skipped = evaluate(item)
    except (Exception, pytest.fail.Exception, pytest.skip.Exception):
        return ()
    reason = getattr(skipped, "reason", None)
    needed = infer_skip(reason, rules) if isinstance(reason, str) else None
    return (needed,) if needed else ()


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
