"""The kill switch, both ways: the package's tests through promote's own runner, with the switch off and on."""

from __future__ import annotations

import dataclasses
import platform
from pathlib import Path

from promote.accel.ledger import LEDGER_ENV, Engagement, fresh, read_tally
from promote.accel.results import StationBuild, SwitchResult, SwitchRun
from promote.config.settings import AccelerationConfig, Config
from promote.runners.causes.investigate import Step
from promote.runners.package import ProgressCallback
from promote.runners.remote.station_run import ran_on
from promote.runners.suite import RunResult, run_tests


def with_switch(config: Config, accel: AccelerationConfig, value: str, ledger: Path | None = None) -> Config:
    """`config` with the path's package setting the switch to `value` (after its own env, so it wins)."""
    env = accel.switch.env
    add = ((env, value),) if ledger is None else ((env, value), (LEDGER_ENV, str(ledger)))
    names = {k for k, _ in add}
    packages = tuple(
        dataclasses.replace(p, env=(*(kv for kv in p.env if kv[0] not in names), *add))
        if p.name == accel.package
        else p
        for p in config.packages
    )
    return dataclasses.replace(config, packages=packages)


class FirstPass:
    """How much of the ledger the tests' first pass wrote: its size when promote's first rerun starts.

    Reruns of a failing test (to find its cause) write to the same ledger; counting them would count a
    failing test's requests once per rerun. Every rerun announces itself (a step) before it starts.
    """

    def __init__(self, ledger: Path) -> None:
        self.ledger = ledger
        self.size: int | None = None

    def __call__(self, step: Step) -> None:
        if self.size is None:
            self.size = self.ledger.stat().st_size if self.ledger.exists() else 0


def run_way(
    config: Config, accel: AccelerationConfig, value: str, on_progress: ProgressCallback | None,
    ledger: Path | None = None,
) -> tuple[SwitchRun, RunResult, int | None]:  # fmt: skip
    """The tests one way; and, with a ledger, how many of its bytes the first pass wrote (None: all of it)."""
    assert accel.package is not None
    cut = None if ledger is None else FirstPass(ledger)
    result = run_tests(
        with_switch(config, accel, value, ledger), package=accel.package, on_progress=on_progress, on_step=cut
    )
    [pkg] = result.packages
    counts = {
        "passed": pkg.passed, "failed": pkg.failed, "errors": pkg.errors, "skipped": pkg.skipped,
        "blocked": pkg.blocked, "crashed": pkg.crashed,
    }  # fmt: skip
    outcomes = {t.nodeid: t.outcome for t in pkg.tests if t.parent is None}
    outcomes.update({t: "error" for t in pkg.crashed_tests})
    # A test no station here can run is blocked, not red: neither way of the switch ran it.
    outcomes.update({t: "blocked" for t in pkg.blocked_tests})
    return SwitchRun(value, counts, outcomes, result.run_id), result, None if cut is None else cut.size


def kill_switch(
    config: Config, accel: AccelerationConfig, on_progress: ProgressCallback | None = None
) -> tuple[SwitchResult, tuple[RunResult, ...]]:
    """Run the package's tests with the switch off, then on (each a stored run, each with a ledger of its own)."""
    engaged: Engagement | None
    with fresh("switch") as tmp:
        off, run_off, off_size = run_way(config, accel, accel.switch.off, on_progress, tmp / "off.jsonl")
        on, run_on, on_size = run_way(config, accel, accel.switch.on, on_progress, tmp / "on.jsonl")
        engaged = Engagement(
            read_tally(tmp / "off.jsonl", accel.name, upto=off_size),
            read_tally(tmp / "on.jsonl", accel.name, upto=on_size),
        )
    if any(ran_on(p) is not None for r in (run_off, run_on) for p in r.packages):
        # The tests ran on another station: their ledger was written there, and an empty one here proves nothing.
        engaged = None
    return SwitchResult(accel.switch.env, off, on, engaged, (run_off, run_on)), (run_off, run_on)


def stations(accel: AccelerationConfig, runs: tuple[RunResult, ...], *, here: bool) -> tuple[StationBuild, ...]:
    """Each station that ran the path's tests with its OS build, and this one when parity or the bench ran here."""
    seen: dict[str, str | None] = {}
    for run in runs:
        for p in run.packages:
            there = ran_on(p)
            if there is not None:
                seen[there.name] = there.os_build
            elif run.stations is not None:
                seen[run.stations.local.name] = run.stations.local.os_build
    local = next((r.stations.local.name for r in runs if r.stations is not None), "local")
    if here and local not in seen:
        seen[local] = f"{platform.system()} {platform.release()}"
    listed = set(accel.validated_on)
    return tuple(
        StationBuild(name, build, (build in listed) if listed else None) for name, build in sorted(seen.items())
    )
