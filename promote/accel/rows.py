"""Each path's evidence as Measurement | Result rows, in the team's voice (the page and the terminal show them)."""

from __future__ import annotations

from promote.accel.effect import acceptance_text, rate_text
from promote.accel.engaged import grouped, secs, share
from promote.accel.ledger import Engagement, Tally
from promote.accel.results import AccelResult, BenchResult, CaseResult, ParityResult, SwitchRun
from promote.accel.sweep import SweepResult
from promote.accel.yardstick import drift, quality_text

NOT_MEASURED = "engagement not measured (no ledger)"


def rows(r: AccelResult) -> list[tuple[str, str]]:
    switch_off, switch_on = r.off, r.on
    measured = r.ledger_lines > 0
    out = []
    if r.switch is not None:
        off, on = r.switch.off, r.switch.on
        out.append((f"Kill switch `{r.env}={switch_off}`", f"{_tests(off)} off, {_tests(on)} on ({r.env}={switch_on})"))
        if measured and r.switch.engagement is not None:
            served = r.switch.engagement.on
            out.append((f"Served in its tests with `{r.env}={switch_on}`", share(r.name, served) + _accepted(served)))
    elif r.switch_error:
        out.append((f"Kill switch `{r.env}={switch_off}`", f"not run: {r.switch_error}"))
    if r.parity is not None:
        out.append(("Numeric parity", parity_text(r.parity) + _covers(r.parity.engagement, measured, "parity")))
    if r.bench is not None:
        out.append(("Speedup, interleaved A/B", _bench_served(r.name, r.bench, measured)))
        if r.bench.imbalance:
            out.append(("Load", r.bench.imbalance))
    if r.sweep is not None:
        out.append(("Sweep, requests through the front door", sweep_text(r.sweep, measured)))
    if r.quality is not None:
        out.append((quality_label(r), quality_text(r.quality)))
    if not measured and (r.switch or r.parity or r.bench or r.sweep or r.quality):
        out.append(("What the path served", NOT_MEASURED))
    for s in r.stations:
        if s.validated is not None:
            verdict = "" if s.validated else ": not among the builds it was validated on"
            build = f"{s.os_build or 'unknown OS build'} ({s.name}){verdict}"
            out.append(("Validated on" if s.validated else "Ran on", build))
    return out


def quality_label(r: AccelResult) -> str:
    return f"Quality, paired (`{r.env}={r.on}` vs `={r.off}`)"


def _covers(e: Engagement | None, measured: bool, what: str) -> str:
    if e is None:
        return ""
    if not measured:
        return f"; {NOT_MEASURED}"
    on, off = e.on, e.off
    # The off arm too: a path that still serves with its switch off is not switched off.
    off_text = f"switched off it served {off.served} of {off.requests}"
    if on.served == 0:
        return f"; vacuous: the path served 0 of {on.requests} requests ({off_text})"
    notes = [off_text, *([_unreadable(on)] if on.unparseable else [])]
    notes += [t for t in (acceptance_text(on.acceptance),) if t]
    return f"; {what} covers {on.served} of {on.requests} requests ({'; '.join(notes)})"


def _accepted(t: Tally, sep: str = "; ") -> str:
    text = acceptance_text(t.acceptance)
    return "" if text is None else f"{sep}{text}"


def _unreadable(t: Tally) -> str:
    return f"{t.unparseable} unparseable ledger line{'s' if t.unparseable > 1 else ''}"


def _bench_served(name: str, b: BenchResult, measured: bool) -> str:
    text = bench_text(b)
    if b.engagement is None:
        return text
    if not measured:
        return f"{text}; {NOT_MEASURED}"
    on = b.engagement.on
    if on.served == 0:
        return f"not a measurement of {name}: it served 0 of {on.requests} requests in the candidate arm (timed {text})"
    every = " over every case" if b.named_cases else ""
    return f"{text}; the candidate arm's path served {on.served} of {on.requests} requests{every}{_accepted(on, ', ')}"


def _tests(run: SwitchRun) -> str:
    c = run.counts
    bad = c.get("failed", 0) + c.get("errors", 0) + c.get("crashed", 0)
    text = f"{c.get('passed', 0)} tests pass"
    return text + (f", {bad} fail" if bad else "")


def parity_text(p: ParityResult) -> str:
    what = "tokens" if p.tokens else "values"
    if p.verdict == "error":
        return f"not decided: {p.error}"
    if p.verdict == "identical":
        return f"bitwise identical over {p.total:,} {what}"
    where = f", first at {p.first_mismatch}" if p.first_mismatch else ""
    if p.tokens:
        return f"{drift(p.requests)}; {p.mismatched:,} of {p.total:,} token positions differ from there on"
    spread = f"max abs diff {p.max_abs_diff:.3g}, max {p.max_ulp:,} ULP; {p.mismatched:,} of {p.total:,} {what} differ"
    if p.verdict == "within-tolerance":
        return f"within tolerance (atol {p.atol:g}, rtol {p.rtol:g}): {spread}{where}"
    return f"differs beyond tolerance (atol {p.atol:g}, rtol {p.rtol:g}): {spread}{where}"


def bench_text(b: BenchResult) -> str:
    if b.verdict == "error" or not b.cases:
        return f"not measured: {b.error}"
    ref = f" against {b.baseline_ref}" if b.baseline_ref else ""
    if b.speedup is None or b.interval is None:
        # Named cases: each has its row in the cases table; this row says how many and the worst verdict.
        text = f"{len(b.cases)} cases x {b.rounds} rounds, interleaved{ref}: {b.verdict} (one row per case)"
        return text + (f"; target {b.target:g}x" if b.target is not None else "")
    [c] = b.cases
    text = f"{_figure(c, b.metric)} ({c.interval.low:.2f}-{c.interval.high:.2f}, {c.rounds} rounds{_load(c)}){ref}"
    if c.wall_speedup is not None:
        text += f"; wall time {c.wall_speedup:.2f}x"
    if c.disagrees and c.wall_interval is not None:
        text += f" ({c.wall_interval.low:.2f}-{c.wall_interval.high:.2f}): {b.metric} and wall time disagree"
    if b.target is not None or c.verdict == "slower":
        text += f"; target {b.target:g}x: {c.verdict}" if b.target is not None else f": {c.verdict}"
    return text


def _figure(c: CaseResult, metric: str | None) -> str:
    return f"{c.speedup:.2f}x" + (f" by {metric}" if metric else "")


def _load(c: CaseResult) -> str:
    """The load both arms met, and the label an interval timed on an overloaded machine carries."""
    loads = [a.load for a in (c.arms.get("baseline"), c.arms.get("candidate")) if a is not None]
    text = f"; load {loads[0]:.1f} vs {loads[1]:.1f}" if len(loads) == 2 and None not in loads else ""
    if c.overload is not None:
        text += f"; overloaded: load {c.overload.load:.1f} on {c.overload.cores} cores"
    return text


BENCH_HEADER = (
    "Case", "Speedup", "Interval", "Rounds", "Verdict", "Wall time", "Accepted, baseline", "Accepted, candidate",
    "Load",
)  # fmt: skip


def bench_table(b: BenchResult | None) -> list[list[str]]:
    """One row per named case (nothing for the single unnamed one, whose figures are the bench's own row)."""
    if b is None or b.speedup is not None or not b.cases:
        return []
    out = []
    for c in b.cases:
        load = "-" if c.overload is None else f"overloaded: load {c.overload.load:.1f} on {c.overload.cores} cores"
        wall = "-" if c.wall_speedup is None else f"{c.wall_speedup:.2f}x"
        accepted = (
            ["-", "-"] if c.engagement is None else [_arm_accepted(c.engagement.off), _arm_accepted(c.engagement.on)]
        )
        out.append([str(c.name), _figure(c, b.metric), f"{c.interval.low:.2f}-{c.interval.high:.2f}", str(c.rounds),
                    c.verdict, wall, *accepted, load])  # fmt: skip
    return out


def _arm_accepted(t: Tally) -> str:
    """One case's arm: its accepted drafts, `-` when no line counted tokens, not measured when it wrote no line."""
    return NOT_COUNTED if t.lines == 0 else _accepted_cell(t)


def sweep_text(s: SweepResult, measured: bool) -> str:
    if s.error is not None:
        return f"not run: {s.error}"
    sent = sum(c.sent for c in s.classes)
    answered = sum(c.answered for c in s.classes)
    text = f"{answered} of {sent} answered with the path on ({s.sent_off} sent off), {len(s.classes)} classes"
    if s.group_by:
        text += f" by {', '.join(s.group_by)}"
    if s.caller_unparseable:
        text += f"; {s.caller_unparseable} unparseable caller line{'s' if s.caller_unparseable > 1 else ''}"
    if s.engagement is not None and s.engagement.on.unparseable:
        text += f"; {_unreadable(s.engagement.on)}"
    return text if measured else f"{text}; {NOT_MEASURED}"


REQUESTS_HEADER = ("Request", "First divergence", "Differing from there", "Length off", "Length on")


def requests_table(p: ParityResult | None) -> list[list[str]]:
    """One row per request whose generations part (none when every request is identical, or for arrays)."""
    if p is None:
        return []
    return [
        [str(r.request), str(r.first_divergence), str(r.differing), str(r.length_off), str(r.length_on)]
        for r in p.requests
        if r.first_divergence is not None
    ]


SWEEP_HEADER = (
    "Request class", "Sent", "Served", "Declined", "Failed", "Answered elsewhere", "Accepted", "Median s, off",
    "Median s, on",
)  # fmt: skip
NOT_COUNTED = "not measured"  # a cell the path's ledger would fill, when it wrote none


def _median(label: str, v: float | None) -> str | None:
    return None if v is None else f"{label} {secs(v)}"


def _accepted_cell(t: Tally) -> str:
    a = t.acceptance
    return "-" if a is None else f"{a.accepted} of {a.drafted} ({rate_text(a)})"


def sweep_table(s: SweepResult | None) -> list[list[str]]:
    """The sweep's classes by outcome with the switch on (what the seat counted; elsewhere from the caller's view)."""
    if s is None or s.error is not None:
        return []
    measured = s.ledger_lines > 0
    out = []
    for c in s.classes:
        t = c.seat
        medians = [
            _median("served", t.served_s), _median("declined", t.declined_s), _median("failed", t.failed_s),
            _median("answered", c.answered_s),
        ]  # fmt: skip
        off = _median("answered", c.answered_off_s) or "-"
        if measured:
            declined = f"{t.declined} ({grouped(t.declined_reasons, 1)})" if t.declined else "0"
            failed = f"{t.failed} ({grouped(t.failed_reasons, 1)})" if t.failed else "0"
            counts = [str(t.served), declined, failed, str(c.elsewhere), _accepted_cell(t)]
        else:
            counts = [NOT_COUNTED] * 5
        out.append([c.label, str(c.sent), *counts, off, ", ".join(m for m in medians if m) or "-"])
    return out
