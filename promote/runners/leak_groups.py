"""Leaked-state findings grouped by cause: one finding per cause, listing every test that made it.

A hundred tests that each call `mx.random.seed(0)` need one fix (a fixture that restores the generator),
not a hundred findings. What code outside the tests changed (a library's function, a project helper, a
fixture) is one finding naming that code and every state it changed, whichever tests and workers it ran in.
A group is a warning unless a later test failed because of it: then the failures are `order-dependent` with
these tests as their cause, and the group says which.
"""

from __future__ import annotations

from dataclasses import replace

from promote.core.findings import Finding, Severity
from promote.core.vocab import IMPORT
from promote.runners.causes.bisect import ORDER_DEPENDENT
from promote.runners.plugin.leaks import change_texts, folded, leak_severity, left_running, what_was_done
from promote.runners.plugin.records import LeakRecord, Origin
from promote.runners.summary import PackageResult

# What a group has in common. For code outside the test (a library's function, a project helper, a fixture): its
# call site alone, whatever state it changed. One helper that seeds `random`, numpy and MLX is one fix, however
# many tests and workers it ran in; a daemon thread it left running is apart (a sentence of its own, nothing to
# put back). For the test's own changes: the state each touched (the resource and the way it was changed, as the
# probe names it) and what was done about it. Not the value left behind: fifteen tests that each seed the
# generator with another number are one mistake, fixed once.
OwnSignature = tuple[tuple[str, ...], tuple[str, ...], str, str]
SiteSignature = tuple[tuple[str, str, int, bool, bool], bool]
Signature = OwnSignature | SiteSignature


def signature(leak: LeakRecord) -> Signature:
    if leak.origin is not None:
        return leak.origin.site, left_running(leak)
    kinds = tuple(kind for _, kind in leak.kinds)
    return tuple(key for key, _, _ in leak.changes), kinds, what_was_done(leak), leak.phase


def group(result: PackageResult) -> PackageResult:
    """`result` with its tests' leaked-state findings replaced by one per way state was changed."""
    if not result.leaks:
        return result
    recorded = {leak.test for leak in result.leaks}
    # Each test's own findings give way to the groups (those of a worker that died too: its progress log kept its
    # leaks as data).
    kept = [f for f in result.findings if not (f.check == "leaked-state" and f.subject in recorded)]
    groups: dict[Signature, list[LeakRecord]] = {}
    # Every worker imports every module: one module's import leak is recorded once per worker. Taken in
    # collection order (the package's tests are; a module's import first), so two runs of one commit group and
    # word alike, and a parametrized test's cases read 0, 1, ..., 10 rather than 0, 1, 10.
    order: dict[str, int] = {}
    for i, t in enumerate(result.tests):
        order.setdefault(t.nodeid, i)
    for leak in dict.fromkeys(sorted(result.leaks, key=lambda leak: (order.get(leak.test, -1), leak.test))):
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
        origin = shown_origin(leaks)
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


def shown_origin(leaks: list[LeakRecord]) -> Origin | None:
    """The call site a group is named by: the earliest of its lines that made a change (None: the tests' own)."""
    origins = [leak.origin for leak in leaks if leak.origin is not None]
    return min(origins, key=lambda o: o.line) if origins else None


def _finding(leaks: list[LeakRecord], victims: dict[str, list[str]], unknown: str | None) -> Finding:
    first, origin = leaks[0], shown_origin(leaks)
    tests = [leak.test for leak in leaks]
    message = _what_happened(leaks, origin)
    # Workers finish in any order; the same run must print the same sentence.
    failed = [(v, t) for t in tests for v in sorted(victims.get(t, []))]
    # One test of a call site whose state could not be put back makes the whole site's finding an error.
    severity: Severity = "error" if any(leak_severity(leak) == "error" for leak in leaks) else "warning"
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
    if origin is not None:
        # The code is the cause and the subject (the message goes on from it); every test it ran in is listed.
        cause = str(origin)
        return Finding("leaked-state", severity, cause, message, cause=cause, tests=tuple(tests))
    grouped = tuple(tests) if len(tests) > 1 else ()
    return Finding("leaked-state", severity, first.test, message, cause=folded(tests), tests=grouped)


def _what_happened(leaks: list[LeakRecord], origin: Origin | None) -> str:
    """What the group's tests (or the code they ran) changed, and what promote did about it."""
    first, tests = leaks[0], [leak.test for leak in leaks]
    changes = "; ".join(change_texts(leaks))
    # Alike within a signature of the tests' own; a call site's tests may differ (one restore that failed).
    done = "; ".join(dict.fromkeys(what_was_done(leak) for leak in leaks))
    if first.phase == IMPORT:
        who = tests[0] if len(tests) == 1 else f"{len(tests)} modules ({folded(tests)})"
        return f"{who} changed global state when imported, before any test ran: {changes}"
    if origin is None:
        who = "" if len(tests) == 1 else f"{len(tests)} tests ({folded(tests)}) "
        return f"{who}changed global state and did not put it back: {changes} ({done})"
    during = f"{len(tests)} test{'s' if len(tests) > 1 else ''} ({folded(tests)})"
    # A library's file is not the repository's: the fix is where it is called from, or a fixture that restores.
    code = "" if origin.inside else " (library code)"
    if left_running(first):
        return f"started a daemon thread{code} that was still running after {during}: {changes} ({done})"
    return f"changed global state{code} during {during} and did not put it back: {changes} ({done})"
