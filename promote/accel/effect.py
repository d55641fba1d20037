"""What the switch and the path did, by the path's own count: a switch leaving it serving, drafts kept by no one."""

from __future__ import annotations

from promote.accel.ledger import Acceptance, Tally
from promote.accel.quality import QualityReport
from promote.accel.results import BenchResult, ParityResult, SwitchResult, case_subject
from promote.accel.sweep import SweepResult
from promote.config.settings import AccelerationConfig
from promote.core.findings import Finding

# Below this share of drafted tokens accepted, a drafter only adds its own work: no faster by design.
IDLE_RATE = 0.05


def off_arms(
    accel: AccelerationConfig, switch: SwitchResult | None, parity: ParityResult | None, timed: BenchResult | None,
    sweep: SweepResult | None, quality: QualityReport | None = None,
) -> list[tuple[str, Tally]]:  # fmt: skip
    """Each run's switched-off arm that wrote a ledger, with what it was (a bench against a revision has none)."""
    out = []
    if switch is not None and switch.engagement is not None:
        out.append(("requests in its tests", switch.engagement.off))
    if parity is not None and parity.engagement is not None:
        out.append(("parity requests", parity.engagement.off))
    switched = accel.bench is not None and accel.bench.command is not None
    if timed is not None and timed.engagement is not None and switched and timed.baseline_ref is None:
        out.append(("requests in the bench's baseline arm", timed.engagement.off))
    if sweep is not None and sweep.engagement is not None:
        out.append(("sweep requests", sweep.engagement.off))
    if quality is not None and quality.engagement is not None:
        out.append(("quality items", quality.engagement.off))
    return out


def on_arms(
    switch: SwitchResult | None, parity: ParityResult | None, timed: BenchResult | None, sweep: SweepResult | None,
    quality: QualityReport | None = None,
) -> list[Tally]:  # fmt: skip
    """Each run's switched-on arm that wrote a ledger (a bench of named cases is judged per case: `idle_cases`)."""
    bench = None if timed is None or timed.named_cases else timed
    steps = (switch, parity, bench, sweep, quality)
    return [s.engagement.on for s in steps if s is not None and s.engagement is not None]


def ineffective(accel: AccelerationConfig, arms: list[tuple[str, Tally]]) -> list[Finding]:
    """`switch-ineffective`: with the switch off, the path's own ledger says it still served requests."""
    serving = [f"{t.served} of {t.requests} {what}" for what, t in arms if t.served]
    if not serving:
        return []
    env, off = accel.switch.env, accel.switch.off
    msg = f"{env}={off} still served {', '.join(serving)}: the kill switch does not switch the path off"
    return [Finding("switch-ineffective", "error", accel.name, msg, f"{env}={off}")]


def drafted(tallies: list[Tally]) -> tuple[int, int, Acceptance | None]:
    """Served and requests over the tallies, and their acceptance summed (None when no line counted tokens)."""
    counted = [t.acceptance for t in tallies if t.acceptance is not None]
    total = Acceptance(sum(a.drafted for a in counted), sum(a.accepted for a in counted)) if counted else None
    return sum(t.served for t in tallies), sum(t.requests for t in tallies), total


def idle(accel: AccelerationConfig, tallies: list[Tally], case: str | None = None) -> list[Finding]:
    """`acceleration-idle`: the path served, but kept (almost) none of the tokens it drafted (in the bench's `case`)."""
    served, requests, acc = drafted(tallies)
    if acc is None or served == 0 or (acc.rate is not None and acc.rate >= IDLE_RATE):
        return []
    env, on = accel.switch.env, accel.switch.on
    where = "" if case is None else f" in the bench's case {case}"
    msg = (
        f"served {served} of {requests} requests{where} with {env}={on}, but accepted {acc.accepted} of "
        f"{acc.drafted} drafted tokens ({rate_text(acc)}): no faster by design"
    )
    return [Finding("acceleration-idle", "warning", case_subject(accel.name, case), msg, f"{env}={on}")]


def idle_cases(accel: AccelerationConfig, timed: BenchResult | None) -> list[Finding]:
    """`acceleration-idle` per named bench case, from the case's own candidate ledger."""
    # Pooled, a workload whose drafts are all rejected hides behind one whose drafts are kept: each is its own.
    cases = () if timed is None else timed.named_cases
    return [f for c in cases if c.engagement is not None for f in idle(accel, [c.engagement.on], c.name)]


def rate_text(a: Acceptance) -> str:
    """`2.5%`, or `none drafted`."""
    return "none drafted" if a.rate is None else f"{a.rate:.1%}"


def acceptance_text(a: Acceptance | None) -> str | None:
    """`accepted 3 of 160 drafted tokens (1.9%)`, None when no line counted tokens."""
    return None if a is None else f"accepted {a.accepted} of {a.drafted} drafted tokens ({rate_text(a)})"
