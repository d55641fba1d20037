"""`promote test`: run every configured test package with isolation and gather what ran."""

from __future__ import annotations

import json
import os
import platform
import secrets
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from promote import journal
from promote.config import Config, PackageConfig
from promote.errors import ConfigError, UsageError
from promote.findings import Finding
from promote.order import Budget, investigate
from promote.runners import runner
from promote.runners.runner import ProgressCallback
from promote.runners.summary import PackageResult, summarize


@dataclass(frozen=True)
class RunResult:
    """One `promote test` run: every package's result and every finding."""

    run_id: str
    started: str
    finished: str
    packages: tuple[PackageResult, ...]
    out_dir: Path

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
        }


def local_platform() -> str:
    """This machine as a station platform name, e.g. `linux-x86_64` or `darwin-arm64`."""
    machine = platform.machine().lower()
    return f"{sys.platform}-{'arm64' if machine in ('arm64', 'aarch64') else machine}"


def new_run_id() -> str:
    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(2)


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
    return chosen


def last_run_dir(config: Config, package: str) -> Path | None:
    """The newest stored run of `package`, if any (run ids sort by time)."""
    runs = config.root / ".promote" / "runs"
    if not runs.is_dir():
        return None
    found = sorted(d / package for d in runs.iterdir() if (d / package).is_dir())
    return found[-1] if found else None


def run_one(pkg: PackageConfig, run_dir: Path, on_progress: ProgressCallback | None) -> PackageResult:
    out_dir = run_dir / pkg.name
    python = pkg.python or sys.executable
    parts = runner.run_package(pkg, out_dir, python=python, leaks=pkg.leaks, on_progress=on_progress)
    return summarize(
        pkg.name, pkg.path, out_dir, station=f"local ({local_platform()})", parts=parts, timeout_s=pkg.timeout_s
    )


def run_tests(config: Config, *, package: str | None = None, on_progress: ProgressCallback | None = None) -> RunResult:
    """Run the selected packages concurrently (bounded by cores) and store the run."""
    chosen = select(config, package)
    run_id = new_run_id()
    run_dir = journal.state_dir(config.root) / "runs" / run_id
    run_dir.mkdir(parents=True)
    started = datetime.now(timezone.utc).isoformat(timespec="microseconds")
    t0 = time.monotonic()
    with ThreadPoolExecutor(max_workers=max(1, min(len(chosen), os.cpu_count() or 1))) as pool:
        results = tuple(pool.map(lambda p: run_one(p, run_dir, on_progress), chosen))
    # Then the cause of each failure: reruns alone and bisection, one package after another (shared budget).
    budget = Budget(config.max_reruns)
    results = tuple(investigate(p, r, budget) for p, r in zip(chosen, results, strict=True))
    result = RunResult(
        run_id=run_id,
        started=started,
        finished=datetime.now(timezone.utc).isoformat(timespec="microseconds"),
        packages=results,
        out_dir=run_dir,
    )
    (run_dir / "run.json").write_text(
        json.dumps({**result.to_json(), "wall_s": round(time.monotonic() - t0, 3)}, indent=1), encoding="utf-8"
    )
    return result
