"""The runs stored under .promote/runs/: the last one of a package, and how long its tests took."""

from __future__ import annotations

from pathlib import Path

from promote.config import Config
from promote.core import state
from promote.runners.plugin.records import ResultsUnreadable, read_all_results


def latest_before(run_dir: Path, package: str) -> Path | None:
    """The newest stored run of `package` before `run_dir` (run ids sort by time)."""
    found = sorted(d / package for d in run_dir.parent.iterdir() if d.name < run_dir.name and (d / package).is_dir())
    return found[-1] if found else None


def durations_of(package_dir: Path | None) -> dict[str, float]:
    """How long each test of a stored package run took (a fleet sends the longest first); {} without one."""
    if package_dir is None:
        return {}
    durations: dict[str, float] = {}
    for part in sorted(p for p in package_dir.iterdir() if p.is_dir()):
        try:
            workers = read_all_results(part)
        except (OSError, ResultsUnreadable):
            continue  # a run cut short or written by another version: no durations, the collection's order
        durations.update((t.nodeid, t.duration_s) for w in workers for t in w.tests if t.parent is None)
    return durations


def last_run_dir(config: Config, package: str) -> Path | None:
    """The newest stored run of `package`, if any (run ids sort by time)."""
    runs = state.runs_path(config.root)
    if not runs.is_dir():
        return None
    found = sorted(d / package for d in runs.iterdir() if (d / package).is_dir())
    return found[-1] if found else None
