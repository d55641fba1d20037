"""Evidence counts only what the path served: the findings its own counter (the ledger) and the sweep support."""

from __future__ import annotations

from promote.accel.ledger import Tally
from promote.accel.results import BenchResult, ParityResult, SwitchResult, case_subject
from promote.accel.sweep import SweepClass, SweepResult
from promote.config.settings import AccelerationConfig
from promote.core.findings import Finding

# A failure this much faster than the path's own work did no work: it was a decision.
TOO_FAST = 0.25


def grouped(reasons: tuple[tuple[str, int], ...], limit: int = 2) -> str:
    """`RuntimeError: x (3); temperature 0.8 > 0 (1); 2 other reasons (4)`: the most frequent first, counted."""
    # One reason needs no count: the sentence around it gives the total.
    shown = "; ".join(f"{r} ({n})" if len(reasons) > 1 else r for r, n in reasons[:limit])
    more, rest = len(reasons) - limit, sum(n for _, n in reasons[limit:])
    return shown + (f"; {more} other reason{'s' if more > 1 else ''} ({rest})" if more > 0 else "")


def secs(v: float) -> str:
    """Seconds as a person reads them: `0.052 s`, or `0.021 ms` for what took no time at all."""
    return f"{v:.3f} s" if v >= 0.001 else f"{v * 1000:.3f} ms"


def share(name: str, t: Tally) -> str:
    """`DFlash2 served 0 of 3 requests (declined 3: RuntimeError ...)`: the tally of one arm in a sentence."""
    return f"{name} {served(t)}"


def served(t: Tally) -> str:
    """`served 0 of 3 requests (declined 3: RuntimeError ...)`: a finding about the path names it as its subject."""
    text = f"served {t.served} of {t.requests} request{'s' if t.requests != 1 else ''}"
    parts = []
    if t.declined:
        parts.append(f"declined {t.declined}: {grouped(t.declined_reasons)}")
    if t.failed:
        parts.append(f"failed {t.failed}: {grouped(t.failed_reasons)}")
    if t.unparseable:
        parts.append(f"{t.unparseable} unparseable ledger line{'s' if t.unparseable > 1 else ''}")
    return text + (f" ({'; '.join(parts)})" if parts else "")


def vacuous(
    accel: AccelerationConfig, switch: SwitchResult | None, parity: ParityResult | None, timed: BenchResult | None
) -> list[Finding]:
    """Parity, bench or the switch's tests that the path took no part in (judged only when a ledger was written)."""
    out = []
    name, env, on = accel.name, accel.switch.env, accel.switch.on
    if parity is not None and parity.engagement is not None and parity.engagement.on.served == 0:
        msg = f"{served(parity.engagement.on)} in the parity run with {env}={on}: identical outputs prove nothing"
        out.append(Finding("parity-vacuous", "error", name, msg, f"{env}={on}"))
    if timed is not None:
        out += _bench_vacuous(accel, timed)
    if switch is not None and switch.engagement is not None and switch.engagement.on.served == 0:
        msg = f"{served(switch.engagement.on)} while its tests ran with {env}={on}: they pass without it"
        out.append(Finding("switch-vacuous", "warning", name, msg, f"{env}={on}"))
    return out


def _bench_vacuous(accel: AccelerationConfig, timed: BenchResult) -> list[Finding]:
    """`bench-vacuous` per named case, from the case's own candidate ledger (pooled, a case served none unseen)."""
    env, on = accel.switch.env, accel.switch.on
    cases = [(c.name, c.engagement.on) for c in timed.named_cases if c.engagement is not None]
    if not cases and timed.engagement is not None:
        cases = [(None, timed.engagement.on)]
    out = []
    for case, tally in cases:
        if tally.served:
            continue
        where = "" if case is None else f" of case {case}"
        msg = f"{served(tally)} in the bench's candidate arm{where}: its speedup is not the path's"
        out.append(Finding("bench-vacuous", "error", case_subject(accel.name, case), msg, f"{env}={on}"))
    return out


def missing(accel: AccelerationConfig) -> Finding:
    msg = (
        "no run wrote a ledger line (PROMOTE_LEDGER was set for each): what it served is not measured, so its "
        f"switch, parity and bench results may not be the path's, and whether {accel.switch.env}={accel.switch.off} "
        "switches it off is not measured either"
    )
    return Finding("ledger-missing", "warning", accel.name, msg)


def _work_s(sweep: SweepResult) -> float | None:
    """The path's own median time for a request it did work on (served, else declined), switch on."""
    on = sweep.engagement.on if sweep.engagement is not None else None
    if on is None:
        return None
    return on.served_s if on.served_s is not None else on.declined_s


def _failed(name: str, c: SweepClass, work_s: float | None) -> Finding:
    t = c.seat
    assert t.failed_s is not None
    text = f"{name}: {t.failed} of {t.requests} at {c.label} failed in a median {secs(t.failed_s)}"
    if work_s is not None and t.failed_s < TOO_FAST * work_s:
        text += f" (a request it worked on took {secs(work_s)}): too fast to be work, a decision"
    reason = t.failed_reasons[0][0] if t.failed_reasons else None
    text += f"; {grouped(t.failed_reasons)}. An acceleration may decline a request, never fail one"
    return Finding("acceleration-failed-request", "error", c.label, text, reason)


def sweep_findings(accel: AccelerationConfig, sweep: SweepResult) -> list[Finding]:
    """Per request class: failed by the path, answered by someone else, or broken for the caller by the switch."""
    out = []
    name, env, sw = accel.name, accel.switch.env, accel.switch
    work_s = _work_s(sweep)
    for c in sweep.classes:
        if c.seat.failed:
            out.append(_failed(name, c, work_s))
        if c.elsewhere:
            msg = (
                f"{name}: {c.answered} answered at {c.label}, the seat served {c.seat.served} and declined "
                f"{c.seat.declined}: a fallback answered {c.elsewhere} under the name you asked for"
            )
            out.append(Finding("served-elsewhere", "error", c.label, msg, f"{env}={sw.on}"))
        if c.caller_failed and not c.caller_failed_off:
            msg = (
                f"{name}: {c.caller_failed} of {c.sent} requests at {c.label} failed for the caller with "
                f"{env}={sw.on} and none with {env}={sw.off} (first: {c.first_error or 'no error given'})"
            )
            out.append(Finding("acceleration-broken", "error", c.label, msg, f"{env}={sw.on}"))
    return out
