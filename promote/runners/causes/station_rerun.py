"""Reruns on the station where a fleet's test failed: one xdist worker there, the same plugin, the same records.

A fleet run leaves its description (fleet-spec.json: each station's execnet spec, inventory and scratch
directory) beside its records. A rerun of a test that failed on `training` starts a controller here with one
worker on `training` (`--tx 1*ssh=...`): the selection it is asked for travels in the worker's input, its
records come back in xdist's channel, as in the run. Each selection runs in a process of its own (the
worker does not fork them: xdist's worker loop is what runs its tests).
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from promote.config import PackageConfig
from promote.core import state
from promote.core.bounded_json import JsonRejected, read_object
from promote.core.station import FLEET_LOCAL
from promote.runners.causes.rerun import Rerunner, Seen, own_files, rerun_options
from promote.runners.package import PLUGIN, environment
from promote.runners.plugin.records import write_atomic

SPEC = "fleet-spec.json"  # written beside a fleet run's records (promote.runners.fleet.run)


@dataclass(frozen=True)
class Place:
    """One station of a fleet, as a rerun reaches it: its execnet spec, what it has, where its workers write."""

    name: str
    spec: str
    station: Mapping[str, Any]
    scratch: str


def places(out_dir: Path) -> dict[str, Place]:
    """The stations of the fleet run whose records are in `out_dir` (none for a package run on one station)."""
    try:
        data = read_object(out_dir / SPEC)
    except (OSError, JsonRejected):
        return {}
    tx, stations, scratch = data.get("tx"), data.get("stations"), data.get("scratch")
    if not (isinstance(tx, dict) and isinstance(stations, dict) and isinstance(scratch, dict)):
        return {}
    found = {}
    for name, spec in tx.items():
        station, where = stations.get(name), scratch.get(name)
        if isinstance(spec, str) and isinstance(station, dict) and isinstance(where, str):
            found[name] = Place(name, spec, station, where)
    return found


def addopts(pkg: PackageConfig) -> str:
    """The package's `args` as PYTEST_ADDOPTS: a station's worker resolves them in its own directory."""
    return " ".join(part for part in (os.environ.get("PYTEST_ADDOPTS", ""), shlex.join(pkg.args)) if part)


class StationRerunner(Rerunner):
    """A Rerunner whose every rerun runs on one station of a fleet."""

    def __init__(self, pkg: PackageConfig, python: str, base: Path, place: Place) -> None:
        super().__init__(pkg, python, base)
        self.place = place

    def command(self, out_dir: Path, options: Sequence[str]) -> tuple[list[str], dict[str, str]]:
        fleet = {
            "stations": {self.place.name: dict(self.place.station)},
            # A directory of its own there for each rerun: reruns run side by side.
            "scratch": {self.place.name: f"{self.place.scratch}/{out_dir.name}"},
            "remote": [self.place.name] if self.place.name != FLEET_LOCAL else [],
        }
        with own_files():
            path = write_atomic(out_dir / SPEC, json.dumps(fleet))
        cmd = [
            self.python, "-m", "pytest", "-p", "no:promote", "-p", PLUGIN, "-p", "no:cacheprovider", "-q",
            "--continue-on-collection-errors", *options,
            # One worker there, never replaced: a rerun that kills it has shown what it shows.
            "--dist=load", f"--promote-fleet={path}", "--max-worker-restart=0", f"--tx=1*{self.place.spec}",
        ]  # fmt: skip
        env = environment(self.pkg, self.python)
        if self.pkg.args:
            env["PYTEST_ADDOPTS"] = addopts(self.pkg)
        return cmd, env

    def observe(
        self, selections: Sequence[Sequence[str]], victim: str, *, ignore: Sequence[str] = (), only: str | None = None
    ) -> tuple[list[Seen], int]:
        """Each selection then `victim`, each in a fresh process there (one pytest call each)."""
        seen = []
        for selection in selections:
            out_dir = self.next_dir()
            chosen = [*selection, victim]
            with own_files():
                select = state.write_private(out_dir / "select.txt", "".join(f"{t}\n" for t in chosen))
            more = [f"--promote-select={select}"]
            if ignore:
                with own_files():
                    ignored = state.write_private(out_dir / "ignore.txt", "".join(f"{m}\n" for m in ignore))
                more.append(f"--promote-ignore={ignored}")
            if only is not None:
                more.append(f"--promote-only={only}")
            done = self.pytest(out_dir, *rerun_options(out_dir, *more), tests=len(chosen))
            worker = next((p.stem.removeprefix("progress-") for p in sorted(out_dir.glob("progress-*.jsonl"))), "gw0")
            seen.append(self.seen(out_dir, worker, victim, done, None))
        return seen, len(selections)
