"""What `promote accel` found for one accelerated path: the switch both ways, parity, the A/B, the stations."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from promote.accel.ledger import Engagement
from promote.core.findings import Finding
from promote.core.stats import MedianInterval
from promote.core.vocab import BenchVerdict, Better, LoadSource, ParityVerdict, is_red, parity_holds

if TYPE_CHECKING:
    from promote.accel.quality import QualityReport
    from promote.accel.sweep import SweepResult
    from promote.runners.suite import RunResult


@dataclass(frozen=True)
class RequestParity:
    """One request's generations compared: where they first part (None: identical) and how far the drift goes."""

    request: str | int
    first_divergence: int | None
    differing: int  # positions from the first divergence on that differ (a position only one output has differs)
    length_off: int
    length_on: int

    @property
    def verdict(self) -> ParityVerdict:
        return "identical" if self.first_divergence is None else "differs"

    def to_json(self) -> dict[str, object]:
        return {
            "request": self.request, "verdict": self.verdict, "first_divergence": self.first_divergence,
            "differing": self.differing, "length_off": self.length_off, "length_on": self.length_on,
        }  # fmt: skip


@dataclass(frozen=True)
class ParityResult:
    """Two outputs compared: the verdict, how far apart, and where they first differ."""

    verdict: ParityVerdict
    total: int = 0
    mismatched: int = 0
    max_abs_diff: float = 0.0
    max_ulp: int = 0
    first_mismatch: str | None = None
    tokens: bool = False
    tokens_flipped: int | None = None
    error: str | None = None  # one line naming the command, when the verdict is error
    atol: float = 0.0
    rtol: float = 0.0
    engagement: Engagement | None = None  # what the path counted in each arm (None: the command did not finish)
    requests: tuple[RequestParity, ...] = ()  # token outputs: each request's generations compared
    unreadable: str | None = None  # the role of the output that could not be read as promised, when that was why

    @property
    def proven(self) -> bool:
        return parity_holds(self.verdict)

    def to_json(self) -> dict[str, object]:
        # Token ids are labels, not numbers: no distance or ULP between them means anything.
        spread = None if self.tokens else self.max_abs_diff, None if self.tokens else self.max_ulp
        return {
            "verdict": self.verdict, "max_abs_diff": spread[0], "max_ulp": spread[1],
            "mismatched": self.mismatched, "total": self.total, "first_mismatch": self.first_mismatch,
            "tokens": self.tokens, "tokens_flipped": self.tokens_flipped, "atol": self.atol, "rtol": self.rtol,
            "error": self.error, "ledger": None if self.engagement is None else self.engagement.to_json(),
            "requests": [r.to_json() for r in self.requests], "unreadable": self.unreadable,
        }  # fmt: skip


@dataclass(frozen=True)
class Run:
    """One timed run of one arm."""

    wall_s: float
    cpu_s: float
    load_before: float | None
    load_after: float | None
    running: float | None  # mean tasks runnable on the machine while it ran (Linux), None elsewhere
    metric: float | None = None  # the figure the command wrote to `{out}` (bench.metric), None without one


@dataclass(frozen=True)
class ArmStats:
    """One arm over every round: median wall and CPU time, and the load it ran under."""

    median_s: float
    cpu_s: float
    load: float | None  # mean 1-minute load average, before and after each run
    running: float | None
    runs: tuple[Run, ...]
    metric: float | None = None  # the median of the command's own figure, with bench.metric

    def to_json(self) -> dict[str, object]:
        return {
            "median_s": round(self.median_s, 6), "cpu_s": round(self.cpu_s, 6),
            "metric": None if self.metric is None else round(self.metric, 6),
            "load": None if self.load is None else round(self.load, 2),
            "running": None if self.running is None else round(self.running, 2),
            "rounds": [
                {"wall_s": round(r.wall_s, 6), "cpu_s": round(r.cpu_s, 6), "load_before": r.load_before,
                 "load_after": r.load_after, "running": None if r.running is None else round(r.running, 2),
                 "metric": r.metric}
                for r in self.runs
            ],
        }  # fmt: skip


@dataclass(frozen=True)
class Overload:
    """Both arms met more runnable tasks than the machine has cores: each run waited its turn in the queue."""

    load: float  # the lower of the two arms' mean load
    cores: int
    source: LoadSource

    def to_json(self) -> dict[str, object]:
        return {"load": self.load, "cores": self.cores, "source": self.source}


# How far wall time must point the other way to contradict a metric: wall time also counts import and model load,
# which the path does not change, so a few percent either way is the machine, not a contradiction.
WALL_MARGIN = 1.1


def opposite(metric: MedianInterval, wall: MedianInterval) -> bool:
    """The metric's interval wholly above 1.0 and wall time's below 1/WALL_MARGIN, or the reverse."""
    return (metric.low > 1.0 and wall.high < 1 / WALL_MARGIN) or (metric.high < 1.0 and wall.low > WALL_MARGIN)


def case_subject(name: str, case: str | None) -> str:
    """A finding's subject for a path's bench case: the path's name, with the case's when the bench has cases."""
    return name if case is None else f"{name}, case {case}"


@dataclass(frozen=True)
class CaseResult:
    """One workload's interleaved A/B: its speedup's median, interval and verdict, and both arms."""

    name: str | None  # None: the command as configured, without cases
    speedup: float
    interval: MedianInterval
    verdict: BenchVerdict
    order: tuple[str, ...]  # the arm that went first, per round
    arms: dict[str, ArmStats]
    wall_speedup: float | None = None  # by wall time, recorded beside a metric's speedup
    overload: Overload | None = None
    imbalance: str | None = None  # the arms ran under different load: the machine was not the same
    engagement: Engagement | None = None  # the case's own ledger lines: off = the baseline arm, on = the candidate
    wall_interval: MedianInterval | None = None  # wall time's own interval, beside a metric's

    @property
    def rounds(self) -> int:
        return len(self.order)

    @property
    def disagrees(self) -> bool:
        """The metric and wall time each decided, in opposite directions: neither figure can be taken."""
        return self.wall_interval is not None and opposite(self.interval, self.wall_interval)

    def _acceptance(self) -> dict[str, object] | None:
        """Per arm, the tokens its path drafted in this case and the share accepted (null: no line counted them)."""
        e = self.engagement
        if e is None:
            return None
        return {arm: None if t.acceptance is None else t.acceptance.to_json() for arm, t in (("baseline", e.off),
                ("candidate", e.on))}  # fmt: skip

    def to_json(self) -> dict[str, object]:
        iv = self.interval
        return {
            "name": self.name, "rounds": self.rounds, "speedup": round(self.speedup, 4),
            "interval": [round(iv.low, 4), round(iv.high, 4)], "coverage": round(iv.coverage, 4),
            "verdict": self.verdict, "order": list(self.order), "arms": {k: a.to_json() for k, a in self.arms.items()},
            "wall_speedup": None if self.wall_speedup is None else round(self.wall_speedup, 4),
            "wall_interval": None if (w := self.wall_interval) is None else [round(w.low, 4), round(w.high, 4)],
            "overloaded": None if self.overload is None else self.overload.to_json(), "load_imbalance": self.imbalance,
            "ledger": None if self.engagement is None else self.engagement.to_json(), "acceptance": self._acceptance(),
        }  # fmt: skip


@dataclass(frozen=True)
class BenchResult:
    """The interleaved A/B: per-round speedup's median, its interval, the verdict, the order and both arms.

    The top-level figures are the one case's when there are no named cases; with cases they are in `cases`
    and the verdict is the worst of theirs.
    """

    rounds: int
    speedup: float | None = None
    interval: MedianInterval | None = None
    target: float | None = None
    verdict: BenchVerdict = "error"
    order: tuple[str, ...] = ()  # the arm that went first, per round
    arms: dict[str, ArmStats] = field(default_factory=dict)
    imbalance: str | None = None  # the arms ran under different load: the machine was not the same
    baseline_ref: str | None = None
    error: str | None = None
    engagement: Engagement | None = None  # off = the baseline arm, on = the candidate arm
    cases: tuple[CaseResult, ...] = ()
    metric: str | None = None  # None: the speedup is wall time
    better: Better = "higher"
    overload: Overload | None = None

    @property
    def named_cases(self) -> tuple[CaseResult, ...]:
        """The workloads `bench.cases` named (none for a bench of the one command as configured)."""
        return tuple(c for c in self.cases if c.name is not None)

    def to_json(self) -> dict[str, object]:
        iv = self.interval
        return {
            "rounds": self.rounds,
            "speedup": None if self.speedup is None else round(self.speedup, 4),
            "interval": None if iv is None else [round(iv.low, 4), round(iv.high, 4)],
            "coverage": None if iv is None else round(iv.coverage, 4),
            "target": self.target,
            "verdict": self.verdict,
            "order": list(self.order),
            "arms": {k: a.to_json() for k, a in self.arms.items()},
            "load_imbalance": self.imbalance,
            "baseline_ref": self.baseline_ref,
            "error": self.error,
            "ledger": None if self.engagement is None else self.engagement.to_json(),
            "metric": self.metric,
            "better": self.better,
            "overloaded": None if self.overload is None else self.overload.to_json(),
            "cases": [c.to_json() for c in self.cases],
        }


@dataclass(frozen=True)
class SwitchRun:
    """The package's tests with the switch one way: counts from what ran, and each test's outcome."""

    value: str
    counts: dict[str, int]
    outcomes: dict[str, str]
    run_id: str

    def to_json(self) -> dict[str, object]:
        return {"value": self.value, **self.counts, "run": self.run_id}


@dataclass(frozen=True)
class SwitchResult:
    env: str
    off: SwitchRun
    on: SwitchRun
    engagement: Engagement | None = None
    runs: tuple[RunResult, ...] = field(default=(), compare=False, repr=False)  # off, on: stored for the history

    @property
    def holds(self) -> bool:
        return self.off.outcomes.keys() == self.on.outcomes.keys() and not broken(self)

    def to_json(self) -> dict[str, object]:
        ledger = None if self.engagement is None else self.engagement.to_json()
        return {"env": self.env, "off": self.off.to_json(), "on": self.on.to_json(), "ledger": ledger}


def broken(switch: SwitchResult) -> list[tuple[str, str]]:
    """(test, which way it fails) for every test that passes one way and fails the other."""
    out = []
    for test, off in switch.off.outcomes.items():
        on = switch.on.outcomes.get(test)
        if is_red(off) and on == "passed":
            out.append((test, "off"))
        elif is_red(on) and off == "passed":
            out.append((test, "on"))
    return out


@dataclass(frozen=True)
class StationBuild:
    """A station that ran the path, its OS build, and whether the path was validated on it."""

    name: str
    os_build: str | None
    validated: bool | None  # None: no builds listed, nothing to check

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "os": self.os_build, "validated": self.validated}


@dataclass(frozen=True)
class AccelResult:
    """Everything one accelerated path earned, and what it did not."""

    name: str
    env: str
    package: str | None
    switch: SwitchResult | None
    switch_error: str | None
    parity: ParityResult | None
    bench: BenchResult | None
    stations: tuple[StationBuild, ...]
    findings: tuple[Finding, ...]
    off: str = "0"  # the switch's values, for the page's wording
    on: str = "1"
    sweep: SweepResult | None = None
    quality: QualityReport | None = None

    @property
    def ledger_lines(self) -> int:
        """Every ledger line any step's arms got from this path: 0 means its engagement was not measured."""
        steps = [self.switch, self.parity, self.bench, self.quality]
        counted = sum(s.engagement.lines for s in steps if s is not None and s.engagement is not None)
        return counted + (0 if self.sweep is None else self.sweep.ledger_lines)

    def to_json(self) -> dict[str, object]:
        switch: dict[str, object] = {"env": self.env, "off": None, "on": None, "error": self.switch_error}
        if self.switch is not None:
            switch.update(self.switch.to_json())
        return {
            "name": self.name,
            "package": self.package,
            "switch": switch,
            "parity": None if self.parity is None else self.parity.to_json(),
            "bench": None if self.bench is None else self.bench.to_json(),
            "sweep": None if self.sweep is None else self.sweep.to_json(),
            "quality": None if self.quality is None else self.quality.to_json(),
            "ledger": {"lines": self.ledger_lines, "measured": self.ledger_lines > 0},
            "stations": [s.to_json() for s in self.stations],
            "findings": [f.to_json() for f in self.findings],
        }
