"""`promote audit`: check + test + every check -> the four gates, history, and the evidence pages."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path

from promote.checks.ci import outcome as ci_outcome
from promote.checks.ci import survey_ci
from promote.checks.docs import audit_docs
from promote.config.workspace import Workspace
from promote.core import state
from promote.core.errors import ConfigError
from promote.core.findings import Finding
from promote.core.outcome import CheckOutcome
from promote.evidence import deltas as deltas_mod
from promote.evidence import gates, intoto
from promote.evidence import pages as evidence
from promote.evidence.history import History, StoredRun
from promote.evidence.pages import Pages
from promote.evidence.publish import preflight
from promote.evidence.publish import publish as publish_page
from promote.evidence.store import outcomes_of
from promote.release import journal
from promote.release.check import CheckResult, check
from promote.release.deployed import audit_deployed
from promote.runners.package import ProgressCallback
from promote.runners.run import RunResult, new_run_id, run_tests

HISTORY_POINTS = 20


@dataclass(frozen=True)
class AuditResult:
    run_id: str
    verdict: str
    gates: dict[str, gates.Gate]
    findings: tuple[Finding, ...]
    pages: Pages
    published: str | None = None

    def to_json(self) -> dict[str, object]:
        return {
            "run": self.run_id,
            "verdict": self.verdict,
            "gates": {k: g.to_json() for k, g in self.gates.items()},
            "findings": [f.to_json() for f in self.findings],
            "pages": self.pages.to_json(),
            "published": self.published,
        }


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


def inventory(ws: Workspace, run: RunResult | None) -> list[str]:
    """Every test id that ran, relative to the repository root (what CI configurations name)."""
    if run is None:
        return []
    ids = []
    for p in run.packages:
        prefix = os.path.relpath(p.path, ws.repo.root).replace(os.sep, "/")
        base = "" if prefix == "." else f"{prefix}/"
        ids += [f"{base}{t.nodeid}" for t in p.tests if t.parent is None]
        ids += [f"{base}{n}" for n in p.crashed_tests]
    return ids


def last_merge(root: Path, candidate: str) -> str | None:
    """The journal's record of the merge that put the candidate on every mirror, if promote did it."""
    for entry in reversed(journal.read(root)):
        if entry.get("op") == "merge" and entry.get("candidate") == candidate and entry.get("verdict") == "merged":
            return f"{entry.get('trunk')} fast-forwarded to {candidate[:7]} at {entry.get('time')}, no force"
    return None


def run_checks(ws: Workspace, result: CheckResult, run: RunResult | None) -> dict[str, CheckOutcome]:
    cfg = ws.config
    # check() already measured the drift (and raised on a measuring error); measuring again would rerun
    # deployed_command and could judge a different answer than the one the check reported.
    outcomes = {"deployed": audit_deployed(ws.repo, cfg, result.candidate, drift=result.drift)}
    report = survey_ci(ws.repo.root, cfg, inventory(ws, run))
    # A repository without CI workflows has nothing for the CI audit to judge; the gate says so instead.
    if report.workflows:
        outcomes["ci"] = ci_outcome(report)
    if cfg.docs is not None:
        deployed_sha = result.drift.sha if result.drift else None
        outcomes["docs"] = audit_docs(ws.repo.root, cfg, deployed_sha)
    return outcomes


def audit(
    ws: Workspace, *, command: str, publish: bool = False, push: bool = False,
    on_progress: ProgressCallback | None = None, candidate: str | None = None,
) -> AuditResult:  # fmt: skip
    """Run everything, decide the four gates, store the run, write (and maybe publish) the pages."""
    cfg = ws.config
    if publish and cfg.docs is None:
        raise ConfigError(f"{cfg.path}: --publish needs [{cfg.prefix}.docs] naming the docs repository")
    started = now()
    result = check(ws, candidate)
    run_id = new_run_id()
    if publish and cfg.docs is not None:
        preflight(cfg.docs, run_id=run_id, commit=result.candidate)
    run = run_tests(cfg, on_progress=on_progress, run_id=run_id) if cfg.packages else None
    outcomes = run_checks(ws, result, run)

    history = History(state.state_dir(cfg.root))
    stored = StoredRun(
        run_id=run_id,
        kind="audit",
        started=started,
        finished=now(),
        commit=result.candidate,
        command=command,
        mirrors={m.name: m.head for m in result.mirrors},
        stations={p.name: p.station for p in run.packages} if run else {},
        tests=outcomes_of(run),
    )
    deltas = deltas_mod.compare(stored, history.previous(stored))
    merge_record = last_merge(cfg.root, result.candidate)
    decided = {
        "tested": gates.tested(run, deltas, outcomes.get("ci")),  # None: no CI workflows to audit
        "docs": gates.from_check(outcomes.get("docs"), "no [promote.docs] configured: no docs were checked"),
        "merged": gates.merged(result, merge_record),
        "deployed": gates.from_check(outcomes.get("deployed"), "no deployed ref configured"),
    }
    findings = [*result.findings, *(run.findings if run else ()), *deltas.findings()]
    for outcome in outcomes.values():
        findings += [f for f in outcome.findings if f not in findings]
    stored = replace(stored, finished=now(), gates={k: g.status for k, g in decided.items()}, findings=tuple(findings))
    history.record(stored)
    recent = [history.get(r) for r in history.run_ids(HISTORY_POINTS)]
    history.close()

    doc = evidence.document(
        run_id=run_id,
        check=result,
        run=run,
        deltas=deltas,
        gates=decided,
        findings=findings,
        last_merge=merge_record,
        history=evidence.history_points(recent),
        provenance={"command": command, "started": started, "finished": stored.finished},
    )
    url = ws.urls.get("origin", "")
    statements = {
        p.name: intoto.statement(p, repo_url=url, commit=result.candidate, run_id=run_id)
        for p in (run.packages if run else ())
    }
    pages = evidence.write(doc, state.runs_dir(cfg.root) / run_id, statements)
    published = None
    if publish and cfg.docs is not None:
        published = publish_page(
            cfg.docs, pages.md.read_text(encoding="utf-8"), run_id=run_id, commit=result.candidate,
            verdict=doc["verdict"], push=push,
        )  # fmt: skip
    return AuditResult(run_id, doc["verdict"], decided, tuple(findings), pages, published)
