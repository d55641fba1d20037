"""The four EETISMAD gates: each pass, fail or undecided, with a short paragraph of facts and the details behind it."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from promote.checks.ci import CIOutcome
from promote.checks.docs import LISTED as DOCS_LISTED
from promote.checks.docs import DocsOutcome
from promote.core.outcome import FAIL, PASS, UNDECIDED, CheckOutcome
from promote.core.vocab import Status, assert_never, worst
from promote.evidence.deltas import Deltas
from promote.evidence.render import when
from promote.release.check import CheckResult
from promote.release.deployed import DeployedOutcome
from promote.release.drift import Drift, DriftUndecided
from promote.release.journal import MergeRecord
from promote.runners.inventory import TestInventory, TestRoot
from promote.runners.suite import RunResult
from promote.runners.summary import PackageResult

TITLES = (
    ("tested", "Everything E2E Tested"),
    ("docs", "in Docs"),
    ("merged", "Merged"),
    ("deployed", "And Deployed"),
)
LISTED = 5  # names a gate row spells out before saying "and N more"


EVERY_PASSED = "every test that ran passed"
ROW = 3  # sentences a gate's row on the page holds at most; the rest is in its section


@dataclass(frozen=True)
class Gate:
    status: Status
    evidence: tuple[str, ...]  # every fact, first things first: the gate's section lists them all
    details: tuple[str, ...] = ()  # what the sections below the gates show
    lead: tuple[str, ...] = ()  # the row: at most ROW short sentences (empty: the first facts)

    @property
    def row(self) -> tuple[str, ...]:
        return (self.lead or self.evidence)[:ROW]

    def to_json(self) -> dict[str, object]:
        return {"status": self.status, "evidence": list(self.evidence), "details": list(self.details),
                "lead": list(self.row)}  # fmt: skip


def plural(n: int, word: str, many: str | None = None) -> str:
    return f"{n} {word if n == 1 else (many or word + 's')}"


def names(items: list[str], *, code: bool = True) -> str:
    """ "a, b and c" (in backticks when `code`), at most LISTED of them."""
    shown = [f"`{i}`" if code else i for i in items[:LISTED]]
    if len(items) > LISTED:
        shown.append(f"{len(items) - LISTED} more")
    return shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " and " + shown[-1]


def _how(p: PackageResult) -> str:
    """Where and how a package ran."""
    if len(p.fleet) == 1:
        # A fleet of one: that station's workers ran every test.
        return f"on {p.station}, on {plural(p.workers, 'worker')}"
    if p.placed:
        per = Counter(station for _, station in p.placed)
        return "over a fleet, each test where its requirements are met: " + ", ".join(
            f"{plural(n, 'test')} on `{station}`" for station, n in sorted(per.items())
        )
    if p.workers <= 1:
        how = "serially in one process (workers = 1)"
    else:
        # The serial part runs only when the parallel part left tests its `serial` setting or marker names.
        how = f"on {p.workers} workers"
        if "serial" in p.parts:
            how += " with the tests its `serial` setting or marker names on one worker after"
    return f"on {p.station}, {how}"


def _in(roots: tuple[TestRoot, ...], by: str) -> str:
    """ "230 in 3 directories by nothing" """
    places = len({r.path for r in roots})
    return f"{sum(r.count for r in roots):,} in {plural(places, 'directory', 'directories')} {by}"


def inventory_line(inv: TestInventory) -> str:
    """The repository's tests in numbers: how many a package runs, and how many only CI or nothing does."""
    nobody, ci_only, maybe = inv.of("nobody"), inv.of("ci"), inv.of("ci-undecided")
    if not (nobody or ci_only or maybe):
        return f"all {inv.total:,} tests in the repository are run by a package"
    parts = [f"{inv.packaged:,} of {inv.total:,} tests are run by a package"]
    if nobody:
        parts.append(_in(nobody, "by nothing: no package, no CI job"))
    if ci_only:
        parts.append(_in(ci_only, "by a CI job only"))
    if maybe:
        parts.append(_in(maybe, "by no package, and maybe by a CI job (undecided)"))
    return "; ".join(parts)


def _repository(inventory: TestInventory) -> tuple[list[str], list[Status]]:
    """The inventory's lines (its numbers, then each root that could not be collected) and what they make the gate."""
    lines = [inventory_line(inventory)]
    lines += [f"{c.path or '.'}: could not be collected: {c.problem}" for c in inventory.collections if c.problem]
    return lines, [FAIL] if inventory.of("nobody") else [UNDECIDED] if inventory.of("ci-undecided") else []


def tested(
    run: RunResult | None, deltas: Deltas | None, ci: CIOutcome | None, inventory: TestInventory | None = None
) -> Gate:
    if run is None or not run.packages:
        return Gate(UNDECIDED, ("no test packages configured: nothing was observed running",))
    counts = {p.name: sum(p.counts.values()) + p.crashed for p in run.packages}
    steps = f", plus {plural(ci.steps, 'CI step')}" if ci is not None else ""
    per = " + ".join(f"{n} {c}" for n, c in counts.items())
    lines = [f"{sum(counts.values())} tests across {plural(len(counts), 'package')} ({per}){steps}"]
    statuses: list[Status] = []
    lead = lines[0]
    if inventory is not None:
        more, statuses = _repository(inventory)
        # Tests no package runs are the repository's numbers, first in the row; otherwise what the packages ran is.
        lead = more[0] if inventory.packaged < inventory.total else lead
        lines += more
    ran: dict[str, list[str]] = {}
    for p in run.packages:
        ran.setdefault(_how(p), []).append(p.name)
    for how, which in ran.items():
        whole = len(which) == len(counts) > 1
        who = ("both" if len(which) == 2 else f"all {len(which)}") if whole else names(which, code=False)
        lines.append(f"{who} ran {how}")
    details = []
    for p in run.packages:
        if counts[p.name] == 0 and p.stations_down:
            # A fleet none of whose stations answered observed nothing: not a pass, and no failure either.
            statuses.append(UNDECIDED)
            lines.append(f"{p.name}: no station of its fleet answered ({names(list(p.stations_down))}): nothing ran")
            continue
        statuses.append(PASS if p.green else FAIL)
        red = [t for n, t in ((p.failed, f"{p.failed} failed"), (p.errors, plural(p.errors, "error")),
                              (p.crashed, f"{p.crashed} crashed")) if n]  # fmt: skip
        if red:
            lines.append(f"{p.name}: {', '.join(red)}")
        # Failures of one cause are one problem: said once, with how many tests it fails.
        lines += [f"{p.name}: {len(g.tests)} of them fail for one cause, {g.cause}" for g in p.groups]
        if p.blocked:
            lines.append(f"{p.name}: {p.blocked} blocked (no station can run them)")
        if p.hidden:
            # They passed in the run only because promote put leaked state back: plain pytest fails them.
            statuses.append(FAIL)
            only = plural(len(p.hidden), "test passes", "tests pass")
            lines.append(f"{p.name}: {only} only because promote restored leaked state: {names(list(p.hidden))}")
        # A package that ran nothing (or ended unexplained) shows 0s above: say why.
        lines += [f"{p.name}: {f.message}" for f in p.findings if f.check == "package-error" and f.subject == p.name]
    if any(f.check == "rerun-undecided" for f in run.findings):
        statuses.append(UNDECIDED)
        lines.append("the cause of some failures is undecided (see rerun-undecided)")
    if deltas is not None:
        if deltas.fixed:
            fixed = [d.nodeid for d in deltas.fixed]
            lines.append(f"{plural(len(fixed), 'red test')} found and fixed rather than filtered: {names(fixed)}")
        if deltas.filtered:
            statuses.append(FAIL)
            gone = [d.nodeid for d in deltas.filtered]
            lines.append(f"{plural(len(gone), 'red test')} filtered, not fixed: {names(gone)}")
        lines.append(deltas.headline)
    if ci is None:
        lines.append("CI: no GitHub Actions workflows, so no CI job was audited")
    else:
        statuses.append(ci.status)
        lines.append(f"CI: {ci.reason}")
        details += list(ci.evidence)
    return Gate(worst(statuses), tuple(lines), tuple(details), tested_lead(run, deltas, ci, lead))


def red_parts(run: RunResult) -> list[str]:
    """What is red, package by package: "1 failed in sanctum-proxy", "1 blocked in sanctum-mlx"."""
    parts = []
    for p in run.packages:
        for n, what in ((p.failed, "failed"), (p.errors, "errored"), (p.crashed, "crashed"), (p.blocked, "blocked")):
            if n:
                parts.append(f"{n} {what} in {p.name}")
    return parts


def tested_lead(run: RunResult, deltas: Deltas | None, ci: CIOutcome | None, total: str) -> tuple[str, ...]:
    """The Tested row: how many ran, what is red (named in the Tests section), and what CI runs."""
    red = red_parts(run)
    if deltas is not None and deltas.filtered:
        red.append(f"{plural(len(deltas.filtered), 'red test')} filtered, not fixed")
    second = f"{', '.join(red)}: each named under Tests" if red else EVERY_PASSED
    third = f"CI: {ci.reason}" if ci is not None else "no CI workflows to audit"
    return (total, second, third)


def docs(outcome: CheckOutcome | None, missing: str) -> Gate:
    """Each feature and its page (or "no page"); where the pages were read, in the details."""
    if outcome is None:
        return Gate(UNDECIDED, (missing,))
    if not isinstance(outcome, DocsOutcome):  # undecided before any page was read
        return Gate(outcome.status, (outcome.reason,), tuple(outcome.evidence))
    features = [f"{f.name}: {_shown(f.pages)}" for f in outcome.features]
    details = list(outcome.evidence)
    left_out = f"{plural(outcome.own, 'page')} promote wrote left out: evidence is not documentation"
    evidence = (*(features or [outcome.reason]), *([left_out] if outcome.own else []))
    return Gate(outcome.status, evidence, tuple(details), _docs_lead(outcome, left_out))


def _shown(pages: tuple[str, ...]) -> str:
    """A feature's pages in backticks, as many as the docs check lists; "no page" for none."""
    if not pages:
        return "no page"
    more = f" (+{len(pages) - DOCS_LISTED})" if len(pages) > DOCS_LISTED else ""
    return ", ".join(f"`{p}`" for p in pages[:DOCS_LISTED]) + more


def _docs_lead(outcome: DocsOutcome, left_out: str) -> tuple[str, ...]:
    """The Docs row: which features have no page, how many do, and promote's own pages left out."""
    if outcome.status == UNDECIDED or not outcome.features:
        return (outcome.reason, *([left_out] if outcome.own else []))
    bare = [f.name for f in outcome.features if not f.pages]
    paged = [f.name for f in outcome.features if f.pages]
    lines = [f"no page for {names(bare)}"] if bare else []
    if paged:
        lines.append(f"{names(paged)} {'has a page' if len(paged) == 1 else 'have pages'}")
    return (*lines, *([left_out] if outcome.own else []))


def _fast_forwarded(record: MergeRecord) -> str:
    to = f"`{record.candidate[:7]}`"
    befores = {before for _, before in record.pushed}
    mirrors = [m for m, _ in record.pushed]
    if len(befores) == 1:
        before = next(iter(befores))
        start = f" `{before[:7]}`" if before else " an empty branch"
        return f"{record.trunk} fast-forwarded{start} to {to} on {names(mirrors, code=False)}, no force"
    each = ", ".join(f"{m} from `{(b or 'nothing')[:7]}`" for m, b in record.pushed)
    return f"{record.trunk} fast-forwarded to {to} on {each}, no force"


def merged(check: CheckResult, record: MergeRecord | str | None) -> Gate:
    mirrors = check.mirrors
    if not mirrors:
        return Gate(UNDECIDED, ("no mirrors configured",))
    sha = f"`{check.candidate[:7]}`"
    agree = [m.name for m in mirrors if m.status == "up-to-date"]
    lines = []
    if isinstance(record, MergeRecord) and record.pushed:
        lines.append(_fast_forwarded(record))
    elif isinstance(record, str):
        lines.append(record)
    if len(agree) == len(mirrors):
        if len(mirrors) == 1:
            lines.append(f"the one mirror, {agree[0]}, holds {sha} on {check.trunk}")
        else:
            lines.append(f"all {len(mirrors)} mirrors agree: {check.trunk} is {sha} on {names(agree, code=False)}")
        if isinstance(record, MergeRecord) and record.pushed:
            lines.append(
                "each was verified an ancestor of the candidate before it was pushed, so nothing was discarded"
            )
        return Gate(PASS, tuple(lines))
    statuses: list[Status] = []
    for m in mirrors:
        match m.status:
            case "fast-forward":
                statuses.append(FAIL)
                lines.append(f"{m.name} lags {plural(m.behind or 0, 'commit')} behind {sha}: a fast-forward, nothing "
                             "to discard, so `promote merge` is safe")  # fmt: skip
            case "diverged":
                statuses.append(FAIL)
                lines.append(f"{m.name} has {plural(m.discard or 0, 'commit')} the candidate lacks: diverged, "
                             "`promote merge` refuses (it never forces)")  # fmt: skip
            case "missing" | "unreachable":
                statuses.append(FAIL if m.status == "missing" else UNDECIDED)
                lines.append(f"{m.name} is {m.status}: {m.reason}")
            case "up-to-date":
                pass  # told below, with the others that agree
            case _:
                assert_never(m.status)
    if agree:
        lines.append(f"{names(agree, code=False)} already {'holds' if len(agree) == 1 else 'hold'} {sha}")
    return Gate(worst(statuses), tuple(lines))


def deployed(outcome: CheckOutcome | None, drift: Drift | DriftUndecided | None, trunk: str, missing: str) -> Gate:
    """ "<ref> has served this tree since <date>", then how trunk differs from it; the files in the details."""
    if outcome is None:
        return Gate(UNDECIDED, (missing,))
    if not isinstance(drift, Drift) or outcome.status == UNDECIDED:
        return Gate(outcome.status, (outcome.reason,), tuple(outcome.evidence))
    ref = f"`{drift.ref}` (`{drift.sha[:7]}`)" if drift.ref != drift.sha else f"`{drift.sha[:7]}`"
    since = f"since {when(drift.served_since)} ({drift.served_since_source})"
    head = f"{trunk} (`{drift.candidate[:7]}`)"
    status = drift.status
    if status == "same":
        lines = [f"{ref} has served this tree {since}", f"{trunk} and deployed are the same commit"]
    elif status == "test-only":
        n = plural(drift.undeployed, "commit")
        lines = [f"{ref} has served this tree {since}", f"{head} is {n} ahead, test-only: binary unchanged"]
    elif status == "behind":
        lines = [f"{ref} has served {since}", f"{head} lacks {plural(drift.trunk_behind, 'commit')} it serves: "
                 "promoting would drop them"]  # fmt: skip
    elif status == "undeployed":
        n = plural(drift.undeployed, "commit")
        lines = [f"{ref} has served {since}", f"{head} is {n} ahead, changing non-test files: not deployed"]
    else:
        assert_never(status)
    # A CI clone reads the deployed branch from its remote-tracking ref: the reader is told which.
    if isinstance(outcome, DeployedOutcome) and outcome.tracked is not None:
        lines.append(f"no local {outcome.tracked!r}: read its remote-tracking branch {drift.ref}")
    details = [f"`{c.short}` {c.subject} ({c.author})" for c in drift.undeployed_commits]
    # Non-test and test files apart: the line after "changing non-test files" names only the former.
    non_test = set(drift.non_test_files)
    tests = [f for f in drift.changed_files if f not in non_test]
    if drift.non_test_files:
        details.append(f"non-test files changed: {', '.join(f'`{f}`' for f in drift.non_test_files)}")
    if tests:
        details.append(f"{'test ' if non_test else ''}files changed: {', '.join(f'`{f}`' for f in tests)}")
    return Gate(outcome.status, tuple(lines), tuple(details))
