"""The interleaved A/B: every case's arms each round, which goes first rotated; each run's times and load."""

from __future__ import annotations

import json
import math
import os
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from promote.accel.commands import Arm, CommandError, arm, run, shown
from promote.accel.ledger import LEDGER_ENV, Engagement, pooled, read_tally
from promote.accel.results import ArmStats, BenchResult, CaseResult, Overload, Run, opposite
from promote.config.settings import AccelerationConfig, BenchConfig, Config
from promote.core.bounded_json import JsonRejected, read_object
from promote.core.stats import MedianInterval, children_cpu, median_interval
from promote.core.vocab import BenchVerdict, LoadSource

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


def machine_cores() -> int:
    """The cores this process may run on (a CPU affinity mask or a container's cpuset narrows os.cpu_count())."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS and Windows have no affinity mask
        return os.cpu_count() or 1


def measure(a: Arm, timeout_s: float | None, metric: Metric | None = None) -> Run:
    """Run `a` once: wall time, its process tree's CPU time, the load before and after and the load it met."""
    load_before, cpu_before = _load(), children_cpu()
    with _Sampler() as sampler:
        started = time.perf_counter()
        _run(a, timeout_s, metric)
        wall = time.perf_counter() - started
    # Descendants count once reaped by their parent: the arm's whole process tree.
    cpu = children_cpu() - cpu_before
    figure = None if metric is None else metric.read(a)
    return Run(wall, cpu, load_before, _load(), sampler.mean, figure)


def _run(a: Arm, timeout_s: float | None, metric: Metric | None) -> None:
    if metric is None:
        run(a, timeout_s=timeout_s)
        return
    real = metric.arm(a)
    try:
        run(real, timeout_s=timeout_s)
    except CommandError as e:
        # The command as configured (`{out}`), not promote's temporary file.
        raise CommandError(str(e).replace(shown(real.argv), shown(a.argv))) from None


def plan(bench: BenchConfig, cases: int) -> str:
    """What the bench will run, said before it starts: cases multiply its time."""
    runs = cases * bench.rounds * 2
    warm = f" (+ {cases * 2 * bench.warmup} warm-ups)" if bench.warmup else ""
    return f"bench: {cases} case{'s' if cases > 1 else ''} x {bench.rounds} rounds x 2 arms = {runs} runs{warm}"


def schedule(cases: int, rounds: int) -> list[list[tuple[int, bool]]]:
    """Per round, (case, baseline first) for every case: the cases rotate and each case's arms alternate."""
    # Rotating the cases and alternating each one's arms cancel "whatever runs second benefits from the first".
    return [[((i + j) % cases, (i + (i + j) % cases) % 2 == 0) for j in range(cases)] for i in range(rounds)]


def interleave(
    base: Arm, cand: Arm, bench: BenchConfig, say: Say | None = None, *, cores: int | None = None,
    ledgers: Path | None = None,
) -> BenchResult:  # fmt: skip
    """Every case's two arms in each of `bench.rounds` rounds, after warm-ups; `cores` judges the load.

    With `ledgers`, each case's arm appends its ledger lines to a file of its own there (`ledger_file`).
    """
    named = [(None, ())] if bench.cases is None else [(c.name, c.args) for c in bench.cases]
    pairs = [
        (n, _case_arm(base, k, args, ledgers), _case_arm(cand, k, args, ledgers)) for k, (n, args) in enumerate(named)
    ]
    if say is not None:
        say(plan(bench, len(pairs)))
    with tempfile.TemporaryDirectory(prefix="promote-bench-") as tmp:
        metric = None if bench.metric is None else Metric(bench.metric, Path(tmp) / "out.json")
        for _, b, c in pairs:
            for _ in range(bench.warmup):
                for a in (b, c):
                    _run(a, bench.timeout_s, metric)
        runs: list[dict[str, list[Run]]] = [{BASELINE: [], CANDIDATE: []} for _ in pairs]
        orders: list[list[str]] = [[] for _ in pairs]
        for i, turn in enumerate(schedule(len(pairs), bench.rounds)):
            for k, base_first in turn:
                name, b, c = pairs[k]
                order = (b, c) if base_first else (c, b)
                orders[k].append(order[0].name)
                for a in order:
                    where = replace(metric, round=i + 1, case=name) if metric is not None else None
                    runs[k][a.name].append(measure(a, bench.timeout_s, where))
                if say is not None:
                    label = f" {name}" if name else ""
                    timed = ", ".join(f"{a.name} {_said(runs[k][a.name][-1], bench.metric)}" for a in order)
                    say(f"round {i + 1}/{bench.rounds}{label}: {timed}")
    found = machine_cores() if cores is None else cores
    names = [n for n, _, _ in pairs]
    cases = [summarize(n, r, tuple(o), bench, found) for n, r, o in zip(names, runs, orders, strict=True)]
    return combine(cases, bench)


def _said(r: Run, metric: str | None) -> str:
    return f"{r.wall_s:.3f}s" + ("" if r.metric is None else f" ({r.metric:g} {metric})")


def ledger_file(ledgers: Path, case: int, arm_name: str) -> Path:
    """The file one case's arm appends its ledger lines to, over every round (warm-ups included)."""
    # By the case's place, not its name: a name is the team's TOML key and may hold anything.
    return ledgers / f"case-{case}.{arm_name}.jsonl"


def _case_arm(a: Arm, case: int, args: tuple[str, ...], ledgers: Path | None) -> Arm:
    """The arm with the case's arguments appended and, with `ledgers`, a ledger file of the case's own."""
    # A file per case, not one per arm: a workload whose drafts are all rejected shows as its own figure.
    env = a.env if ledgers is None else {**a.env, LEDGER_ENV: str(ledger_file(ledgers, case, a.name))}
    return replace(a, argv=(*a.argv, *args), env=env)


def with_ledgers(timed: BenchResult, ledgers: Path, accel: str) -> BenchResult:
    """Each case's tally per arm from its own files, and the bench's: every case's lines of an arm together."""
    files = {a: [ledger_file(ledgers, k, a) for k in range(len(timed.cases))] for a in (BASELINE, CANDIDATE)}
    cases = tuple(
        replace(c, engagement=Engagement(read_tally(files[BASELINE][k], accel), read_tally(files[CANDIDATE][k], accel)))
        for k, c in enumerate(timed.cases)
    )
    return replace(
        timed, cases=cases, engagement=Engagement(pooled(files[BASELINE], accel), pooled(files[CANDIDATE], accel))
    )


@dataclass(frozen=True)
class Metric:
    """The command's own figure: where it writes it (`{out}`), and which run is asking (for its errors)."""

    key: str
    out: Path
    round: int = 0  # 0: a warm-up
    case: str | None = None

    def arm(self, a: Arm) -> Arm:
        self.out.unlink(missing_ok=True)
        return replace(a, argv=tuple(x.replace("{out}", str(self.out)) for x in a.argv))

    def read(self, a: Arm) -> float:
        """The figure, or a CommandError naming the arm, the round and the file's role (never its temp path)."""
        case = f" {self.case}" if self.case else ""
        what = f"`{shown(a.argv)}` ({a.name}{case}, round {self.round}): the metrics file it writes to {{out}}"
        try:
            data = read_object(self.out)
        except FileNotFoundError:
            raise CommandError(f"{what} was not written") from None
        except OSError as e:
            raise CommandError(f"{what} cannot be read ({e.strerror or type(e).__name__})") from None
        except JsonRejected as e:
            raise CommandError(f"{what} is not a JSON object: {e}") from None
        if self.key not in data:
            raise CommandError(f"{what} has no {self.key!r} key")
        value = data[self.key]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            raise CommandError(f"{what} has {self.key!r} = {json.dumps(value)[:40]}, not a finite positive number")
        return float(value)


def _ratio(b: Run, c: Run, bench: BenchConfig) -> float | None:
    """How many times better the candidate did this round: by the metric if there is one, else by wall time."""
    if b.metric is None or c.metric is None:
        return b.wall_s / c.wall_s if c.wall_s > 0 else None
    return c.metric / b.metric if bench.better == "higher" else b.metric / c.metric


def summarize(
    name: str | None, runs: dict[str, list[Run]], order: tuple[str, ...], bench: BenchConfig, cores: int
) -> CaseResult:
    """The median per-round ratio (each round's two runs met the same machine), its interval and verdict."""
    pairs = list(zip(runs[BASELINE], runs[CANDIDATE], strict=True))
    ratios = [r for b, c in pairs if (r := _ratio(b, c, bench)) is not None]
    interval = median_interval(ratios, CONFIDENCE)
    walls = [b.wall_s / c.wall_s for b, c in pairs if c.wall_s > 0]
    stats = {k: _stats(rs) for k, rs in runs.items()}
    wall = median_interval(walls, CONFIDENCE) if bench.metric and walls else None
    said = verdict(interval, bench.target)
    # A metric that says faster while wall time says slower (or the reverse) is read the wrong way round, or
    # measures something the run does not: neither figure decides.
    said = "undecided" if wall is not None and opposite(interval, wall) else said
    return CaseResult(
        name=name, speedup=statistics.median(ratios), interval=interval, verdict=said, order=order, arms=stats,
        wall_speedup=statistics.median(walls) if wall is not None else None, overload=overload(stats, cores),
        imbalance=imbalance(stats, bench.load_margin), wall_interval=wall,
    )  # fmt: skip


def verdict(interval: MedianInterval, target: float | None) -> BenchVerdict:
    """`slower` when the whole interval is below 1.0 (with or without a target), else against the target."""
    if interval.high < 1.0:
        return "slower"
    return "measured" if target is None else interval.verdict_at_least(target)


# The worst first: what a bench of several cases reports as its own verdict.
RANK: tuple[BenchVerdict, ...] = ("error", "slower", "undecided", "missed", "met", "measured")


def combine(cases: list[CaseResult], bench: BenchConfig) -> BenchResult:
    """The bench's result: the one unnamed case's figures at the top, or every named case and the worst verdict."""
    common = {"target": bench.target, "cases": tuple(cases), "metric": bench.metric, "better": bench.better}
    if bench.cases is not None:
        worst = min((c.verdict for c in cases), key=RANK.index)
        return BenchResult(rounds=bench.rounds, verdict=worst, **common)  # type: ignore[arg-type]
    [c] = cases
    return BenchResult(
        rounds=c.rounds, speedup=c.speedup, interval=c.interval, verdict=c.verdict, order=c.order, arms=c.arms,
        imbalance=c.imbalance, overload=c.overload, **common,  # type: ignore[arg-type]
    )  # fmt: skip


def _mean(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.fmean(known) if known and len(known) == len(values) else None


def _stats(rs: list[Run]) -> ArmStats:
    loads: list[float | None] = [x for r in rs for x in (r.load_before, r.load_after)]
    metrics = [r.metric for r in rs if r.metric is not None]
    return ArmStats(
        median_s=statistics.median(r.wall_s for r in rs),
        cpu_s=statistics.median(r.cpu_s for r in rs),
        load=_mean(loads),
        running=_mean([r.running for r in rs]),
        runs=tuple(rs),
        metric=statistics.median(metrics) if metrics else None,
    )


def _arm_loads(stats: dict[str, ArmStats]) -> tuple[LoadSource, float, float] | None:
    """Both arms' load: the runnable tasks sampled during each run, else the 1-minute load average."""
    b, c = stats[BASELINE], stats[CANDIDATE]
    # The runnable tasks sampled during each run answer at once; the 1-minute load average trails by a minute.
    if b.running is not None and c.running is not None:
        return "runnable", b.running, c.running
    if b.load is not None and c.load is not None:
        return "load-average", b.load, c.load
    return None


def overload(stats: dict[str, ArmStats], cores: int) -> Overload | None:
    """Both arms ran at a load above the machine's cores: the A/B timed the run queue as much as the path."""
    loads = _arm_loads(stats)
    if loads is None or min(loads[1:]) <= cores:
        return None
    return Overload(round(min(loads[1:]), 2), cores, loads[0])


def imbalance(stats: dict[str, ArmStats], margin: float) -> str | None:
    """A note when the arms ran under load further apart than `margin`: the machine was not the same for both."""
    loads = _arm_loads(stats)
    if loads is None:
        return None
    source, lb, lc = loads
    what, unit = ("tasks runnable meanwhile" if source == "runnable" else "1-minute load average"), ""
    if abs(lb - lc) <= margin:
        return None
    return (
        f"load imbalance: {what} {lb:.1f}{unit} in the baseline, {lc:.1f}{unit} in the candidate "
        f"(more than {margin:g} apart): the machine was not the same for both arms"
    )


def failed(bench: BenchConfig, error: CommandError | str, ref: str | None = None) -> BenchResult:
    return BenchResult(
        rounds=0, target=bench.target, verdict="error", error=str(error), baseline_ref=ref, metric=bench.metric,
        better=bench.better,
    )  # fmt: skip
