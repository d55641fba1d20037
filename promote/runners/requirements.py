"""Tests that cannot run here: what they need, which stations have it, and the verdicts.

Works from the run's own records (no reruns): declared requirements a test was skipped for, and
requirements the rule table reads out of how a test failed, errored or was skipped.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from promote.config import RequirementsConfig
from promote.core.outcome import FAIL, PASS, UNDECIDED, CheckOutcome
from promote.core.station import Station
from promote.core.vocab import BLOCKERS, IMPOSSIBLE, MISSING_PACKAGE, STATION_BOUND, is_red
from promote.runners.declared import declared_for
from promote.runners.plugin.records import TestRecord
from promote.runners.plugin.requirement_rules import (
    DEFAULT_RULES,
    Rule,
    checkpoint_rules,
    infer_failure,
    infer_output,
    infer_skip,
    raised,
)
from promote.runners.requirement_findings import findings
from promote.runners.stations import Inventory
from promote.runners.summary import Blocked, CIJob, PackageResult

CHECKS = BLOCKERS
UNRUN = ("failed", "error", "skipped")


def rules_of(config: RequirementsConfig) -> tuple[Rule, ...]:
    """The rule table: the user's rules first, then one per model directory, then the defaults."""
    return configured_rules(config) + DEFAULT_RULES


def configured_rules(config: RequirementsConfig) -> tuple[Rule, ...]:
    """The rules the configuration adds to the defaults (a fleet's workers read skips with them too)."""
    user = tuple(Rule(r.pattern, r.requirement, r.frames) for r in config.rules)
    return user + checkpoint_rules(config.model_dirs)


def needs(record: TestRecord, here: Station, rules: Sequence[Rule]) -> tuple[str, ...]:
    """What a test that did not pass needed and the station it ran on lacks (empty: nothing explains it)."""
    if record.outcome == "skipped":
        declared = here.lacking(record.requirements)
        found = declared or ((r,) if (r := infer_skip(record.skip_reason or "", rules)) else ())
    else:
        r = infer_failure(record.excerpt or record.longrepr or "", rules)
        # A module that checks for its packages itself says which it lacks, then exits.
        found = (r,) if r else infer_output(record.output or "", rules)
    # A requirement the station has cannot explain the failure: it stays a failure.
    return here.lacking(found)


def capable(requirements: Sequence[str], here: Station, inventory: Inventory) -> tuple[str, ...]:
    """The stations that meet every requirement; running out of memory asks for more than this station has."""

    def meets(s: Station, r: str) -> bool:
        if r == "memory":
            return s.memory_gb is not None and here.memory_gb is not None and s.memory_gb > here.memory_gb
        return s.has(r)

    return tuple(s.name for s in inventory.stations if all(meets(s, r) for r in requirements))


def verdict(test: TestRecord, lacking: tuple[str, ...], inventory: Inventory, parent: str | None = None) -> Blocked:
    """What `lacking` makes of a test: a missing package, impossible, or bound to the stations that have it all."""
    here = inventory.local
    packages = tuple(r for r in lacking if r.startswith("package:"))
    if packages:
        return Blocked(test.nodeid, MISSING_PACKAGE, packages, (), test.outcome, test.fixture, parent)
    stations = capable(lacking, here, inventory)
    if not stations:
        # Name what no station has; if each exists somewhere but never together, name them all.
        alone = tuple(r for r in lacking if not capable([r], here, inventory))
        return Blocked(test.nodeid, IMPOSSIBLE, alone or lacking, (), test.outcome, test.fixture, parent, lacking)
    return Blocked(test.nodeid, STATION_BOUND, lacking, stations, test.outcome, test.fixture, parent)


def blocked(record: TestRecord, inventory: Inventory, rules: Sequence[Rule]) -> Blocked | None:
    """The verdict on one test (or subtest) that did not pass, or None when it is a genuine failure (or skip)."""
    lacking = needs(record, inventory.local, rules)
    return verdict(record, lacking, inventory, record.parent) if lacking else None


def _by_subtests(
    test: TestRecord,
    own: Blocked | None,
    subtests: Sequence[TestRecord],
    found: dict[str, Blocked],
    inventory: Inventory,
) -> Blocked | None:
    """A test whose failed subtests are all blocked, and whose own failure is blocked too or raised nothing."""
    failed = [s for s in subtests if is_red(s.outcome)]
    if not failed or any(s.nodeid not in found for s in failed):
        return own
    if own is None and raised(test.excerpt or test.longrepr or ""):
        return None  # it failed for itself, for no requirement: a genuine failure
    lacking = dict.fromkeys(r for b in (own, *(found[s.nodeid] for s in failed)) if b for r in b.requirements)
    return verdict(test, tuple(lacking), inventory)


def classify(
    result: PackageResult,
    inventory: Inventory,
    rules: Sequence[Rule],
    ran_on: Callable[[TestRecord], Inventory] | None = None,
    here: str | None = None,
) -> PackageResult:
    """Move the tests this station cannot run out of failed/errors/skipped into `blocked`, with findings.

    A subtest blocked by a requirement is blocked, not failed; its test is blocked when every failed
    subtest is. The findings name every requirement with the tests and subtests that need it.
    `ran_on`: over a fleet, the inventory as the station each test ran on sees it; `here`: where it ran, as the
    findings say it (this station's name by default).
    """
    of = ran_on or (lambda _: inventory)
    excluded = set(result.crashed_tests) | {f.subject for f in result.findings if f.check == "timeout"}
    children: dict[str, list[TestRecord]] = defaultdict(list)
    subs: dict[str, Blocked] = {}
    for t in result.tests:
        if t.parent is not None and t.parent not in excluded:
            children[t.parent].append(t)
            if t.outcome in UNRUN and t.nodeid not in subs and (b := blocked(t, of(t), rules)) is not None:
                subs[t.nodeid] = b
    found: dict[str, Blocked] = {}
    own: list[Blocked] = []  # what each test needed in its own body, apart from its subtests
    for t in result.tests:
        if t.parent is None and t.outcome in UNRUN and t.nodeid not in excluded and t.nodeid not in found:
            b = blocked(t, of(t), rules)
            own += [b] if b is not None else []
            if (whole := _by_subtests(t, b, children.get(t.nodeid, ()), subs, of(t))) is not None:
                found[t.nodeid] = whole
    if not found and not subs:
        return result
    counts = Counter(result.counts)
    for b in found.values():
        counts[b.outcome] -= 1
        counts["blocked"] += 1
    subtests = Counter(result.subtests)
    for b in subs.values():
        subtests[b.outcome] -= 1
        subtests["blocked"] += 1
    # A module that could not be imported for want of a requirement is that requirement's finding alone.
    kept = tuple(f for f in result.findings if not (f.check == "package-error" and f.subject in found))
    judged = (*own, *subs.values())
    # What the package declares matters only for a module it lacks: its pyproject.toml is read for those alone.
    declared = declared_for(result.path) if any(b.check == MISSING_PACKAGE for b in judged) else None
    return replace(
        result,
        counts={k: n for k, n in counts.items() if n},
        subtests={k: n for k, n in subtests.items() if n},
        blocked_tests=tuple(found),
        blockers=(*found.values(), *subs.values()),
        judged=judged,
        findings=kept + findings(judged, here or inventory.local.name, result.rootdir, declared),
    )


def blocked_summary(result: PackageResult) -> list[str]:
    """What blocks how many tests, e.g. "64 blocked: hub:org/model not on any station"."""
    lines = []
    for blocker, n in result.blocked_by.items():
        b = next(b for b in result.blockers if b.blocker == blocker)
        if b.check == MISSING_PACKAGE:
            # Where the tests ran: a package run on stations did not run here.
            where = f"not installed on {', '.join(result.fleet)}" if result.fleet else "not installed here"
        elif b.check == IMPOSSIBLE:
            where = "not on any station"
        elif b.jobs:
            where = f"only in CI ({', '.join(f'{j.job} on [{j.runs_on}]' for j in b.jobs)})"
        else:
            where = f"only on {', '.join(b.stations)}"
        lines.append(f"{n} blocked: {blocker} {where}")
    return lines


def outcome(results: Sequence[PackageResult]) -> CheckOutcome:
    """The requirements check for an audit: fails when no station here can run a test or a package is missing."""
    if not results:
        return CheckOutcome("requirements", UNDECIDED, "no test package ran, so no requirement was observed")
    found = tuple(f for r in results for f in r.findings if f.check in CHECKS)
    evidence = tuple(f"{r.name}: {line}" for r in results for line in blocked_summary(r))
    errors = [f for f in found if f.severity == "error"]
    if errors:
        reason = (
            f"{sum(r.blocked for r in results)} test(s) blocked; "
            f"{len(errors)} finding(s) of tests no station here can run as configured"
        )
        return CheckOutcome("requirements", FAIL, reason, evidence, found)
    reason = (
        "every blocked test can run on some station or CI job" if evidence else "no test is blocked by a requirement"
    )
    return CheckOutcome("requirements", PASS, reason, evidence, found)


def with_ci(result: PackageResult, places: Mapping[str, Sequence[CIJob]]) -> PackageResult:
    """`result` with each test no station can run judged again against `places`: the CI jobs that run each test
    (by its id, or its parent's for a subtest). A test a job's runner can run is bound to that job; the others no
    station here can run, and now say that no CI job that runs them can either."""

    def judged(b: Blocked) -> Blocked:
        if b.check != IMPOSSIBLE:
            return b
        need = b.lacking or b.requirements
        # Running out of memory asks for more than the station had: no runner is promised more.
        jobs = tuple(
            j for j in places.get(b.parent or b.test, ()) if all(r != "memory" and j.runner.has(r) for r in need)
        )
        return replace(b, check=STATION_BOUND, requirements=need, jobs=jobs) if jobs else b

    again = tuple(map(judged, result.judged))
    told = [b for b in again if b.check == IMPOSSIBLE or b.jobs]
    if not told:
        return result
    kept = tuple(f for f in result.findings if f.check != IMPOSSIBLE)
    return replace(
        result,
        blockers=tuple(map(judged, result.blockers)),
        judged=again,
        findings=kept + findings(told, result.station, result.rootdir, ci_read=True),
    )
