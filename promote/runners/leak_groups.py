"""Leaked-state findings grouped by cause: one finding per change, listing every test that made it.

A hundred tests that each call `mx.random.seed(0)` need one fix (a fixture that restores the generator),
not a hundred findings. A change that code outside the tests made (a library's call, a fixture) is one
finding naming that code, whichever tests and workers it ran in. A group is a warning unless a later test
failed because of it: then the failures are `order-dependent` with these tests as their cause, and the
group says which.
"""

from __future__ import annotations

from dataclasses import replace

from promote.core.findings import Finding, Severity
from promote.core.vocab import IMPORT
from promote.runners.causes.bisect import ORDER_DEPENDENT
from promote.runners.plugin.leaks import change_texts, folded, leak_severity, left_running, what_was_done
from promote.runners.plugin.records import LeakRecord, Origin
from promote.runners.summary import PackageResult

# What a group has in common: the state each change touched (the resource and the way it was changed, as the
# probe names it) and what was done about it. Not the value left behind: fifteen tests that each seed the
# generator with another number are one mistake, fixed once. And the code that made the change, when that was
# not the test's own (a library's line, a fixture): one cause, however many tests it ran in.
Signature = tuple[tuple[str, ...], tuple[str, ...], str, str, Origin | None]


def signature(leak: LeakRecord) -> Signature:
    kinds = tuple(kind for _, kind in leak.kinds)
    return tuple(key for key, _, _ in leak.changes), kinds, what_was_done(leak), leak.phase, leak.origin


def group(result: PackageResult) -> PackageResult:
    """`result` with its tests' leaked-state findings replaced by one per way state was changed."""
    if not result.leaks:
        return result
    recorded = {leak.test for leak in result.leaks}
    # Each test's own findings give way to the groups (those of a worker that died too: its progress log kept its
    # leaks as data).
    kept = [f for f in result.findings if not (f.check == "leaked-state" and f.subject in recorded)]
    groups: dict[Signature, list[LeakRecord]] = {}
    # Every worker imports every module: one module's import leak is recorded once per worker.
    for leak in dict.fromkeys(result.leaks):
        groups.setdefault(signature(leak), []).append(leak)
    victims = _victims(result)
    unknown = None
    if any(f.check == "rerun-undecided" for f in result.findings):
        unknown = "undecided: some reruns could not answer (see rerun-undecided)"
    # The plugin placed each test's own finding (file and line); a group is where its first test is.
    places = {f.subject: f.location for f in result.findings if f.check == "leaked-state" and f.subject in recorded}
    grouped = []
    for leaks in groups.values():
        first = leaks[0].test
        # State a module sets when imported is meant for its own tests (a library it imports may set it,
        # too): worth a finding only when some other test failed because of it.
        if leaks[0].phase == IMPORT and not any(victims.get(leak.test) for leak in leaks):
            continue
        origin = leaks[0].origin
        if origin is not None:
            # Where the code that made it is, when that is in the repository (a library's own file is not).
            where = result.locate(origin.path, origin.line) if origin.inside else None
        else:
            where = places.get(first) or result.locate(first)
        grouped.append(replace(_finding(leaks, victims, unknown), location=where))
    return replace(result, findings=tuple(kept + grouped))


def _victims(result: PackageResult) -> dict[str, list[str]]:
    """Polluter -> the tests found order-dependent on it."""
    out: dict[str, list[str]] = {}
    for v in result.verdicts:
        if v.kind == ORDER_DEPENDENT:
            for polluter in v.polluters:
                out.setdefault(polluter, []).append(v.test)
    return out


def _finding(leaks: list[LeakRecord], victims: dict[str, list[str]], unknown: str | None) -> Finding:
    first = leaks[0]
    tests = [leak.test for leak in leaks]
    changes = change_texts(leaks)
    if first.phase == IMPORT:
        who = tests[0] if len(tests) == 1 else f"{len(tests)} modules ({folded(tests)})"
        message = f"{who} changed global state when imported, before any test ran: {'; '.join(changes)}"
    elif first.origin is not None and left_running(first):
        during = f"{len(tests)} test{'s' if len(tests) > 1 else ''} ({folded(tests)})"
        message = (
            f"started a daemon thread that was still running after {during}: {'; '.join(changes)} "
            f"({what_was_done(first)})"
        )
    elif first.origin is not None:
        during = f"{len(tests)} test{'s' if len(tests) > 1 else ''} ({folded(tests)})"
        message = (
            f"changed global state during {during} and did not put it back: {'; '.join(changes)} "
            f"({what_was_done(first)})"
        )
    else:
        who = "" if len(tests) == 1 else f"{len(tests)} tests ({folded(tests)}) "
        message = f"{who}changed global state and did not put it back: {'; '.join(changes)} ({what_was_done(first)})"
    # Workers finish in any order; the same run must print the same sentence.
    failed = [(v, t) for t in tests for v in sorted(victims.get(t, []))]
    severity: Severity = leak_severity(first)
    if failed:
        severity = "error"
        # Each victim once, with every test of the group it fails after (several may each make it fail).
        by_victim: dict[str, list[str]] = {}
        for v, t in failed:
            by_victim.setdefault(v, []).append(t)
        after = folded([v if len(tests) == 1 else f"{v} (after {', '.join(ts)})" for v, ts in by_victim.items()])
        message += f"; later tests failed because of it (order-dependent): {after}"
    elif unknown is not None:
        message += f"; whether a later test failed because of it is {unknown}"
    else:
        message += "; no later test failed because of it"
    if first.origin is not None:
        # The code is the cause and the subject (the message goes on from it); every test it ran in is listed.
        cause = str(first.origin)
        return Finding("leaked-state", severity, cause, message, cause=cause, tests=tuple(tests))
    grouped = tuple(tests) if len(tests) > 1 else ()
    return Finding("leaked-state", severity, first.test, message, cause=folded(tests), tests=grouped)
