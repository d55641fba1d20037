"""The kill switch, both ways: the package's tests through promote's own runner, with the switch off and on."""

from __future__ import annotations

import dataclasses
import platform
from pathlib import Path

from promote.accel.ledger import LEDGER_ENV, Engagement, fresh, read_tally
from promote.accel.results import StationBuild, SwitchResult, SwitchRun
from promote.config.settings import AccelerationConfig, Config
from promote.core.station import FLEET_LOCAL
from promote.core.vocab import is_red
from promote.runners import suite
from promote.runners.fleet.run import stations_of
from promote.runners.package import ProgressCallback
from promote.runners.suite import RunResult
from promote.runners.summary import PackageResult


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


def first_pass(
    config: Config, accel: AccelerationConfig, value: str, on_progress: ProgressCallback | None, ledger: Path
) -> tuple[suite.FirstPass, int]:
    """The tests one way, before any rerun, and the size of the ledger they wrote: reruns of a failing test (to
    find its cause) write to the same ledger, and counting them would count its requests once per rerun."""
    assert accel.package is not None
    done = suite.first_pass(with_switch(config, accel, value, ledger), package=accel.package, on_progress=on_progress)
    return done, ledger.stat().st_size if ledger.exists() else 0


def outcomes(pkg: PackageResult) -> dict[str, str]:
    """Each test's outcome in a pass; a test no station here can run is blocked, not red: neither way ran it."""
    found = {t.nodeid: t.outcome for t in pkg.tests if t.parent is None}
    found.update({t: "error" for t in pkg.crashed_tests})
    found.update({t: "blocked" for t in pkg.blocked_tests})
    return found


def switch_run(value: str, run: RunResult) -> SwitchRun:
    [pkg] = run.packages
    counts = {
        "passed": pkg.passed, "failed": pkg.failed, "errors": pkg.errors, "skipped": pkg.skipped,
        "blocked": pkg.blocked, "crashed": pkg.crashed,
    }  # fmt: skip
    return SwitchRun(value, counts, outcomes(pkg), run.run_id)


def differing(one: suite.FirstPass, other: suite.FirstPass) -> frozenset[str]:
    """The tests red one way and green the other: the only ones whose cause the switch's verdict needs."""
    a, b = outcomes(one.results[0]), outcomes(other.results[0])
    return frozenset(t for t in a.keys() | b.keys() if is_red(a.get(t, "")) != is_red(b.get(t, "")))


def kill_switch(
    config: Config, accel: AccelerationConfig, on_progress: ProgressCallback | None = None
) -> tuple[SwitchResult, tuple[RunResult, ...]]:
    """Run the package's tests with the switch off, then on (each a stored run, each with a ledger of its own).

    Both ways run first; then the causes of only the tests that differ between them are asked for. A test red
    both ways (or green both ways) needs none for the switch's verdict, and the main run asks for its causes."""
    engaged: Engagement | None
    with fresh("switch") as tmp:
        off_pass, off_size = first_pass(config, accel, accel.switch.off, on_progress, tmp / "off.jsonl")
        on_pass, on_size = first_pass(config, accel, accel.switch.on, on_progress, tmp / "on.jsonl")
        asked = differing(off_pass, on_pass)
        run_off, run_on = (suite.finish(p, only=lambda _: asked) for p in (off_pass, on_pass))
        engaged = Engagement(
            read_tally(tmp / "off.jsonl", accel.name, upto=off_size),
            read_tally(tmp / "on.jsonl", accel.name, upto=on_size),
        )
    off, on = switch_run(accel.switch.off, run_off), switch_run(accel.switch.on, run_on)
    if any(set(stations_of(p)) - {FLEET_LOCAL} for r in (run_off, run_on) for p in r.packages):
        # The tests ran on another station: their ledger was written there, and an empty one here proves nothing.
        engaged = None
    return SwitchResult(accel.switch.env, off, on, engaged, (run_off, run_on)), (run_off, run_on)


def stations(accel: AccelerationConfig, runs: tuple[RunResult, ...], *, here: bool) -> tuple[StationBuild, ...]:
    """Each station that ran the path's tests with its OS build, and this one when parity or the bench ran here."""
    seen: dict[str, str | None] = {}
    for run in runs:
        for p in run.packages:
            fleet = stations_of(p)
            for name, there in fleet.items():
                if name != FLEET_LOCAL:
                    seen[there.name] = there.os_build
            if (not fleet or FLEET_LOCAL in fleet) and run.stations is not None:
                seen[run.stations.local.name] = run.stations.local.os_build
    local = next((r.stations.local.name for r in runs if r.stations is not None), "local")
    if here and local not in seen:
        seen[local] = f"{platform.system()} {platform.release()}"
    listed = set(accel.validated_on)
    return tuple(
        StationBuild(name, build, (build in listed) if listed else None) for name, build in sorted(seen.items())
    )
