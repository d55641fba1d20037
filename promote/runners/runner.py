"""Run one test package as its own `python -m pytest` process, with the promote plugin loaded."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import promote
from promote.config import PackageConfig

# Loaded by module path, so the plugin works in a package's own virtualenv without promote installed.
PLUGIN = "promote.runners.plugin"
POLL_S = 0.25

ProgressCallback = Callable[[str, int], None]


@dataclass(frozen=True)
class ProcessOutcome:
    """How the pytest process of one package ended."""

    command: tuple[str, ...]
    status: int
    duration_s: float
    log: Path


def _has_promote_entry_point(python: str) -> bool:
    """True when `python` loads our plugin by itself (promote installed there)."""
    if python == sys.executable:
        return True
    probe = (
        "import importlib.metadata as m, sys; "
        "sys.exit(0 if any(e.value == 'promote.runners.plugin' for e in m.entry_points(group='pytest11')) else 1)"
    )
    return subprocess.run([python, "-c", probe], capture_output=True).returncode == 0


def command(pkg: PackageConfig, out_dir: Path, *, python: str, leaks: str, extra: tuple[str, ...] = ()) -> list[str]:
    """The pytest command line for one package."""
    cmd = [python, "-m", "pytest"]
    if not _has_promote_entry_point(python):
        cmd += ["-p", PLUGIN]
    cmd += [
        "--promote-out", str(out_dir),
        "--promote-leaks", leaks,
        "--junitxml", str(out_dir / "junit.xml"),
        "-o", "junit_family=xunit2",
        "-p", "no:cacheprovider",
        "-q",
        # Worker processes are spawned by execnet (never forked), and a dead worker is replaced
        # so the rest of the package still runs.
        "-n", str(pkg.workers),
        "--dist", "loadgroup",
        "--max-worker-restart", "1000",
    ]  # fmt: skip
    return cmd + list(extra)


def environment(pkg: PackageConfig, python: str) -> dict[str, str]:
    env = {**os.environ, **dict(pkg.env)}
    if python != sys.executable:
        # A foreign interpreter finds the plugin (and only promote) on its path.
        src = str(Path(promote.__file__).resolve().parent.parent)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH", "")) if p)
    return env


def count_finished(out_dir: Path) -> int:
    """Tests finished so far, from the workers' progress logs (cheap: counts lines)."""
    done = 0
    for path in out_dir.glob("progress-*.jsonl"):
        try:
            done += path.read_text(encoding="utf-8").count('"event":"finish"')
        except OSError:
            continue
    return done


def run_package(
    pkg: PackageConfig,
    out_dir: Path,
    *,
    python: str,
    leaks: str,
    extra: tuple[str, ...] = (),
    on_progress: ProgressCallback | None = None,
) -> ProcessOutcome:
    """Run `pkg`'s tests to completion, reporting progress; never raises on test failures."""
    out_dir.mkdir(parents=True, exist_ok=True)
    cmd = command(pkg, out_dir, python=python, leaks=leaks, extra=extra)
    log = out_dir / "pytest.log"
    started = time.monotonic()
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            cmd,
            cwd=pkg.path,
            env=environment(pkg, python),
            stdout=sink,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        last = -1
        while proc.poll() is None:
            time.sleep(POLL_S)
            if on_progress is not None:
                done = count_finished(out_dir)
                if done != last:
                    on_progress(pkg.name, done)
                    last = done
    return ProcessOutcome(tuple(cmd), proc.returncode, time.monotonic() - started, log)
