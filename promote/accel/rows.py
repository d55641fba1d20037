"""Each path's evidence as Measurement | Result rows, in the team's voice (the page and the terminal show them)."""

from __future__ import annotations

from promote.accel.model import AccelResult, BenchResult, ParityResult, SwitchRun


def rows(r: AccelResult) -> list[tuple[str, str]]:
    switch_off, switch_on = r.off, r.on
    out = []
    if r.switch is not None:
        off, on = r.switch.off, r.switch.on
        out.append((f"Kill switch `{r.env}={switch_off}`", f"{_tests(off)} off, {_tests(on)} on ({r.env}={switch_on})"))
    elif r.switch_error:
        out.append((f"Kill switch `{r.env}={switch_off}`", f"not run: {r.switch_error}"))
    if r.parity is not None:
        out.append(("Numeric parity", parity_text(r.parity)))
    if r.bench is not None:
        out.append(("Speedup, interleaved A/B", bench_text(r.bench)))
        if r.bench.imbalance:
            out.append(("Load", r.bench.imbalance))
    for s in r.stations:
        if s.validated is not None:
            verdict = "" if s.validated else ": not among the builds it was validated on"
            build = f"{s.os_build or 'unknown OS build'} ({s.name}){verdict}"
            out.append(("Validated on" if s.validated else "Ran on", build))
    return out


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
        return f"{p.tokens_flipped:,} of {p.total:,} tokens flipped{where}"
    spread = f"max abs diff {p.max_abs_diff:.3g}, max {p.max_ulp:,} ULP; {p.mismatched:,} of {p.total:,} {what} differ"
    if p.verdict == "within-tolerance":
        return f"within tolerance (atol {p.atol:g}, rtol {p.rtol:g}): {spread}{where}"
    return f"differs beyond tolerance (atol {p.atol:g}, rtol {p.rtol:g}): {spread}{where}"


def bench_text(b: BenchResult) -> str:
    if b.verdict == "error" or b.speedup is None or b.interval is None:
        return f"not measured: {b.error}"
    loads = [a.load for a in (b.arms.get("baseline"), b.arms.get("candidate")) if a is not None]
    load = f"; load {loads[0]:.1f} vs {loads[1]:.1f}" if len(loads) == 2 and None not in loads else ""
    ref = f" against {b.baseline_ref}" if b.baseline_ref else ""
    text = f"{b.speedup:.2f}x ({b.interval.low:.2f}-{b.interval.high:.2f}, {b.rounds} rounds{load}){ref}"
    if b.target is not None:
        text += f"; target {b.target:g}x: {b.verdict}"
    return text
