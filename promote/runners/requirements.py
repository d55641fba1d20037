"""Tests that cannot run here: what they need, which stations have it, and the verdicts.

Works from the run's own records (no reruns): declared requirements a test was skipped for, and
requirements the rule table reads out of how a test failed, errored or was skipped.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import replace

from promote.config import RequirementsConfig
from promote.core.findings import Finding
from promote.core.outcome import FAIL, PASS, UNDECIDED, CheckOutcome
from promote.core.station import Station
from promote.runners.plugin.records import TestRecord
from promote.runners.plugin.requirement_rules import DEFAULT_RULES, Rule, checkpoint_rules, infer_failure, infer_skip
from promote.runners.stations import Inventory
from promote.runners.summary import Blocked, PackageResult

IMPOSSIBLE = "impossible-requirement"
STATION_BOUND = "station-bound"
MISSING_PACKAGE = "missing-package"
CHECKS = (IMPOSSIBLE, STATION_BOUND, MISSING_PACKAGE)
UNRUN = ("failed", "error", "skipped")
SHOWN = 3


def rules_of(config: RequirementsConfig) -> tuple[Rule, ...]:
    """The rule table: the user's rules first, then one per model directory, then the defaults."""
    user = tuple(Rule(r.pattern, r.requirement, r.frames) for r in config.rules)
    return user + checkpoint_rules(config.model_dirs) + DEFAULT_RULES


def needs(record: TestRecord, here: Station, rules: Sequence[Rule]) -> tuple[str, ...]:
    """What a test that did not pass needed and the station it ran on lacks (empty: nothing explains it)."""
    if record.outcome == "skipped":
        declared = here.lacking(record.requirements)
        found = declared or ((r,) if (r := infer_skip(record.skip_reason or "", rules)) else ())
    else:
        r = infer_failure(record.excerpt or record.longrepr or "", rules)
        found = (r,) if r else ()
    # A requirement the station has cannot explain the failure: it stays a failure.
    return here.lacking(found)


def capable(requirements: Sequence[str], here: Station, inventory: Inventory) -> tuple[str, ...]:
    """The stations that meet every requirement; running out of memory asks for more than this station has."""

    def meets(s: Station, r: str) -> bool:
        if r == "memory":
            return s.memory_gb is not None and here.memory_gb is not None and s.memory_gb > here.memory_gb
        return s.has(r)

    return tuple(s.name for s in inventory.stations if all(meets(s, r) for r in requirements))


def blocked(record: TestRecord, inventory: Inventory, rules: Sequence[Rule]) -> Blocked | None:
    """The verdict on one test that did not pass, or None when it is a genuine failure (or skip)."""
    here = inventory.local
    lacking = needs(record, here, rules)
    if not lacking:
        return None
    packages = tuple(r for r in lacking if r.startswith("package:"))
    if packages:
        return Blocked(record.nodeid, MISSING_PACKAGE, packages, (), record.outcome, record.fixture)
    stations = capable(lacking, here, inventory)
    if not stations:
        # Name what no station has; if each exists somewhere but never together, name them all.
        alone = tuple(r for r in lacking if not capable([r], here, inventory))
        return Blocked(record.nodeid, IMPOSSIBLE, alone or lacking, (), record.outcome, record.fixture)
    return Blocked(record.nodeid, STATION_BOUND, lacking, stations, record.outcome, record.fixture)


def classify(result: PackageResult, inventory: Inventory, rules: Sequence[Rule]) -> PackageResult:
    """Move the tests this station cannot run out of failed/errors/skipped into `blocked`, with findings."""
    excluded = set(result.crashed_tests) | {f.subject for f in result.findings if f.check == "timeout"}
    found: dict[str, Blocked] = {}
    for t in result.tests:
        if t.parent is None and t.outcome in UNRUN and t.nodeid not in excluded and t.nodeid not in found:
            b = blocked(t, inventory, rules)
            if b is not None:
                found[t.nodeid] = b
    if not found:
        return result
    counts = Counter(result.counts)
    for b in found.values():
        counts[b.outcome] -= 1
        counts["blocked"] += 1
    blockers = tuple(found.values())
    # A module that could not be imported for want of a requirement is that requirement's finding alone.
    kept = tuple(f for f in result.findings if not (f.check == "package-error" and f.subject in found))
    return replace(
        result,
        counts={k: n for k, n in counts.items() if n},
        blocked_tests=tuple(found),
        blockers=blockers,
        findings=kept + findings(blockers, inventory.local.name),
    )


def holder(b: Blocked) -> str:
    """What holds a blocked test's need: its fixture (or setUpClass...), else its class, else its file."""
    if b.fixture is not None:
        return b.fixture
    parts = b.test.split("[", 1)[0].split("::")
    return "::".join(parts[:-1]) if len(parts) > 2 else parts[0]


def findings(tests: Sequence[Blocked], here: str) -> tuple[Finding, ...]:
    """One finding per requirement (and verdict): the holders it blocks, with how many tests each."""
    groups: dict[tuple[str, tuple[str, ...], tuple[str, ...]], list[Blocked]] = defaultdict(list)
    for b in tests:
        groups[(b.check, b.requirements, b.stations)].append(b)
    out = []
    for (check, requirements, stations), group in groups.items():
        subject, cause, affected = _affected(group)
        need = " and ".join(requirements)
        if check == MISSING_PACKAGE:
            names = ", ".join(r.partition(":")[2] for r in requirements)
            message = f"cannot import {names}: not installed on station {here} (fix the environment){affected}"
            out.append(Finding(check, "error", subject, message, cause=cause))
        elif check == IMPOSSIBLE:
            message = f"needs {need}, which no station has: it can never run{affected}"
            out.append(Finding(check, "error", subject, message, cause=cause))
        else:
            where = ", ".join(stations)
            message = f"needs {need}, which only {where} has; it did not run here on {here}{affected}"
            out.append(Finding(check, "warning", subject, message, cause=cause))
    return tuple(out)


def _affected(group: Sequence[Blocked]) -> tuple[str, str | None, str]:
    """(subject, cause, what it blocks) of one requirement's finding; the subject is its main holder."""
    # A node id without "::" is a module (or directory) that could not even be collected.
    modules = [b.test for b in group if "::" not in b.test]
    tests = [b for b in group if "::" in b.test]
    held = Counter(holder(b) for b in tests)
    # A module that could not be collected hides all its tests: it comes first.
    main = modules[0] if modules else max(held, key=lambda h: held[h])
    fixtures = {b.fixture for b in tests}
    if len(tests) == 1 and tests[0].fixture is None and not modules:
        return tests[0].test, None, ""
    parts = []
    if tests:
        holders = ", ".join(f"{h} ({n})" for h, n in held.most_common(SHOWN))
        holders += f" (+{len(held) - SHOWN} more)" if len(held) > SHOWN else ""
        ids = [b.test for b in tests]
        listed = ", ".join(ids[:SHOWN]) + (f" (+{len(ids) - SHOWN} more)" if len(ids) > SHOWN else "")
        parts.append(f"{len(tests)} test(s) via {holders}: {listed}")
    if modules:
        parts.append(f"{len(modules)} module(s) not collected: {', '.join(modules)}")
    return main, main if main in fixtures else None, "; " + "; ".join(parts)


def blocked_summary(result: PackageResult) -> list[str]:
    """What blocks how many tests, e.g. "64 blocked: hub:org/model not on any station"."""
    lines = []
    for blocker, n in result.blocked_by.items():
        b = next(b for b in result.blockers if b.blocker == blocker)
        if b.check == MISSING_PACKAGE:
            where = "not installed here"
        elif b.check == IMPOSSIBLE:
            where = "not on any station"
        else:
            where = f"only on {', '.join(b.stations)}"
        lines.append(f"{n} blocked: {blocker} {where}")
    return lines


def outcome(results: Sequence[PackageResult]) -> CheckOutcome:
    """The requirements check for an audit: fails when a test can never run or a package is missing."""
    if not results:
        return CheckOutcome("requirements", UNDECIDED, "no test package ran, so no requirement was observed")
    found = tuple(f for r in results for f in r.findings if f.check in CHECKS)
    evidence = tuple(f"{r.name}: {line}" for r in results for line in blocked_summary(r))
    errors = [f for f in found if f.severity == "error"]
    if errors:
        reason = f"{sum(r.blocked for r in results)} test(s) blocked; {len(errors)} can never run as configured"
        return CheckOutcome("requirements", FAIL, reason, evidence, found)
    reason = "every blocked test can run on some station" if evidence else "no test is blocked by a requirement"
    return CheckOutcome("requirements", PASS, reason, evidence, found)
