"""`promote check`: a read-only verdict on promoting a candidate to trunk on every mirror."""

from __future__ import annotations

from dataclasses import dataclass

from promote.config.workspace import Workspace, resolve_candidate
from promote.core.findings import Finding
from promote.core.vocab import (
    BLOCKED as BLOCKED,
)
from promote.core.vocab import (
    PROMOTABLE as PROMOTABLE,
)
from promote.core.vocab import (
    UNDECIDED as UNDECIDED,
)
from promote.core.vocab import (
    CheckVerdict,
    assert_never,
)
from promote.release import drift as drift_mod
from promote.release import mirrors as mirrors_mod
from promote.release.drift import Drift, DriftUndecided
from promote.release.mirrors import MirrorStatus


@dataclass(frozen=True)
class CheckResult:
    """Everything `promote check` found, in the shape scripts read."""

    verdict: CheckVerdict
    candidate: str
    candidate_ref: str
    trunk: str
    mirrors: tuple[MirrorStatus, ...]
    drift: Drift | DriftUndecided | None
    findings: tuple[Finding, ...]

    def to_json(self) -> dict[str, object]:
        return {
            "verdict": self.verdict,
            "candidate": self.candidate,
            "candidate_ref": self.candidate_ref,
            "trunk": self.trunk,
            "mirrors": [m.to_json() for m in self.mirrors],
            "drift": self.drift.to_json() if self.drift else None,
            "findings": [f.to_json() for f in self.findings],
        }


def mirror_findings(statuses: tuple[MirrorStatus, ...], trunk: str) -> list[Finding]:
    found = []
    for m in statuses:
        match m.status:
            case "diverged":
                listed = "; ".join(f"{c.short} {c.subject} ({c.author})" for c in m.discard_commits)
                message = (
                    f"{m.name}/{trunk} has {m.discard} commit(s) the candidate lacks; a push would discard: {listed}"
                )
                found.append(Finding("mirror-diverged", "error", m.name, message))
            case "missing":
                found.append(Finding("mirror-missing", "error", m.name, f"{m.name} has no branch {trunk}"))
            case "unreachable":
                found.append(Finding("mirror-unreachable", "warning", m.name, f"{m.name} ({m.url}): {m.reason}"))
            case "up-to-date" | "fast-forward":
                pass  # safe: nothing to find
            case _:
                assert_never(m.status)
    return found


def drift_findings(d: Drift | DriftUndecided | None, trunk: str) -> list[Finding]:
    if d is None or isinstance(d, DriftUndecided):
        return []
    if d.trunk_behind:
        listed = f"{d.trunk_behind} commit(s) on {d.ref} ({d.sha[:7]}) are not in the candidate"
        return [
            Finding(
                "trunk-behind-deployed",
                "error",
                d.ref,
                f"{trunk} is behind what production serves: {listed}; promoting would drop them",
            )
        ]
    if d.status == "undeployed":
        # Only the non-test files: the test files among the changes are not what makes them undeployed.
        files = ", ".join(d.non_test_files[:10]) + (" ..." if len(d.non_test_files) > 10 else "")
        return [
            Finding(
                "undeployed-change",
                "warning",
                d.ref,
                f"{d.undeployed} commit(s) not deployed on {d.ref}; they change non-test files: {files}",
            )
        ]
    return []


def verdict_of(
    statuses: tuple[MirrorStatus, ...], findings: list[Finding], drift: Drift | DriftUndecided | None = None
) -> CheckVerdict:
    # Blocked wins over undecided: one diverged mirror blocks whatever the unreachable ones hold.
    if any(f.severity == "error" for f in findings):
        return BLOCKED
    # No mirror configured (`mirrors = []`): nothing was verified, so nothing can be called promotable.
    if not statuses or any(m.status == mirrors_mod.UNREACHABLE for m in statuses):
        return UNDECIDED
    if isinstance(drift, DriftUndecided):
        return UNDECIDED
    return PROMOTABLE


def check(ws: Workspace, candidate: str | None = None) -> CheckResult:
    """Read every mirror and the deployed ref; change no ref anywhere."""
    cfg = ws.config
    resolved: list[tuple[str, str]] = []

    def resolve() -> str:
        resolved.append(resolve_candidate(ws, candidate))
        return resolved[0][0]

    sha, statuses = mirrors_mod.survey(
        ws.repo,
        ws.mirror_urls(),
        cfg.trunk,
        resolve,
        timeout=cfg.mirror_timeout_s,
        concurrency=cfg.fetch_concurrency,
        targets=ws.targets,
    )
    label = resolved[0][1]
    d = drift_mod.measure(ws.repo, cfg, sha)
    findings = mirror_findings(statuses, cfg.trunk) + drift_findings(d, cfg.trunk)
    return CheckResult(
        verdict=verdict_of(statuses, findings, d),
        candidate=sha,
        candidate_ref=label,
        trunk=cfg.trunk,
        mirrors=statuses,
        drift=d,
        findings=tuple(findings),
    )
