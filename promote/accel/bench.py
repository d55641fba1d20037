"""The interleaved A/B: rounds alternate which arm goes first; each run's wall and CPU time and the load it met."""

from __future__ import annotations

import os
import statistics
import threading
import time
from collections.abc import Callable
from pathlib import Path

from promote.accel.commands import Arm, CommandError, arm, run
from promote.accel.results import ArmStats, BenchResult, Run
from promote.config.settings import AccelerationConfig, BenchConfig, Config
from promote.core.stats import children_cpu, median_interval

BASELINE, CANDIDATE = "baseline", "candidate"
CONFIDENCE = 0.9
SAMPLE_S = 0.01
Say = Callable[[str], None]


def arms(config: Config, accel: AccelerationConfig, bench: BenchConfig, worktree: Path | None) -> tuple[Arm, Arm]:
    """By default the switch itself: the command off (baseline) and on (candidate)."""
    sw = accel.switch
    if worktree is not None:
        # Two revisions, both with the path on: the baseline from the worktree, in the same relative place.
        base = arm(config, accel, BASELINE, bench.baseline or bench.command or (), sw.on)
        cand = arm(config, accel, CANDIDATE, bench.candidate or bench.command or (), sw.on)
        moved = worktree / base.cwd.relative_to(config.root)
        return Arm(base.name, base.argv, moved, base.env), cand
    if bench.command is not None:
        return arm(config, accel, BASELINE, bench.command, sw.off), arm(config, accel, CANDIDATE, bench.command, sw.on)
    assert bench.baseline is not None and bench.candidate is not None  # the config parser requires both
    return arm(config, accel, BASELINE, bench.baseline, None), arm(config, accel, CANDIDATE, bench.candidate, None)


def _runnable() -> int | None:
    """Tasks runnable on the machine right now (Linux's /proc/loadavg), not counting the one reading it."""
    try:
        running = Path("/proc/loadavg").read_text().split()[3].split("/")[0]
        return max(0, int(running) - 1)
    except (OSError, ValueError, IndexError):
        return None


class _Sampler:
    """Samples the runnable tasks while an arm runs: the load it met, now rather than a minute's average."""

    def __init__(self) -> None:
        self.samples: list[int] = []
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while True:
            value = _runnable()
            if value is None:
                return
            self.samples.append(value)
            if self.done.wait(SAMPLE_S):
                return

    def __enter__(self) -> _Sampler:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        self.thread.join()

    @property
    def mean(self) -> float | None:
        return statistics.fmean(self.samples) if self.samples else None


def _load() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except (OSError, AttributeError):
        return None


def measure(a: Arm, timeout_s: float | None) -> Run:
    """Run `a` once: wall time, its process tree's CPU time, the load before and after and the load it met."""
    load_before, cpu_before = _load(), children_cpu()
    with _Sampler() as sampler:
        started = time.perf_counter()
        run(a, timeout_s=timeout_s)
        wall = time.perf_counter() - started
    # Descendants count once reaped by their parent: the arm's whole process tree.
    cpu = children_cpu() - cpu_before
    return Run(wall, cpu, load_before, _load(), sampler.mean)


def interleave(base: Arm, cand: Arm, bench: BenchConfig, say: Say | None = None) -> BenchResult:
    """Time both arms for `bench.rounds` rounds, swapping which goes first each round, after warm-ups."""
    for _ in range(bench.warmup):
        run(base, timeout_s=bench.timeout_s)
        run(cand, timeout_s=bench.timeout_s)
    runs: dict[str, list[Run]] = {BASELINE: [], CANDIDATE: []}
    order = []
    for i in range(bench.rounds):
        # Alternating cancels a systematic "the second arm benefits from the first" bias.
        pair = (base, cand) if i % 2 == 0 else (cand, base)
        order.append(pair[0].name)
        for a in pair:
            runs[a.name].append(measure(a, bench.timeout_s))
        if say is not None:
            say(f"round {i + 1}/{bench.rounds}: " + ", ".join(f"{a.name} {runs[a.name][-1].wall_s:.3f}s" for a in pair))
    return summarize(runs, tuple(order), bench)


def summarize(runs: dict[str, list[Run]], order: tuple[str, ...], bench: BenchConfig) -> BenchResult:
    """The median per-round ratio baseline/candidate (each round's two runs met the same machine)."""
    ratios = [b.wall_s / c.wall_s for b, c in zip(runs[BASELINE], runs[CANDIDATE], strict=True) if c.wall_s > 0]
    interval = median_interval(ratios, CONFIDENCE)
    stats = {name: _stats(rs) for name, rs in runs.items()}
    verdict = "measured" if bench.target is None else interval.verdict_at_least(bench.target)
    return BenchResult(
        rounds=len(ratios), speedup=statistics.median(ratios), interval=interval, target=bench.target,
        verdict=verdict, order=order, arms=stats, imbalance=imbalance(stats, bench.load_margin),
    )  # fmt: skip


def _mean(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.fmean(known) if known and len(known) == len(values) else None


def _stats(rs: list[Run]) -> ArmStats:
    loads: list[float | None] = [x for r in rs for x in (r.load_before, r.load_after)]
    return ArmStats(
        median_s=statistics.median(r.wall_s for r in rs),
        cpu_s=statistics.median(r.cpu_s for r in rs),
        load=_mean(loads),
        running=_mean([r.running for r in rs]),
        runs=tuple(rs),
    )


def imbalance(stats: dict[str, ArmStats], margin: float) -> str | None:
    """A note when the arms ran under load further apart than `margin`: the machine was not the same for both."""
    b, c = stats[BASELINE], stats[CANDIDATE]
    # The runnable tasks sampled during each run answer at once; the 1-minute load average trails by a minute.
    if b.running is not None and c.running is not None:
        what, unit, lb, lc = "tasks runnable meanwhile", "", b.running, c.running
    elif b.load is not None and c.load is not None:
        what, unit, lb, lc = "1-minute load average", "", b.load, c.load
    else:
        return None
    if abs(lb - lc) <= margin:
        return None
    return (
        f"load imbalance: {what} {lb:.1f}{unit} in the baseline, {lc:.1f}{unit} in the candidate "
        f"(more than {margin:g} apart): the machine was not the same for both arms"
    )


def failed(bench: BenchConfig, error: CommandError | str, ref: str | None = None) -> BenchResult:
    return BenchResult(rounds=0, target=bench.target, verdict="error", error=str(error), baseline_ref=ref)
