"""The quality yardstick in the team's words: its row, its findings, and what it lets a parity that differs say."""

from __future__ import annotations

from collections.abc import Callable

from promote.accel.engaged import served
from promote.accel.quality import SATURATED_AT, SHOWN_UNPAIRED, QualityReport
from promote.accel.results import ParityResult, RequestParity
from promote.config.settings import AccelerationConfig
from promote.core.findings import Finding
from promote.core.vocab import QualityVerdict, quality_judged

SHOWN_REQUESTS = 8  # first divergences listed in a sentence; the table has them all


def points(fraction: float, *, sign: bool = True) -> str:
    """A fraction of items in percentage points: `+1.2`, `-1.4` (`2` for a margin)."""
    return f"{fraction * 100:+.1f}" if sign else f"{fraction * 100:g}"


def figures(q: QualityReport) -> str:
    """`152 vs 150 of 164, 2 / 0 discordant, difference +1.2 points [-1.4, +4.2], margin 2 points`."""
    t = q.pairs
    text = f"{t.on} vs {t.off} of {t.n}, {t.on_only} / {t.off_only} discordant"
    if q.difference is not None:
        estimate, low, high = q.difference
        text += f", difference {points(estimate)} points [{points(low)}, {points(high)}]"
    return text + f", margin {points(q.margin, sign=False)} points"


def _detail(q: QualityReport) -> str:
    """The exact per-arm intervals, McNemar's p and the confidence, for the row (the finding keeps to the figures)."""
    parts = []
    if q.on_interval is not None and q.off_interval is not None:
        on, off = q.on_interval, q.off_interval
        parts.append(f"on {on[0]:.1%}-{on[1]:.1%}, off {off[0]:.1%}-{off[1]:.1%} (exact)")
    if q.p_value is not None:
        parts.append(f"McNemar p = {q.p_value:.3g}")
    parts.append(f"{q.confidence:.0%} Newcombe interval")
    return "; ".join(parts)


def _coverage(q: QualityReport) -> str:
    e = q.engagement
    if e is None or e.lines == 0:
        return ""
    on = e.on
    if on.requests == q.items:
        return f"; covers {on.served} of {q.items} items"
    return f"; the path served {on.served} of {on.requests} requests"


def quality_text(q: QualityReport, word: Callable[[QualityVerdict], str] = str) -> str:
    """The row: the verdict (as `word` writes it), the figures, what could not be paired or read, what was served."""
    if q.verdict == "error" and not q.items:
        return f"not decided: {q.error}"
    if q.verdict == "error":
        lead = f"not decided: {q.error}"
    elif q.verdict == "timed-out":
        lead = f"{word(q.verdict)}, not judged (what was written before the limit)"
    else:
        lead = word(q.verdict)
    text = f"{lead}: {figures(q)}; {_detail(q)}"
    if q.unpaired:
        names = ", ".join(q.unpaired[:SHOWN_UNPAIRED]) + (", ..." if len(q.unpaired) > SHOWN_UNPAIRED else "")
        text += f"; {len(q.unpaired)} unpaired ({names}), each counted as failed by the arm that did not write it"
    if q.unparseable:
        text += f"; {q.unparseable} unparseable line{'s' if q.unparseable > 1 else ''}"
    if q.saturated:
        text += f"; saturated (the stronger arm solves {max(q.pairs.on, q.pairs.off) / q.items:.1%})"
    return text + _coverage(q)


def undecided_line(q: QualityReport) -> str | None:
    """Why the yardstick decided nothing: its error or time limit, or the interval across the margin."""
    if q.verdict in ("error", "timed-out"):
        return q.error or "not judged"
    if q.verdict != "inconclusive":
        return None
    more = f"; about {q.to_decide:,} items at this rate of disagreement would decide it" if q.to_decide else ""
    return f"inconclusive: {figures(q)}: the interval spans -{points(q.margin, sign=False)} points{more}"


def quality_findings(accel: AccelerationConfig, q: QualityReport) -> list[Finding]:
    """`quality-vacuous`, `quality-inferior`, `quality-inconclusive`, `quality-saturated`."""
    out = []
    env, on = accel.switch.env, accel.switch.on
    if q.vacuous and q.engagement is not None:
        msg = f"{served(q.engagement.on)} in the quality run with {env}={on}: its verdict is not the path's"
        out.append(Finding("quality-vacuous", "error", accel.name, msg, f"{env}={on}"))
    if q.verdict == "inferior":
        msg = f"quality inferior with {env}={on}: {figures(q)}: the whole interval is below the margin"
        out.append(Finding("quality-inferior", "error", accel.name, msg, f"{env}={on}"))
    line = undecided_line(q)
    if q.verdict == "inconclusive" and line is not None:
        out.append(Finding("quality-inconclusive", "warning", accel.name, line))
    if q.saturated and quality_judged(q.verdict):
        msg = (
            f"the yardstick is saturated: the stronger arm solves {max(q.pairs.on, q.pairs.off)} of {q.items} "
            f"(at least {SATURATED_AT:.0%}); differences near the ceiling cannot be seen, the gap is a floor"
        )
        out.append(Finding("quality-saturated", "warning", accel.name, msg))
    return out


def differs_text(accel: AccelerationConfig, p: ParityResult, q: QualityReport | None) -> str:
    """`parity-differs`: where the outputs part, and what the yardstick says about it (or that nothing does)."""
    env, sw = accel.switch.env, accel.switch
    if p.requests:
        first = next(r for r in p.requests if r.first_divergence is not None)
        text = f"output differs from token {first.first_divergence} of request {first.request}: {drift(p.requests)}"
    else:
        where = f", first at {p.first_mismatch}" if p.first_mismatch else ""
        text = (
            f"outputs differ with {env}={sw.on} and ={sw.off}: {p.mismatched:,} of {p.total:,} values, "
            f"max abs diff {p.max_abs_diff:g}, max {p.max_ulp} ULP{where}"
        )
    if q is None:
        return f"{text}; no quality yardstick is configured to judge the difference"
    if q.holds:
        return f"{text}; quality non-inferior: {figures(q)}"
    if q.verdict == "non-inferior":
        return f"{text}; quality non-inferior, but on items the path did not serve"
    return f"{text}; quality {q.verdict}" + (f": {figures(q)}" if quality_judged(q.verdict) else "")


def drift(requests: tuple[RequestParity, ...]) -> str:
    """`3 of 12 requests differ, first at tokens 29, 35, 40`."""
    parted = [r for r in requests if r.first_divergence is not None]
    firsts = ", ".join(str(r.first_divergence) for r in parted[:SHOWN_REQUESTS])
    more = ", ..." if len(parted) > SHOWN_REQUESTS else ""
    noun = "request differs" if len(requests) == 1 else "requests differ"
    return f"{len(parted)} of {len(requests)} {noun}, first at token{'s' if len(parted) > 1 else ''} {firsts}{more}"
