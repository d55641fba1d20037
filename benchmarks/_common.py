"""Shared helpers for the benchmarks: fixtures, interleaved A/B timing, tables and results."""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from promote.core.stats import MedianInterval, children_cpu, median_interval

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
WORK_DIR = BENCH_DIR / ".work"  # git-ignored: fixtures and results live here
RESULTS_DIR = WORK_DIR / "results"

# Pinned identities and plain messages, so generated repositories are byte-for-byte
# reproducible and git's output is parseable whatever the user's locale and config.
GIT_ENV = {
    "GIT_AUTHOR_NAME": "Bench",
    "GIT_AUTHOR_EMAIL": "bench@example.invalid",
    "GIT_COMMITTER_NAME": "Bench",
    "GIT_COMMITTER_EMAIL": "bench@example.invalid",
    "GIT_TERMINAL_PROMPT": "0",
    "LC_ALL": "C",
    "LANG": "C",
}


class BenchError(RuntimeError):
    """A benchmark could not run as designed; raised instead of timing an error."""


def bench_env() -> dict[str, str]:
    """The environment every benchmark subprocess (both arms, and setup) runs with."""
    env = {**os.environ, **GIT_ENV}
    # A GIT_DIR or GIT_WORK_TREE inherited from a hook would point git at the wrong repo.
    for name in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY"):
        env.pop(name, None)
    return env


def run(
    argv: Sequence[str | os.PathLike[str]],
    cwd: Path,
    *,
    stdin: bytes | None = None,
) -> str:
    """Run a setup command that must succeed and return its stdout; raise with its stderr."""
    result = subprocess.run(
        [os.fspath(a) for a in argv],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        env=bench_env(),
        check=False,
    )
    if result.returncode != 0:
        cmd = " ".join(os.fspath(a) for a in argv)
        err = result.stderr.decode(errors="replace").strip()
        raise BenchError(f"`{cmd}` failed in {cwd} (exit {result.returncode}): {err}")
    return result.stdout.decode(errors="replace")


def git(cwd: Path, *args: str, stdin: bytes | None = None) -> str:
    """Run `git ARGS` in `cwd` for fixture setup; it must succeed."""
    return run(["git", *args], cwd, stdin=stdin)


def pycache_env() -> dict[str, str]:
    """Let a benchmark's Python processes cache bytecode under .work/, as installed packages do."""
    # With PYTHONDONTWRITEBYTECODE set (as in some sandboxes) every run would recompile an
    # editable install's modules and pytest's rewritten test modules, a cost no user pays.
    # The prefix keeps the caches out of the source tree and the generated fixtures.
    return {"PYTHONDONTWRITEBYTECODE": "", "PYTHONPYCACHEPREFIX": str(WORK_DIR / "pycache")}


def cache_key(params: Mapping[str, Any]) -> str:
    """A short stable name for a fixture built from `params`."""
    blob = json.dumps(dict(params), sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:12]


def cached_fixture(
    root: Path,
    params: Mapping[str, Any],
    build: Callable[[Path], None],
    *,
    fresh: bool = False,
) -> Path:
    """Return the fixture directory for `params`, building it first if missing or incomplete."""
    target = root / cache_key(params)
    marker = target / "READY.json"
    if fresh or not marker.is_file():
        # A half-built directory (interrupted run) is worthless: start from nothing.
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
        started = time.perf_counter()
        build(target)
        meta = {"params": dict(params), "build_s": round(time.perf_counter() - started, 2)}
        marker.write_text(json.dumps(meta, indent=2) + "\n")
    return target


def promote_argv() -> list[str]:
    """How to start the `promote` under test: the console script beside this interpreter."""
    # The script next to sys.executable belongs to the same environment (e.g. nox's venv);
    # a `promote` found on PATH might be some other install.
    script = Path(sys.executable).parent / ("promote.exe" if os.name == "nt" else "promote")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "promote"]


@dataclass(frozen=True)
class Arm:
    """One side of an A/B comparison: a command, where it runs, and how to tell it worked."""

    name: str
    argv: tuple[str, ...]
    cwd: Path
    ok_exit: frozenset[int]
    verify: Callable[[str], None]  # raises BenchError when stdout shows the wrong answer
    env: Mapping[str, str] = field(default_factory=dict)  # added to bench_env()


@dataclass
class Timings:
    """Wall times in seconds per arm, in round order, and which arm went first each round."""

    arms: tuple[str, str]
    seconds: dict[str, list[float]] = field(default_factory=dict)
    first: list[str] = field(default_factory=list)
    # CPU seconds (user + system) of each run's whole process tree, where the platform reports it.
    cpu_seconds: dict[str, list[float]] = field(default_factory=dict)
    # CPU seconds the rest of the machine used during each run (None where unknown): the noise.
    others_cpu_seconds: dict[str, list[float | None]] = field(default_factory=dict)

    def median(self, arm: str) -> float:
        return statistics.median(self.seconds[arm])

    def ratios(self) -> list[float]:
        """Per-round ratio A/B: each round's two runs saw the same machine conditions."""
        a, b = self.arms
        return [x / y for x, y in zip(self.seconds[a], self.seconds[b], strict=True)]

    def median_ratio(self) -> float:
        return statistics.median(self.ratios())

    def ratio_interval(self, confidence: float = 0.9) -> MedianInterval:
        """Where the median per-round ratio lies, as far as these rounds can say (see `median_interval`)."""
        return median_interval(self.ratios(), confidence)

    def cpu_ratios(self) -> list[float]:
        """Per-round CPU-time ratio A/B: the work each arm did, which other load on the machine barely moves."""
        a, b = self.arms
        return [x / y for x, y in zip(self.cpu_seconds[a], self.cpu_seconds[b], strict=True)]


@dataclass(frozen=True)
class Measurement:
    """One run of an arm: wall time, its process tree's CPU time, and what the rest of the machine used."""

    wall_s: float
    cpu_s: float
    others_cpu_s: float | None


def machine_busy_cpu() -> float | None:
    """CPU seconds the whole machine has been busy since boot (Linux's /proc/stat), None elsewhere."""
    try:
        first = Path("/proc/stat").read_text().split("\n", 1)[0].split()
        ticks = [int(x) for x in first[1:9]]  # user nice system idle iowait irq softirq steal
    except (OSError, ValueError):
        return None
    # Steal counts as busy: another VM on the same host slows the arms just as a local process does.
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")


def wait_until_idle(max_wait_s: float, *, window_s: float = 2.0, busy_max: float = 0.1) -> float | None:
    """Wait until the machine is idle (under `busy_max` of its CPUs busy over `window_s`); return the wait.

    Returns None when the machine did not go idle within `max_wait_s` (or cannot tell): the run goes
    ahead anyway, and its others' CPU time says how noisy it was.
    """
    started = time.perf_counter()
    cpus = os.cpu_count() or 1
    while True:
        before = machine_busy_cpu()
        if before is None:
            return None
        time.sleep(window_s)
        after = machine_busy_cpu()
        if after is not None and (after - before) / (window_s * cpus) <= busy_max:
            return time.perf_counter() - started
        if time.perf_counter() - started >= max_wait_s:
            return None


def time_arm(arm: Arm) -> float:
    """Run one arm once as a subprocess and return its wall time; fail loudly if it failed."""
    return measure_arm(arm).wall_s


def measure_arm(arm: Arm) -> Measurement:
    """Run one arm once as a subprocess and measure it; fail loudly if it failed."""
    argv = list(arm.argv)
    env = {**bench_env(), **arm.env}
    cpu_before, busy_before = children_cpu(), machine_busy_cpu()
    started = time.perf_counter()
    result = subprocess.run(argv, cwd=arm.cwd, capture_output=True, env=env, check=False)
    elapsed = time.perf_counter() - started
    # Descendants count once reaped by their parent (pytest reaps its xdist workers, promote its pytests).
    cpu = children_cpu() - cpu_before
    busy_after = machine_busy_cpu()
    others = None
    if busy_before is not None and busy_after is not None:
        # Clock ticks are coarse (10 ms): a small negative remainder is rounding, not a measurement.
        others = max(0.0, busy_after - busy_before - cpu)
    out = result.stdout.decode(errors="replace")
    if result.returncode not in arm.ok_exit:
        err = result.stderr.decode(errors="replace").strip()
        raise BenchError(
            f"arm {arm.name!r} exited {result.returncode} (expected one of "
            f"{sorted(arm.ok_exit)}): {' '.join(argv)}\nstdout:\n{out}\nstderr:\n{err}"
        )
    arm.verify(out)
    return Measurement(elapsed, cpu, others)


def interleave(
    a: Arm, b: Arm, rounds: int, *, warmup: int = 1, settle_s: float = 0.0, show_noise: bool = False
) -> Timings:
    """Time two arms alternately, swapping which goes first each round, after uncounted warm-ups.

    With `settle_s` > 0, each timed run first waits up to that long for the machine to go idle;
    `show_noise` adds the CPU time other processes used during each run to the progress lines.
    """
    for _ in range(warmup):
        # Warm the page cache, the interpreter's .pyc files and git's own files for both arms.
        time_arm(a)
        time_arm(b)
    names = (a.name, b.name)
    timings = Timings(
        arms=names,
        seconds={n: [] for n in names},
        cpu_seconds={n: [] for n in names},
        others_cpu_seconds={n: [] for n in names},
    )
    for i in range(rounds):
        # Alternating the order cancels a systematic "second runner benefits from the first" bias.
        order = (a, b) if i % 2 == 0 else (b, a)
        timings.first.append(order[0].name)
        for arm in order:
            if settle_s > 0:
                # On a shared machine another job's burst lands on one arm only; starting from idle makes that rarer.
                wait_until_idle(settle_s)
            m = measure_arm(arm)
            timings.seconds[arm.name].append(m.wall_s)
            timings.cpu_seconds[arm.name].append(m.cpu_s)
            timings.others_cpu_seconds[arm.name].append(m.others_cpu_s)
        # Listed in the order they ran this round.
        ran = ", ".join(f"{arm.name} {timings.seconds[arm.name][-1]:.3f}s" for arm in order)
        if show_noise:
            others = [timings.others_cpu_seconds[arm.name][-1] for arm in order]
            ran += " (others' CPU: " + ", ".join("?" if o is None else f"{o:.1f}s" for o in others) + ")"
        print(f"  round {i + 1}/{rounds}: {ran}", flush=True)
    return timings


def arm_rows(timings: Timings) -> list[list[str]]:
    """Rows of median, min and max seconds per arm, for `format_table`."""
    return [
        [
            name,
            f"{timings.median(name):.3f}",
            f"{min(timings.seconds[name]):.3f}",
            f"{max(timings.seconds[name]):.3f}",
        ]
        for name in timings.arms
    ]


def machine_info() -> dict[str, Any]:
    """What the figures were measured on, so a reader can weigh them."""
    git_version = subprocess.run(["git", "--version"], capture_output=True, text=True, check=False).stdout.strip()
    return {
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "git": git_version,
    }


def format_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A Markdown table, so the same text reads well in a terminal and in BENCHMARKS.md."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    lines = [
        "| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)) + " |",
        "|" + "|".join("-" * (w + 2) for w in widths) + "|",
    ]
    for row in rows:
        lines.append("| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |")
    return "\n".join(lines)


@contextlib.contextmanager
def exclusive(name: str) -> Iterator[None]:
    """Hold WORK_DIR/<name>.lock while benchmarking: a second run waits instead of sharing the CPUs and fixtures."""
    WORK_DIR.mkdir(parents=True, exist_ok=True)
    if sys.platform == "win32":
        yield
        return
    import fcntl

    with (WORK_DIR / f"{name}.lock").open("w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"{name}: another run of this benchmark is going; waiting for it to finish ...", flush=True)
            fcntl.flock(lock, fcntl.LOCK_EX)
        yield  # the lock goes with the file when it closes


def write_results(name: str, data: Mapping[str, Any]) -> Path:
    """Write a benchmark's figures as JSON under benchmarks/.work/results/ and return the path."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"{name}.json"
    path.write_text(json.dumps(dict(data), indent=2) + "\n")
    return path
