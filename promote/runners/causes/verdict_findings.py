"""The finding each verdict of the reruns makes: what a user reads about a failed test's cause."""

from __future__ import annotations

from collections.abc import Sequence

from promote.core.findings import Finding, Location
from promote.core.vocab import CRASHES_ALONE
from promote.runners.causes import bisect


def verdict_finding(v: bisect.Verdict, leaks: Sequence[Finding], location: Location | None = None) -> Finding | None:
    """The finding of one failed test's verdict, at `location` (the test's file); none for a genuine failure."""
    if v.kind == bisect.ORDER_DEPENDENT and v.by_import:
        named = ", ".join(v.polluters)
        message = f"{v.detail} (pytest imports every module before the first test; found in {v.reruns} reruns)"
        leaked = [f"{f.subject} {f.message}" for f in leaks if f.subject in v.polluters]
        if leaked:
            message += "; " + "; ".join(leaked)
        return Finding("order-dependent", "error", v.test, message, cause=named, location=location)
    if v.kind == bisect.ORDER_DEPENDENT and not v.polluters and v.each:
        message = (
            f"fails after any test of the suite that runs before it in the same process, but not after promote's "
            f"no-op test, and passes alone ({v.detail}; found in {v.reruns} reruns): the cause is something every "
            "test of the suite does, such as an autouse fixture or a hook in conftest.py, not one earlier test"
        )
        return Finding("order-dependent", "error", v.test, message, cause=v.test, location=location)
    if v.kind == bisect.ORDER_DEPENDENT and v.by_collection:
        message = (
            f"passes alone with only its own module collected, as `pytest MODULE::TEST` runs it, and fails after "
            f"promote's no-op test with the whole package collected ({v.detail}; found in {v.reruns} reruns): "
            "importing the package's other modules makes it fail, not an earlier test"
        )
        return Finding("order-dependent", "error", v.test, message, cause=v.test, location=location)
    if v.kind == bisect.ORDER_DEPENDENT and not v.polluters:
        return Finding("order-dependent", "error", v.test, after_any_test(v), cause=v.test, location=location)
    if v.kind == bisect.ORDER_DEPENDENT:
        named = ", ".join(v.polluters)
        # Several found apart each make it fail on their own; otherwise they are one group, needed together.
        after = f"after each of {listed(v.polluters)}" if v.each and len(v.polluters) > 1 else f"only after {named}"
        message = (
            f"fails {after} ran earlier in the same process; passes alone ({v.detail}; found in {v.reruns} reruns)"
        )
        leaked = [f"{f.subject} leaked: {f.message}" for f in leaks if f.subject in v.polluters]
        if leaked:
            message += "; " + "; ".join(leaked)
        return Finding("order-dependent", "error", v.test, message, cause=named, location=location)
    if v.kind == bisect.FLAKY:
        return Finding("flaky", "warning", v.test, f"flaky: {v.detail} ({v.reruns} reruns)", location=location)
    if v.kind == CRASHES_ALONE:
        message = f"crashes when run alone: {v.detail} ({v.reruns} reruns)"
        return Finding("worker-crash", "error", v.test, message, cause=v.test, location=location)
    if v.kind == bisect.UNDECIDED:
        message = f"undecided whether order-dependent: {v.detail}"
        return Finding("rerun-undecided", "warning", v.test, message, location=location)
    return None


def listed(names: Sequence[str], most: int = 5) -> str:
    """`A, B and C`; past `most`, the first three and how many more (the finding's cause lists them all)."""
    if len(names) > most:
        return f"{', '.join(names[:3])} and {len(names) - 3} more"
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def after_any_test(v: bisect.Verdict) -> str:
    """The message of a victim that failed after each test tried before it, and never alone."""
    return (
        f"fails after any test that runs before it in the same process, even promote's no-op test, and passes "
        f"alone ({v.detail}; found in {v.reruns} reruns): it passes only when it runs first, so the cause is in the "
        "test itself (state it expects fresh) or in what pytest does around every test, not in one earlier test"
    )
