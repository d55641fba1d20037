"""Tests that cannot run here: what they need, which stations have it, and the verdicts.

Works from the run's own records (no reruns): declared requirements a test was skipped for, and
requirements the rule table reads out of how a test failed, errored or was skipped.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import replace

from promote.config import RequirementsConfig
from promote.core.findings import Finding, Rootdir
from promote.core.outcome import FAIL, PASS, UNDECIDED, CheckOutcome
from promote.core.station import Station
from promote.core.vocab import is_red
from promote.runners.configuration import locate
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
from promote.runners.stations import Inventory
from promote.runners.summary import Blocked, PackageResult

IMPOSSIBLE = "impossible-requirement"
STATION_BOUND = "station-bound"
MISSING_PACKAGE = "missing-package"
CHECKS = (IMPOSSIBLE, STATION_BOUND, MISSING_PACKAGE)
UNRUN = ("failed", "error", "skipped")
SHOWN = 3
LISTED = 10  # requirements named one by one inside one test, before folding


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
        return Blocked(test.nodeid, IMPOSSIBLE, alone or lacking, (), test.outcome, test.fixture, parent)
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


def classify(result: PackageResult, inventory: Inventory, rules: Sequence[Rule]) -> PackageResult:
    """Move the tests this station cannot run out of failed/errors/skipped into `blocked`, with findings.

    A subtest blocked by a requirement is blocked, not failed; its test is blocked when every failed
    subtest is. The findings name every requirement with the tests and subtests that need it.
    """
    excluded = set(result.crashed_tests) | {f.subject for f in result.findings if f.check == "timeout"}
    children: dict[str, list[TestRecord]] = defaultdict(list)
    subs: dict[str, Blocked] = {}
    for t in result.tests:
        if t.parent is not None and t.parent not in excluded:
            children[t.parent].append(t)
            if t.outcome in UNRUN and t.nodeid not in subs and (b := blocked(t, inventory, rules)) is not None:
                subs[t.nodeid] = b
    found: dict[str, Blocked] = {}
    own: list[Blocked] = []  # what each test needed in its own body, apart from its subtests
    for t in result.tests:
        if t.parent is None and t.outcome in UNRUN and t.nodeid not in excluded and t.nodeid not in found:
            b = blocked(t, inventory, rules)
            own += [b] if b is not None else []
            if (whole := _by_subtests(t, b, children.get(t.nodeid, ()), subs, inventory)) is not None:
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
    return replace(
        result,
        counts={k: n for k, n in counts.items() if n},
        subtests={k: n for k, n in subtests.items() if n},
        blocked_tests=tuple(found),
        blockers=(*found.values(), *subs.values()),
        findings=kept + findings((*own, *subs.values()), inventory.local.name, result.rootdir),
    )


def holder(b: Blocked) -> str:
    """What holds a blocked test's need: its fixture (or setUpClass...), else its class, else its file."""
    if b.fixture is not None:
        return b.fixture
    parts = b.test.split("[", 1)[0].split("::")
    return "::".join(parts[:-1]) if len(parts) > 2 else parts[0]


Group = tuple[str, tuple[str, ...], tuple[str, ...]]  # (check, requirements, stations)


def findings(tests: Sequence[Blocked], here: str, rootdir: Rootdir | None = None) -> tuple[Finding, ...]:
    """One finding per requirement (and verdict): the holders it blocks, with how many tests each, at the main one.

    Requirements that only one test's subtests (and its own body) reach are that test's one finding,
    naming each with the subtest that needs it: one test, one change to make.
    """
    groups: dict[Group, list[Blocked]] = defaultdict(list)
    for b in tests:
        groups[(b.check, b.requirements, b.stations)].append(b)
    inside: dict[tuple[str, tuple[str, ...], str], list[Blocked]] = defaultdict(list)
    out: list[tuple[Group, str, str | None, str]] = []
    with_subtests = {b.parent for b in tests if b.parent}
    for key, group in groups.items():
        tops = {b.parent or b.test for b in group}
        if len(tops) == 1 and tops <= with_subtests:
            inside[(key[0], key[2], tops.pop())].extend(group)
        else:
            out.append((key, *_affected(group)))
    for (check, stations, test), group in inside.items():
        needed = tuple(dict.fromkeys(r for b in group for r in b.requirements))
        out.append(((check, needed, stations), test, None, _within(test, group)))
    return tuple(
        replace(_finding(key, subject, cause, affected, here), location=locate(rootdir, subject))
        for key, subject, cause, affected in out
    )


def _finding(key: Group, subject: str, cause: str | None, affected: str, here: str) -> Finding:
    check, requirements, stations = key
    need = " and ".join(requirements)
    if check == MISSING_PACKAGE:
        names = ", ".join(r.partition(":")[2] for r in requirements)
        message = f"cannot import {names}: not installed on station {here} (fix the environment){affected}"
        return Finding(check, "error", subject, message, cause=cause)
    if check == IMPOSSIBLE:
        return Finding(
            check, "error", subject, f"needs {need}, which no station has: it can never run{affected}", cause=cause
        )
    where = ", ".join(stations)
    message = f"needs {need}, which only {where} has; it did not run here on {here}{affected}"
    return Finding(check, "warning", subject, message, cause=cause)


def _within(test: str, group: Sequence[Blocked]) -> str:
    """What needs each requirement inside one test: its subtests (by their own part of the id) and its body."""
    subtests = [b for b in group if b.parent]
    shown = [f"{b.test.removeprefix(test).strip()} needs {b.blocker}" for b in subtests[:LISTED]]
    shown += [f"+{len(subtests) - LISTED} more"] if len(subtests) > LISTED else []
    own = [b.blocker for b in group if not b.parent]
    body = f"; the test itself needs {', '.join(own)}" if own else ""
    return f"; {len(subtests)} subtest(s) of {test}: {', '.join(shown)}{body}"


def _affected(group: Sequence[Blocked]) -> tuple[str, str | None, str]:
    """(subject, cause, what it blocks) of one requirement's finding; the subject is its main holder."""
    # A node id without "::" is a module (or directory) that could not even be collected.
    modules = [b.test for b in group if "::" not in b.test]
    tests = [b for b in group if "::" in b.test and not b.parent]
    subtests = [b.test for b in group if b.parent]
    # A subtest's need is held where its test's would be.
    held = Counter(holder(b) for b in tests) or Counter(holder(replace(b, test=b.parent or b.test)) for b in group)
    # A module that could not be collected hides all its tests: it comes first.
    main = modules[0] if modules else max(held, key=lambda h: held[h])
    fixtures = {b.fixture for b in tests}
    if len(tests) == 1 and tests[0].fixture is None and not modules and not subtests:
        return tests[0].test, None, ""
    parts = []
    if tests:
        holders = ", ".join(f"{h} ({n})" for h, n in held.most_common(SHOWN))
        holders += f" (+{len(held) - SHOWN} more)" if len(held) > SHOWN else ""
        ids = [b.test for b in tests]
        listed = ", ".join(ids[:SHOWN]) + (f" (+{len(ids) - SHOWN} more)" if len(ids) > SHOWN else "")
        parts.append(f"{len(tests)} test(s) via {holders}: {listed}")
    if subtests:
        listed = ", ".join(subtests[:SHOWN]) + (f" (+{len(subtests) - SHOWN} more)" if len(subtests) > SHOWN else "")
        parts.append(f"{len(subtests)} subtest(s): {listed}")
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
