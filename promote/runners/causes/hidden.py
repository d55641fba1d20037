"""Under `leaks = "restore"`: what the restores hid from the run.

promote put each leak back before the next test, so a test that fails only after a leak (as it would
under plain pytest, in the same order) passed. For each worker that restored something, the tests from
its first restored leak on run once more, in the same order, with nothing restored (the workers' passes
at once); a test that fails only there passes only because promote restored state. Its cause is looked
for among the tests that leaked before it, then among all the tests before it, by bisection within the
run's rerun budget. Over a fleet, each worker's pass and its bisection run on the station that worker ran on.
CPython's regrtest is the anchor: it restores a changed resource and still marks the test ENV_CHANGED.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace

from promote.config import PackageConfig
from promote.core.findings import Finding, Location
from promote.core.policies import RESTORE
from promote.runners.causes import bisect
from promote.runners.causes.budget import Budget
from promote.runners.causes.fleet_causes import pass_rerunners
from promote.runners.causes.investigate import StepCallback, Steps, investigate_one, orders
from promote.runners.causes.rerun import RerunError, Rerunner, judged_failed
from promote.runners.causes.verdict_findings import verdict_finding
from promote.runners.plugin.records import TestRecord
from promote.runners.summary import PackageResult

ACTION = "unrestored"


@dataclass(frozen=True)
class Pass:
    """One worker's tests from its first restored leak on, in its order, and the tests of it that leaked."""

    tests: tuple[str, ...]
    leakers: frozenset[str]
    station: str | None = None  # over a fleet: where the worker ran (None when that is not known)


def passes(result: PackageResult) -> list[Pass]:
    """The extra pass of each worker that restored something (and ran a test after it)."""
    restored = frozenset(leak.test for leak in result.leaks if leak.restored)
    # A test this station cannot run (a hub model it lacks) is neither polluter nor victim here.
    blocked = set(result.blocked_tests)
    out = []
    for order in orders(result.out_dir):
        first = next((i for i, t in enumerate(order) if t in restored), None)
        tests = tuple(t for t in order[first:] if t not in blocked) if first is not None else ()
        if len(tests) > 1:
            # One worker's tests all ran on its station; the first one placed says which.
            station = next((s for t in tests if (s := result.ran_on(t)) is not None), None)
            out.append(Pass(tests, restored, station))
    return out


def victims(result: PackageResult, ran: Sequence[TestRecord], order: Sequence[str]) -> list[str]:
    """The tests that passed in the run and failed in the pass, in the pass's order."""
    skip = set(result.blocked_tests) | set(result.crashed_tests)
    return [
        t for t in order if t not in skip and judged_failed(result.tests, t) is False and judged_failed(ran, t) is True
    ]


def measure(
    pkg: PackageConfig, result: PackageResult, budget: Budget, on_step: StepCallback | None = None
) -> PackageResult:
    """`result` with what the restores hid: order-dependent findings, and the tests on `hidden`."""
    if pkg.leaks != RESTORE:
        return result
    todo = passes(result)
    if not todo:
        return result
    theirs = pass_rerunners(pkg, result, result.out_dir / "unrestored", [p.station for p in todo])
    steps = Steps(on_step, ACTION, len(todo))

    def run(i: int, p: Pass, rerunner: Rerunner | RerunError) -> list[TestRecord] | RerunError:
        if isinstance(rerunner, RerunError):
            return rerunner
        steps.started(p.tests[0], len(p.tests))
        try:
            return rerunner.run_in_order(p.tests, f"pass-{i + 1}")
        except RerunError as e:
            return e

    with ThreadPoolExecutor(max_workers=max(1, min(len(todo), os.cpu_count() or 1))) as pool:
        try:
            ran = list(pool.map(run, range(len(todo)), todo, theirs))
        except BaseException:
            # Interrupted (Ctrl-C): the passes under way are killed, not waited for.
            for r in theirs:
                if isinstance(r, Rerunner):
                    r.stop()
            raise
    verdicts, found = [], []
    for p, records, rerunner in zip(todo, ran, theirs, strict=True):
        if isinstance(records, RerunError) or isinstance(rerunner, RerunError):
            message = f"the pass without restores did not run: {records}"
            found.append(Finding("rerun-undecided", "warning", pkg.name, message))
            continue
        for victim in victims(result, records, p.tests):
            prefix = list(p.tests[: p.tests.index(victim)])
            v = replace(cause(rerunner, victim, prefix, p.leakers, budget, on_step), ran_on=p.station)
            verdicts.append(v)
            where = result.locate(v.test)
            found.append(hidden_finding(v, result) or verdict_finding(v, (), where) or flaky(v, where))
    hidden = tuple(v.test for v in verdicts if v.kind == bisect.ORDER_DEPENDENT)
    return replace(
        result,
        findings=result.findings + tuple(found),
        verdicts=result.verdicts + tuple(verdicts),
        hidden=result.hidden + hidden,
    )


def cause(
    rerunner: Rerunner,
    victim: str,
    prefix: list[str],
    leakers: frozenset[str],
    budget: Budget,
    on_step: StepCallback | None,
) -> bisect.Verdict:
    """Bisect over the tests that leaked before `victim`; over all before it when they alone do not do it."""
    suspects = [t for t in prefix if t in leakers]
    v = investigate_one(rerunner, victim, suspects, budget, observed=False, on_step=on_step)
    if v.kind != bisect.NOT_REPRODUCED or len(suspects) == len(prefix):
        return v
    # It passed alone in that classification: that answer is not paid for again.
    again = investigate_one(
        rerunner, victim, prefix, budget, observed=True, alone=bisect.Alone((False,)), on_step=on_step
    )
    return replace(again, reruns=again.reruns + v.reruns - 1)


def hidden_finding(v: bisect.Verdict, result: PackageResult) -> Finding | None:
    """An order-dependent failure that the run did not show, because promote restored state."""
    if v.kind != bisect.ORDER_DEPENDENT or not v.polluters:
        # Failing after any test is no state promote restored: the verdict's own finding says it.
        return None
    named = ", ".join(v.polluters)
    leaked = [leak for leak in result.leaks if leak.test in v.polluters]
    what = "; ".join(f"{leak.test} leaked {', '.join(k for k, _, _ in leak.changes)}" for leak in leaked)
    message = (
        f"passes only because promote restored state: fails after {named} ran earlier in the same process "
        f"when nothing is restored, as plain pytest runs it; passes alone (found in {v.reruns} reruns)"
    )
    message += f"; {what}" if what else ""
    return Finding("order-dependent", "error", v.test, message, cause=named, location=result.locate(v.test))


def flaky(v: bisect.Verdict, location: Location | None = None) -> Finding:
    """A failure of the pass that did not come back (or came back alone): not something restores hid."""
    message = f"failed in the pass without restores only: {v.detail or v.kind} ({v.reruns} reruns)"
    return Finding("flaky", "warning", v.test, message, location=location)
