"""`promote audit`: check + test + every check -> the four gates, history, and the evidence pages."""

from __future__ import annotations

import contextlib
import posixpath
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypeVar

from promote.accel.store import record as record_accel
from promote.accel.verify import AccelReport, run_accelerations
from promote.checks.ci import CIOutcome, survey_ci
from promote.checks.ci import outcome as ci_outcome
from promote.checks.docs import audit_docs, index_path, json_beside
from promote.config import Config, DocsConfig
from promote.config.workspace import Workspace, resolve_candidate
from promote.core import state
from promote.core.errors import ConfigError, PromoteError
from promote.core.findings import Finding
from promote.core.git import Repo
from promote.core.outcome import CheckOutcome, Status
from promote.core.vocab import Stored
from promote.evidence import (
    accel_section,
    docs_history,
    gates,
    index_page,
    intoto,
    inventory_audit,
    story_findings,
    story_window,
)
from promote.evidence import deltas as deltas_mod
from promote.evidence import pages as evidence
from promote.evidence.ci_places import collected_ids, in_ci
from promote.evidence.history import History, HistoryError, StoredRun
from promote.evidence.pages import Pages
from promote.evidence.publish import PublishResult, preflight
from promote.evidence.publish import publish as publish_page
from promote.evidence.store import blamed_elsewhere, kept, outcomes_of, record_into, record_switch_runs
from promote.evidence.stories import StoryReport
from promote.evidence.story_window import RunCounts
from promote.release import journal
from promote.release.check import CheckResult, check
from promote.release.deployed import audit_deployed
from promote.runners.causes.investigate import StepCallback
from promote.runners.inventory import Collected, TestInventory, tally
from promote.runners.package import ProgressCallback
from promote.runners.suite import RunResult, new_run_id, run_tests

HISTORY_POINTS = 20
T = TypeVar("T")


@dataclass(frozen=True)
class Unstored:
    """A part of the audit that could not be written (a full disk, a locked history), and its one line of why."""

    what: Stored
    error: str

    def to_json(self) -> dict[str, object]:
        return {"what": self.what, "error": self.error}


@dataclass(frozen=True)
class AuditResult:
    run_id: str
    verdict: Status
    gates: dict[str, gates.Gate]
    findings: tuple[Finding, ...]
    pages: Pages | None  # None: they could not be written (see `unstored`)
    published: PublishResult | None = None
    unstored: tuple[Unstored, ...] = ()  # what could not be written; the gates, decided in memory, stand
    inventory: TestInventory | None = None  # every test of the repository and who runs it (None: none collected)

    def to_json(self) -> dict[str, object]:
        return {
            "run": self.run_id,
            "verdict": self.verdict,
            "gates": {k: g.to_json() for k, g in self.gates.items()},
            "findings": [f.to_json() for f in self.findings],
            "pages": None if self.pages is None else self.pages.to_json(),
            "published": self.published.to_json() if self.published else None,
            "unstored": [u.to_json() for u in self.unstored],
            "inventory": None if self.inventory is None else self.inventory.to_json(),
        }


def attempt(unstored: list[Unstored], what: Stored, write: Callable[[], T]) -> T | None:
    """`write()`, or None with why it failed added to `unstored` (once per part): the audit goes on without it."""
    try:
        return write()
    except PromoteError as e:  # StateError, HistoryError: one line naming the file, a full disk or a lock
        if all(u.what != what for u in unstored):
            unstored.append(Unstored(what, str(e)))
        return None


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


def left_out_by_ci(ws: Workspace, run: RunResult | None, ci: CheckOutcome | None) -> dict[tuple[str, str], str] | None:
    """Why no CI job runs each test that none does, by (package, test id); None when CI was not read."""
    if not isinstance(ci, CIOutcome):
        return None
    rooted = collected_ids(ws.repo.root, run)
    return {rooted[n.test]: n.why for n in ci.not_run if n.test in rooted}


def run_checks(
    ws: Workspace, result: CheckResult, run: RunResult | None, collections: tuple[Collected, ...] = ()
) -> dict[str, CheckOutcome]:
    """Every check's outcome; `collections`: the repository's test roots, collected beside the packages' runs."""
    cfg = ws.config
    # check() already measured the drift (and raised on a measuring error); measuring again would rerun
    # deployed_command and could judge a different answer than the one the check reported.
    outcomes: dict[str, CheckOutcome] = {"deployed": audit_deployed(ws.repo, cfg, result.candidate, drift=result.drift)}
    packaged = collected_ids(ws.repo.root, run)
    inventory = [t for c in collections for t in (*c.ids, *c.errors)]
    report = survey_ci(ws.repo.root, cfg, list(packaged), inventory)
    # A repository without CI workflows has nothing for the CI audit to judge; the gate says so instead.
    if report.workflows:
        outcomes["ci"] = ci_outcome(report)
    if collections:
        whole = tally(collections, {t: name for t, (name, _) in packaged.items()}, inventory_audit.owner_of(report))
        outcomes[inventory_audit.NAME] = inventory_audit.outcome(whole)
    if cfg.docs is not None:
        deployed_sha = result.drift.sha if result.drift else None
        outcomes["docs"] = audit_docs(ws.repo.root, cfg, deployed_sha)
    return outcomes


@dataclass(frozen=True)
class Observed:
    """Everything an audit measured before deciding: the check, the tests, each check's outcome, the accelerations."""

    run_id: str
    started: str
    check: CheckResult
    run: RunResult | None
    outcomes: dict[str, CheckOutcome]
    accel: AccelReport | None
    # Where --publish puts the page in the docs repository, fixed (and checked) before anything ran.
    page: str | None = None
    left_out: dict[tuple[str, str], str] | None = None  # why no CI job runs a test, by (package, id); None: not read


@dataclass(frozen=True)
class Decided:
    """What an audit concluded: the gates, every finding, the run as stored, and the recent runs for the chart."""

    gates: dict[str, gates.Gate]
    findings: list[Finding]
    stored: StoredRun
    deltas: deltas_mod.Deltas
    recent: list[RunCounts]
    stories: StoryReport | None = None  # None: the history could not be read for them
    unstored: tuple[Unstored, ...] = ()  # the history could not be opened or could not take the run


def observe(
    ws: Workspace, *, publish: bool, candidate: str | None, bench: bool,
    on_progress: ProgressCallback | None, on_step: StepCallback | None, push: bool = False,
) -> Observed:  # fmt: skip
    """Check, run the tests and every check; refuses --publish up front when the docs repository cannot take a page."""
    cfg = ws.config
    if publish and cfg.docs is None:
        raise ConfigError(f"{cfg.path}: --publish needs [{cfg.prefix}.docs] naming the docs repository")
    started = now()
    run_id = new_run_id()
    page = None
    if publish and cfg.docs is not None:
        commit = resolve_candidate(ws, candidate)[0]
        page = preflight(cfg.docs, run_id=run_id, commit=commit, push=push)
    result = check(ws, candidate)
    # The repository's whole inventory is collected side by side with the packages' runs, not after them.
    collecting = inventory_audit.start(ws.repo.root, cfg)
    # A run whose records could not be stored (a full disk) goes on: everything after is decided from it in memory.
    run = run_tests(cfg, on_progress=on_progress, run_id=run_id, on_step=on_step) if cfg.packages else None
    if run is not None:
        # The history judges a victim blamed on a different polluter each run as `promote test` does: one verdict.
        with contextlib.suppress(HistoryError):  # a history that cannot be read judges nothing; the run stands
            run = blamed_elsewhere(cfg, run)
    outcomes = run_checks(ws, result, run, collecting.results())
    ci = outcomes.get("ci")
    if run is not None and isinstance(ci, CIOutcome):
        # A test no station can run may still run in CI, on a runner that has what it needs.
        run = in_ci(ws.repo.root, run, ci.jobs)
    # Each accelerated path's switch both ways and parity; its bench only when asked (benches are long).
    accel = run_accelerations(cfg, bench=bench, on_progress=on_progress) if cfg.accelerations else None
    return Observed(run_id, started, result, run, outcomes, accel, page, left_out_by_ci(ws, run, outcomes.get("ci")))


def inventory_of(seen: Observed) -> TestInventory | None:
    """The repository's test inventory the audit collected (None: it collected no root)."""
    found = seen.outcomes.get(inventory_audit.NAME)
    return found.inventory if isinstance(found, inventory_audit.InventoryOutcome) else None


def decide_gates(cfg: Config, seen: Observed, deltas: deltas_mod.Deltas) -> dict[str, gates.Gate]:
    """The four gates from what was observed and how this run differs from the previous one."""
    result, outcomes = seen.check, seen.outcomes
    ci = outcomes.get("ci")  # None: no CI workflows to audit
    decided = {
        "tested": gates.tested(seen.run, deltas, ci if isinstance(ci, CIOutcome) else None, inventory_of(seen)),
        "docs": gates.docs(outcomes.get("docs"), "no [promote.docs] configured: no docs were checked"),
        "merged": gates.merged(result, journal.last_merge(cfg.root, result.candidate)),
        "deployed": gates.deployed(outcomes.get("deployed"), result.drift, cfg.trunk, "no deployed ref configured"),
    }
    if seen.accel is not None:
        decided["tested"] = accel_section.tested_with(decided["tested"], seen.accel)
    return decided


def all_findings(seen: Observed, deltas: deltas_mod.Deltas) -> list[Finding]:
    """Every finding of the audit, each once."""
    findings = [
        *seen.check.findings,
        *(seen.run.findings if seen.run else ()),
        *deltas.findings(),
        *(seen.accel.findings if seen.accel else ()),
    ]
    for outcome in seen.outcomes.values():
        findings += [f for f in outcome.findings if f not in findings]
    return findings


def decide(
    cfg: Config, seen: Observed, stored: StoredRun, deltas: deltas_mod.Deltas, stories: StoryReport | None = None
) -> Decided:
    """The gates and findings from what was observed (and the tests' stories, when the history told them), and the
    run as the history would store it."""
    decided = decide_gates(cfg, seen, deltas)
    findings = all_findings(seen, deltas)
    if stories is not None:
        decided = story_findings.gates_told(decided, stories)
        findings += [f for f in story_findings.findings(stories) if f not in findings]
    gate_status: dict[str, str] = {k: g.status for k, g in decided.items()}
    stored = replace(stored, finished=now(), gates=gate_status, findings=tuple(findings))
    return Decided(decided, findings, stored, deltas, [], stories)


def decide_and_record(cfg: Config, seen: Observed, command: str) -> Decided:
    """Compare with the previous run, decide the gates, store the run in the history; what it refused is `unstored`."""
    run, left_out = seen.run, seen.left_out or {}
    stored = StoredRun(
        run_id=seen.run_id,
        kind="audit",
        started=seen.started,
        finished=now(),
        commit=seen.check.candidate,
        command=command,
        mirrors={m.name: m.head for m in seen.check.mirrors},
        stations={p.name: p.station for p in run.packages} if run else {},
        tests=tuple(replace(t, ci=left_out.get((t.package, t.nodeid))) for t in outcomes_of(run)),
        ci_read=seen.left_out is not None,
    )
    unstored: list[Unstored] = []
    history = attempt(unstored, "history", lambda: History(state.state_dir(cfg.root)))
    try:
        earlier = attempt(unstored, "history", lambda: reading(history, lambda h: _earlier(cfg, h, stored)))
        if history is None or earlier is None:
            # Decided without the earlier runs, and said so: not a first run, a comparison that could not be made.
            unread = deltas_mod.Deltas(None, 0, stored.count("passed"), unread=True)
            return replace(decide(cfg, seen, stored, unread), unstored=tuple(unstored))
        previous, tally, stories = earlier
        done = decide(cfg, seen, stored, deltas_mod.compare(stored, previous, tally), stories)
        attempt(unstored, "history", lambda: record_into(history, done.stored, keep=kept(cfg)))
        recent = attempt(unstored, "history", lambda: reading(history, _recent)) or []
        return replace(done, recent=recent, unstored=tuple(unstored))
    finally:
        if history is not None:
            history.close()


def reading(history: History | None, read: Callable[[History], T]) -> T | None:
    """`read(history)` (None without one); a database error as HistoryError: a full disk fails reads too."""
    if history is None:
        return None
    try:
        return read(history)
    except sqlite3.Error as e:  # SQLite's shared-memory file cannot grow on a full disk, a read included
        raise HistoryError(f"{history.path}: cannot read the history database: {e}") from None


def _earlier(
    cfg: Config, history: History, stored: StoredRun
) -> tuple[StoredRun | None, Callable[[str, str], tuple[int, int]], StoryReport]:
    """What the history holds before `stored`: the previous run, each test's tally and story over the window."""
    return history.previous(stored), story_window.tally(history, stored), story_findings.read(cfg, history, stored)


def _recent(history: History) -> list[RunCounts]:
    return story_window.run_counts(history, HISTORY_POINTS)


def statements_of(ws: Workspace, seen: Observed) -> dict[str, dict[str, Any]]:
    """The in-toto statements of every package that ran, by file stem."""
    # The repository's own remote: origin, else the first mirror with a URL (intoto makes a local path a file: URL).
    url = ws.urls.get("origin") or next((u for u in ws.urls.values() if u), "")
    return {
        stem: statement
        for p in (seen.run.packages if seen.run else ())
        for stem, statement in intoto.statements(
            p, repo_url=url, root=ws.repo.root, commit=seen.check.candidate, run_id=seen.run_id
        ).items()
    }


def publish_files(docs: DocsConfig, rel: str, page: str, data: str | None = None) -> dict[str, str]:
    """The page, its evidence JSON `data` beside it (the shared history's record: docs_history), and the index of
    every evidence page rebuilt with them (unless a person's page holds its path)."""
    files, index, repo = {rel: page}, index_path(docs.page), Repo(docs.repo)
    if data is not None:
        files[json_beside(rel)] = data
    if index != rel and not index_page.theirs(repo, index):
        entries = [e for e in index_page.published(repo, posixpath.dirname(index)) if e.path != rel]
        new = index_page.entry(rel, page)
        files[index] = index_page.markdown([*entries, *([new] if new else [])], index)
    return files


def write_evidence(
    doc: dict[str, Any], out: Path, statements: Callable[[], dict[str, dict[str, Any]]], unstored: list[Unstored]
) -> Pages | None:
    """The pages, then the in-toto statements beside them; what could not be written is added to `unstored`, each
    part on its own (pages written without their statements are still there, and said to be)."""
    pages = attempt(unstored, "pages", lambda: evidence.write(doc, out))
    if pages is None:
        return None
    written = attempt(unstored, "statements", lambda: evidence.write_statements(out, statements()))
    return replace(pages, statements=written or ())


def audit(
    ws: Workspace, *, command: str, publish: bool = False, push: bool = False,
    on_progress: ProgressCallback | None = None, candidate: str | None = None, bench: bool = False,
    on_step: StepCallback | None = None,
) -> AuditResult:  # fmt: skip
    """Run everything, decide the four gates, store the run, write (and maybe publish) the pages."""
    cfg = ws.config
    seen = observe(
        ws, publish=publish, candidate=candidate, bench=bench, on_progress=on_progress, on_step=on_step, push=push
    )  # fmt: skip
    done = decide_and_record(cfg, seen, command)
    records = () if seen.run is None or seen.run.unstored is None else (Unstored("records", seen.run.unstored),)
    unstored = [*records, *done.unstored]
    merge = journal.last_merge(cfg.root, seen.check.candidate)
    doc = evidence.document(
        run_id=seen.run_id,
        check=seen.check,
        run=seen.run,
        deltas=done.deltas,
        gates=done.gates,
        findings=done.findings,
        last_merge=None if merge is None else merge.headline,
        history=evidence.history_points(done.recent, done.stories.marks if done.stories else ()),
        stories=story_findings.section(done.stories),
        shared=docs_history.outcomes(done.stored),
        provenance={"command": command, "started": seen.started, "finished": done.stored.finished},
        sections=[] if seen.accel is None else [accel_section.section(cfg, seen.accel)],
        root=ws.repo.root,
        inventory=inventory_of(seen),
    )
    if (accel := seen.accel) is not None:
        attempt(unstored, "history", lambda: record_accel(cfg, accel, kind="audit", run_id=seen.run_id))
        attempt(unstored, "history", lambda: record_switch_runs(cfg, accel, command, done.stored.commit))
    out = state.runs_dir(cfg.root) / seen.run_id
    pages = write_evidence(doc, out, lambda: statements_of(ws, seen), unstored)
    published = None
    # Only evidence that is all on disk is published: a page whose run or history is missing stays here, said.
    if cfg.docs is not None and seen.page is not None and pages is not None and not unstored:
        message = f"promote: evidence for {seen.check.candidate[:7]} ({doc['verdict']}), run {seen.run_id}"
        docs, rel, md, data = cfg.docs, seen.page, pages.md.read_text(encoding="utf-8"), pages.json.read_text("utf-8")
        published = publish_page(docs.repo, lambda: publish_files(docs, rel, md, data), message, push=push)
    gates_, findings = done.gates, tuple(done.findings)
    return AuditResult(
        seen.run_id, doc["verdict"], gates_, findings, pages, published, tuple(unstored), inventory_of(seen)
    )
