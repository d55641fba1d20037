"""The four EETISMAD gates, each pass, fail or undecided with the evidence lines that decided it."""

from __future__ import annotations

from dataclasses import dataclass

from promote.core.outcome import FAIL, PASS, UNDECIDED, CheckOutcome
from promote.evidence.deltas import Deltas
from promote.release.check import CheckResult
from promote.runners.run import RunResult

TITLES = (
    ("tested", "Everything E2E Tested"),
    ("docs", "in Docs"),
    ("merged", "Merged"),
    ("deployed", "And Deployed"),
)


@dataclass(frozen=True)
class Gate:
    status: str
    evidence: tuple[str, ...]

    def to_json(self) -> dict[str, object]:
        return {"status": self.status, "evidence": list(self.evidence)}


def worst(statuses: list[str]) -> str:
    """Fail beats undecided beats pass."""
    if FAIL in statuses:
        return FAIL
    return UNDECIDED if UNDECIDED in statuses else PASS


def tested(run: RunResult | None, deltas: Deltas | None, ci: CheckOutcome | None) -> Gate:
    if run is None or not run.packages:
        return Gate(UNDECIDED, ("no test packages configured: nothing was observed running",))
    counts = [sum(p.counts.values()) + p.crashed for p in run.packages]
    lines = [f"{sum(counts)} tests across {len(counts)} packages ({' + '.join(map(str, counts))})"]
    statuses = []
    for p in run.packages:
        lines.append(
            f"{p.name} on {p.station}: {p.passed} passed, {p.failed} failed, {p.errors} errors, "
            f"{p.skipped} skipped, {p.blocked} blocked, {p.crashed} crashed"
        )
        statuses.append(PASS if p.green else FAIL)
        # A package that ran nothing (or ended unexplained) shows 0s above: say why here.
        lines += [f"{p.name}: {f.message}" for f in p.findings if f.check == "package-error" and f.subject == p.name]
    if any(f.check == "rerun-undecided" for f in run.findings):
        statuses.append(UNDECIDED)
        lines.append("the cause of some failures is undecided (rerun budget)")
    if deltas is not None:
        lines.append(deltas.headline)
        lines += [f"found and fixed: {d.nodeid}" for d in deltas.fixed]
        if deltas.filtered:
            statuses.append(FAIL)
            lines += [f"filtered, not fixed: {d.nodeid} ({d.before} -> {d.after})" for d in deltas.filtered]
    if ci is None:
        lines.append("CI: no GitHub Actions workflows, so no CI job was audited")
    else:
        statuses.append(ci.status)
        lines += [f"CI: {line}" for line in (ci.reason, *ci.evidence) if line]
    return Gate(worst(statuses), tuple(lines))


def from_check(outcome: CheckOutcome | None, missing: str) -> Gate:
    """A gate that one check decides on its own (docs, deployed)."""
    if outcome is None:
        return Gate(UNDECIDED, (missing,))
    return Gate(outcome.status, tuple(line for line in (outcome.reason, *outcome.evidence) if line))


def merged(check: CheckResult, last_merge: str | None) -> Gate:
    mirrors = check.mirrors
    sha = check.candidate[:7]
    lines = []
    if last_merge:
        lines.append(last_merge)
    agree = [m.name for m in mirrors if m.status == "up-to-date"]
    if mirrors and len(agree) == len(mirrors):
        lines.append(f"all {len(mirrors)} mirrors agree: {check.trunk} is {sha} on {', '.join(agree)}")
        return Gate(PASS, tuple(lines))
    for m in mirrors:
        if m.status == "fast-forward":
            lines.append(
                f"{m.name} lacks {m.behind} commit(s) of {sha}: not merged there yet "
                "(a fast-forward, nothing to discard: `promote merge` is safe)"
            )
        elif m.status == "diverged":
            lines.append(f"{m.name} has {m.discard} commit(s) the candidate lacks: diverged")
        elif m.status in ("missing", "unreachable"):
            lines.append(f"{m.name} is {m.status}: {m.reason}")
    if not mirrors:
        return Gate(UNDECIDED, ("no mirrors configured",))
    statuses = [
        FAIL if m.status in ("fast-forward", "diverged", "missing") else UNDECIDED
        for m in mirrors
        if m.status != "up-to-date"
    ]
    return Gate(worst(statuses), tuple(lines))
