"""Causes over a fleet: each failure rerun on the station it failed on, and once alone on another that can run it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from promote.config import PackageConfig
from promote.core.station import FLEET_LOCAL, Station
from promote.runners.causes import bisect, station_rerun
from promote.runners.causes.budget import Budget
from promote.runners.causes.rerun import RerunError, Rerunner
from promote.runners.summary import PackageResult


def here(pkg: PackageConfig, result: PackageResult, base: Path) -> Rerunner:
    """The rerunner of a package run here: this machine, as the run detected it (its station file)."""
    station = result.out_dir.parent / "station.json"
    return Rerunner(pkg, pkg.interpreter, base, station if station.is_file() else None)


def rerunners(pkg: PackageConfig, result: PackageResult, victims: list[str]) -> list[tuple[Rerunner, list[str]]]:
    """Who reruns which failures: here for a package run here, else the station each failed on."""
    if not victims:
        return []
    base = result.out_dir / "reruns"
    if not result.placed:
        return [(here(pkg, result, base), victims)]
    fleet = station_rerun.places(result.out_dir)
    groups: dict[str, list[str]] = {}
    for victim in victims:
        groups.setdefault(result.ran_on(victim) or FLEET_LOCAL, []).append(victim)
    return [
        (station_rerun.StationRerunner(pkg, pkg.interpreter, base / name, fleet[name]), group)
        for name, group in groups.items()
        if name in fleet
    ]


def pass_rerunners(
    pkg: PackageConfig, result: PackageResult, base: Path, stations: Sequence[str | None]
) -> list[Rerunner | RerunError]:
    """Who runs each pass without restores: here for a package run here, else the station of its worker (one
    rerunner per station, each in a directory of its own); a RerunError for a pass no station can run."""
    if not result.placed:
        local = here(pkg, result, base)
        return [local for _ in stations]
    fleet = station_rerun.places(result.out_dir)
    theirs: dict[str, Rerunner] = {}
    found: list[Rerunner | RerunError] = []
    for name in stations:
        if name is not None and name in result.stations_down:
            found.append(RerunError(f"its worker ran on {name}, which stopped answering: it cannot be rerun there"))
        elif name is None or name not in fleet:
            found.append(RerunError(f"the station its worker ran on is not known ({name or 'none recorded'})"))
        else:
            if name not in theirs:
                theirs[name] = station_rerun.StationRerunner(pkg, pkg.interpreter, base / name, fleet[name])
            found.append(theirs[name])
    return found


def across(
    pkg: PackageConfig,
    result: PackageResult,
    rerunner: station_rerun.StationRerunner,
    found: list[bisect.Verdict],
    budget: Budget,
) -> list[bisect.Verdict]:
    """A failure that fails alone on its station, run alone on another that can run it: does it pass there?

    One rerun each, on the first other station of the fleet whose inventory meets the test's requirements.
    """
    fleet = station_rerun.places(result.out_dir)
    needs = {t.nodeid: t.requirements for t in result.tests if t.parent is None}
    # One rerunner per station it goes to, in a directory of its own: each rerun gets a fresh numbered directory.
    theirs: dict[str, station_rerun.StationRerunner] = {}
    checked = []
    for v in found:
        others = [
            place for name, place in fleet.items()
            if name != rerunner.place.name and name not in result.stations_down
            and not Station.from_json(place.station).lacking(needs.get(v.test, ()))
        ]  # fmt: skip
        if v.kind != bisect.GENUINE or not others or not budget.take(1, by=v.test):
            checked.append(v)
            continue
        place = others[0]
        if place.name not in theirs:
            base = rerunner.base.parent / f"{place.name}-after-{rerunner.place.name}"
            theirs[place.name] = station_rerun.StationRerunner(pkg, pkg.interpreter, base, place)
        there = theirs[place.name]
        try:
            passed = not there.fails([], v.test)
        except RerunError:
            passed = False
        checked.append(replace(v, reruns=v.reruns + 1, passes_on=(place.name,) if passed else ()))
    return checked


def unreachable(result: PackageResult, victims: list[str]) -> list[bisect.Verdict]:
    """Over a fleet, the failures on a station that stopped answering: undecided, saying so (no rerun can tell)."""
    far = []
    for test in victims:
        station = result.ran_on(test)
        if station is not None and station in result.stations_down:
            detail = f"failed on {station}, which stopped answering: it cannot be rerun there"
            far.append(bisect.Verdict(test, bisect.UNDECIDED, detail=detail))
    return far
