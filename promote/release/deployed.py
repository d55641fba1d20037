"""Deployed gate: production serves trunk's commit, or one that differs from it only in test files."""

from __future__ import annotations

from dataclasses import dataclass

from promote.config import Config
from promote.core.errors import PromoteError
from promote.core.git import Commit, Repo
from promote.core.outcome import FAIL, PASS, UNDECIDED, CheckOutcome
from promote.core.vocab import assert_never
from promote.release import drift as drift_mod
from promote.release.check import drift_findings
from promote.release.drift import COMMITS_LISTED, Drift, DriftUndecided

NAME = "deployed"
FILES_LISTED = 10


@dataclass(frozen=True)
class DeployedOutcome(CheckOutcome):
    """The deployed check's outcome; `tracked`: the configured branch, when only its remote-tracking ref was read."""

    tracked: str | None = None


def audit_deployed(
    repo: Repo, config: Config, candidate_sha: str, *, drift: Drift | DriftUndecided | None = None
) -> CheckOutcome:
    """Compare the deployed commit with `candidate_sha` (trunk): same, test-only, undeployed, or trunk behind.

    `drift` is what `promote check` already measured for `candidate_sha`; without it the drift is measured here.
    """
    if config.deployed is None and config.deployed_command is None:
        why = f"no deployed ref configured ({config.prefix}.deployed or {config.prefix}.deployed_command)"
        return CheckOutcome(NAME, UNDECIDED, why)
    if isinstance(drift, Drift) and drift.candidate != candidate_sha:
        # The evidence names drift.candidate as trunk; a drift of another commit would judge the wrong one.
        raise ValueError(f"drift was measured for {drift.candidate}, not {candidate_sha}")
    # Measuring runs the user's deployed_command: an audit passes check()'s drift so it runs once, not twice.
    d = drift
    if d is None:
        try:
            d = drift_mod.measure(repo, config, candidate_sha)
        except PromoteError as e:
            return CheckOutcome(NAME, UNDECIDED, str(e))
    if d is None:  # pragma: no cover - excluded by the configuration test above
        return CheckOutcome(NAME, UNDECIDED, "no deployed ref configured")
    if isinstance(d, DriftUndecided):
        return CheckOutcome(NAME, UNDECIDED, f"cannot tell what production serves: {d.reason}")
    findings = tuple(drift_findings(d, config.trunk))
    trunk = f"{config.trunk} ({d.candidate[:7]})"
    evidence = [_serving(d)]
    tracked = config.deployed if d.source == "ref" and d.ref != config.deployed else None
    if tracked is not None:
        evidence.append(f"no local {tracked!r}: read its remote-tracking branch {d.ref}")
    if d.status == "same":
        evidence.append(f"{trunk} and the deployed commit are the same commit")
        return DeployedOutcome(NAME, PASS, f"production serves {trunk} itself", tuple(evidence), findings, tracked)
    if d.status == "behind":
        evidence.append(f"{trunk} lacks {d.trunk_behind} commit(s) that production serves:")
        evidence += _commits(repo.commits(d.sha, d.candidate, limit=COMMITS_LISTED), d.trunk_behind)
        why = f"{trunk} is {d.trunk_behind} commit(s) behind what production serves; promoting would drop them"
        return DeployedOutcome(NAME, FAIL, why, tuple(evidence), findings, tracked)
    ahead = f"{trunk} is {d.undeployed} commit(s) ahead of the deployed commit"
    if d.status == "test-only":
        evidence.append(f"{ahead}, touching only test files ({_files(d.changed_files)}): binary unchanged")
        return DeployedOutcome(
            NAME, PASS, "trunk differs from production only in test files", tuple(evidence), findings, tracked
        )
    if d.status != "undeployed":
        assert_never(d.status)
    evidence.append(f"{ahead}, not deployed:")
    evidence += _commits(d.undeployed_commits, d.undeployed)
    tests = len(d.changed_files) - len(d.non_test_files)
    also = f" (and {tests} test file(s))" if tests else ""
    evidence.append(f"they change {len(d.non_test_files)} non-test file(s): {_files(d.non_test_files)}{also}")
    why = f"{d.undeployed} commit(s) on {config.trunk} changing non-test files are not deployed"
    return DeployedOutcome(NAME, FAIL, why, tuple(evidence), findings, tracked)


def _serving(d: Drift) -> str:
    named = f"{d.ref} = {d.sha[:7]}" if d.ref != d.sha else d.sha[:7]
    via = "" if d.source == "ref" else f", as {d.source} reports"
    return f"production serves {named}{via}; served since {d.served_since} (source: {d.served_since_source})"


def _commits(commits: list[Commit] | tuple[Commit, ...], total: int) -> list[str]:
    lines = [f"  {c.short} {c.subject} ({c.author})" for c in commits]
    if total > len(commits):
        lines.append(f"  ... and {total - len(commits)} more")
    return lines


def _files(files: tuple[str, ...]) -> str:
    shown = ", ".join(files[:FILES_LISTED])
    return shown + (f" (+{len(files) - FILES_LISTED} more)" if len(files) > FILES_LISTED else "")
