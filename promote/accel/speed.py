"""The bench judged as a serving team judges it: slower than off, short of its target, or timed on a full queue."""

from __future__ import annotations

from promote.accel.results import BenchResult, CaseResult, case_subject
from promote.config.settings import AccelerationConfig
from promote.core.findings import Finding


def figure(c: CaseResult, metric: str | None) -> str:
    by = f" by {metric}" if metric else ""
    return f"{c.speedup:.2f}x ({c.interval.low:.2f}-{c.interval.high:.2f}){by}"


def disagreement(timed: BenchResult) -> str | None:
    """Why a bench whose metric and wall time point opposite ways is undecided, with both figures."""
    parts = []
    for c in timed.cases:
        if c.disagrees and c.wall_interval is not None:
            w = c.wall_interval
            case = f"case {c.name}: " if c.name else ""
            parts.append(
                f"{case}{figure(c, timed.metric)} ({timed.better} is better) but wall time "
                f"{c.wall_speedup or 0:.2f}x ({w.low:.2f}-{w.high:.2f}): they disagree in direction"
            )
    return "; ".join(parts) or None


def speed_findings(accel: AccelerationConfig, timed: BenchResult | None) -> tuple[Finding, ...]:
    """Per case: `acceleration-slower` (its whole interval below 1.0), `speed-target-missed`, `bench-overloaded`."""
    if timed is None:
        return ()
    out = []
    for c in timed.cases:
        subject = case_subject(accel.name, c.name)
        if c.verdict == "slower":
            msg = (
                f"speedup {figure(c, timed.metric)}: its whole interval is below 1.0x, "
                "the accelerated path is slower than the baseline"
            )
            out.append(Finding("acceleration-slower", "error", subject, msg))
        elif c.verdict == "missed":
            msg = f"speedup {figure(c, timed.metric)} is below the target {timed.target:g}x"
            out.append(Finding("speed-target-missed", "warning", subject, msg))
        if c.overload is not None:
            o = c.overload
            msg = f"load {o.load:.1f} on {o.cores} cores in both arms: the A/B measures the queue"
            out.append(Finding("bench-overloaded", "warning", subject, msg))
    return tuple(out)
