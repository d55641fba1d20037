"""The findings of tests blocked by a requirement: one per requirement (and verdict), each saying what its tests need.

A missing module is one finding per module, whichever way its tests said so (a failed import, `importorskip`, a
skip reason naming it), at the severity its declaration gives: an optional dependency (in an extra, or declared
nowhere) that its tests skip for is a warning; a dependency the package declares, or one its tests fail for
instead of skipping, is an error.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import replace

from promote.core.findings import Finding, Rootdir
from promote.core.station import some_machine_could
from promote.core.vocab import IMPOSSIBLE, MISSING_PACKAGE, STATION_BOUND, Blocker, Severity, is_red
from promote.runners.configuration import locate
from promote.runners.declared import Declared, DeclaredError
from promote.runners.summary import Blocked, CIJob

SHOWN = 3
LISTED = 10  # requirements named one by one inside one test, before folding

Group = tuple[Blocker, tuple[str, ...], tuple[str, ...], tuple[CIJob, ...]]  # (check, requirements, stations, jobs)


def holder(b: Blocked) -> str:
    """What holds a blocked test's need: its fixture (or setUpClass...), else its class, else its file."""
    if b.fixture is not None:
        return b.fixture
    parts = b.test.split("[", 1)[0].split("::")
    return "::".join(parts[:-1]) if len(parts) > 2 else parts[0]


def findings(
    tests: Sequence[Blocked],
    here: str,
    rootdir: Rootdir | None = None,
    declared: Declared | DeclaredError | None = None,
    *,
    ci_read: bool = False,
) -> tuple[Finding, ...]:
    """One finding per requirement (and verdict): the holders it blocks, with how many tests each, at the main one.

    Requirements that only one test's subtests (and its own body) reach are that test's one finding,
    naming each with the subtest that needs it: one test, one change to make. A missing module is one
    finding per module (`declared`: what the package's pyproject.toml says of it). `ci_read`: the CI jobs
    that run each test were asked too (none of them has what an impossible one needs).
    """
    groups: dict[Group, list[Blocked]] = defaultdict(list)
    modules: dict[str, list[Blocked]] = defaultdict(list)
    for b in tests:
        if b.check == MISSING_PACKAGE:
            for r in b.requirements:
                modules[r.partition(":")[2]].append(b)
        else:
            groups[(b.check, b.requirements, b.stations, b.jobs)].append(b)
    inside: dict[tuple[Blocker, tuple[str, ...], tuple[CIJob, ...], str], list[Blocked]] = defaultdict(list)
    out: list[tuple[Group, str, str | None, str]] = []
    with_subtests = {b.parent for b in tests if b.parent}
    for key, group in groups.items():
        tops = {b.parent or b.test for b in group}
        if len(tops) == 1 and tops <= with_subtests:
            inside[(key[0], key[2], key[3], tops.pop())].extend(group)
        else:
            out.append((key, *_affected(group)))
    for (check, stations, jobs, test), group in inside.items():
        needed = tuple(dict.fromkeys(r for b in group for r in b.requirements))
        out.append(((check, needed, stations, jobs), test, None, _within(test, group)))
    found = [
        replace(_finding(key, subject, cause, affected, here, ci_read), location=locate(rootdir, subject))
        for key, subject, cause, affected in out
    ]
    for module, group in modules.items():
        subject, cause, affected = _affected(group)
        severity, message = _missing(module, group, here, declared)
        where = locate(rootdir, subject)
        found.append(Finding(MISSING_PACKAGE, severity, subject, message + affected, cause, location=where))
    return tuple(found)


def _finding(key: Group, subject: str, cause: str | None, affected: str, here: str, ci_read: bool) -> Finding:
    check, requirements, stations, jobs = key
    need = " and ".join(requirements)
    if check == IMPOSSIBLE:
        nor = " (nor the runner of any CI job that runs it)" if ci_read else ""
        # "Never" only when no machine could: a device or a hub model some machine has is missing from this fleet.
        if all(some_machine_could(r) for r in requirements):
            message = f"needs {need}, which no station here has{nor}: it cannot run on this fleet{affected}"
        else:
            message = f"needs {need}, which no station has{nor}: it can never run{affected}"
        return Finding(check, "error", subject, message, cause=cause)
    if jobs:
        # No station has it: the CI jobs whose runners do are where it runs.
        where = "; ".join(f"CI job `{j.job}` of {j.source} runs it on [{j.runs_on}]" for j in jobs)
        message = f"needs {need}; no station has {'it' if len(requirements) == 1 else 'them all'}; {where}{affected}"
        return Finding(STATION_BOUND, "warning", subject, message, cause=cause)
    message = f"needs {need}, which only {', '.join(stations)} has; it did not run here on {here}{affected}"
    return Finding(STATION_BOUND, "warning", subject, message, cause=cause)


def _missing(
    module: str, group: Sequence[Blocked], here: str, declared: Declared | DeclaredError | None
) -> tuple[Severity, str]:
    """One module not installed: an error when the package depends on it or a test fails for it, else a warning."""
    kind, extra = declared.of(module) if isinstance(declared, Declared) else ("unknown", None)
    if isinstance(declared, Declared):
        said = {
            "required": f"a dependency {declared.shown} declares (not optional)",
            "extra": f"optional: extra `{extra}` of {declared.shown} declares it",
            "undeclared": f"optional: no extra of {declared.shown} declares it",
            "unknown": f"{declared.shown} lists the package's dependencies dynamically",
        }[kind]
    elif isinstance(declared, DeclaredError):
        said = f"the package's dependencies cannot be read: {declared}"
    else:
        said = "no pyproject.toml declares the package's dependencies"
    failing = sum(is_red(b.outcome) for b in group)
    severity: Severity = "error"
    if kind == "required":
        fix = "fix the environment"
    elif failing:
        fix = f"{failing} {'test or module fails' if failing == 1 else 'tests or modules fail'} instead of skipping"
    else:
        severity, fix = "warning", "its tests skip without it"
    return severity, f"cannot import {module}: not installed on station {here}; {said}; {fix}"


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
