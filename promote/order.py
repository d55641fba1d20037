"""Name the cause of order-dependent failures: rerun each failed test alone, then bisect its prefix."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from promote import journal
from promote.config import Config, PackageConfig
from promote.findings import Finding
from promote.runners import bisect, progress
from promote.runners.rerun import RerunError, Rerunner
from promote.runners.summary import PackageResult

FAILED = ("failed", "error")


@dataclass
class Budget:
    """Reruns left for the whole run; shared by every failed test of every package."""

    left: int


def orders(out_dir: Path) -> list[list[str]]:
    """The tests each worker process started, in the order it started them (one list per process)."""
    found = []
    for path in sorted(out_dir.glob("*/progress-*.jsonl")):
        current: list[str] = []
        for event in progress.read_progress(path):
            if event.event == "session":
                # A replaced worker appends to the same log: a new process, a new order.
                if current:
                    found.append(current)
                current = []
            elif event.event == "start" and event.nodeid is not None:
                current.append(event.nodeid)
        if current:
            found.append(current)
    return found


def prefix_of(victim: str, worker_orders: list[list[str]]) -> list[str] | None:
    """The tests that ran before `victim` in the same process, or None when it never started."""
    for order in reversed(worker_orders):
        if victim in order:
            return order[: order.index(victim)]
    return None


def failed_tests(result: PackageResult) -> list[str]:
    """Top-level ids of tests that failed (or whose subtests failed); crashes and timeouts excluded."""
    skip = set(result.crashed_tests) | {f.subject for f in result.findings if f.check == "timeout"}
    skip |= set(result.blocked_tests)  # a missing requirement, not an earlier test, stopped these
    ids: list[str] = []
    for t in result.tests:
        top = t.parent or t.nodeid
        # index 0: a module that failed to collect; there is no test to rerun.
        if t.outcome in FAILED and t.index > 0 and top not in skip and top not in ids:
            ids.append(top)
    return ids


def verdict_finding(v: bisect.Verdict, leaks: Sequence[Finding]) -> Finding | None:
    if v.kind == bisect.ORDER_DEPENDENT:
        named = ", ".join(v.polluters)
        message = f"fails only after {named} ran earlier in the same process; passes alone (found in {v.reruns} reruns)"
        leaked = [f"{f.subject} leaked: {f.message}" for f in leaks if f.subject in v.polluters]
        if leaked:
            message += "; " + "; ".join(leaked)
        return Finding("order-dependent", "error", v.test, message, cause=named)
    if v.kind == bisect.FLAKY:
        return Finding("flaky", "warning", v.test, f"flaky: {v.detail} ({v.reruns} reruns)")
    if v.kind == bisect.UNDECIDED:
        return Finding("rerun-undecided", "warning", v.test, f"undecided whether order-dependent: {v.detail}")
    return None


def investigate_one(
    rerunner: Rerunner, victim: str, prefix: list[str], budget: Budget, *, observed: bool
) -> bisect.Verdict:
    def run(subset: Sequence[str]) -> bool:
        try:
            return rerunner.fails(subset, victim)
        except RerunError as e:
            raise bisect.CannotTell(str(e)) from None

    verdict = bisect.classify(victim, prefix, run, budget=budget.left, observed=observed)
    budget.left -= verdict.reruns
    return verdict


def investigate(pkg: PackageConfig, result: PackageResult, budget: Budget) -> PackageResult:
    """Classify every failed test of one package run; add findings and verdicts to its result."""
    victims = failed_tests(result)
    if not victims:
        return result
    station = result.out_dir.parent / "station.json"
    rerunner = Rerunner(
        pkg, pkg.python or sys.executable, result.out_dir / "reruns", station if station.is_file() else None
    )
    worker_orders = orders(result.out_dir)
    leaks = [f for f in result.findings if f.check == "leaked-state"]
    verdicts = []
    for victim in victims:
        prefix = prefix_of(victim, worker_orders) or []
        verdicts.append(investigate_one(rerunner, victim, prefix, budget, observed=True))
    found = [f for v in verdicts if (f := verdict_finding(v, leaks)) is not None]
    return replace(result, findings=result.findings + tuple(found), verdicts=tuple(verdicts))


def bisect_by_hand(
    config: Config, pkg: PackageConfig, victim: str, *, last_run: Path | None
) -> tuple[bisect.Verdict, Finding | None, int]:
    """`promote bisect`: from the last run's order when it has the test, else from collection order."""
    base = journal.state_dir(config.root) / "bisect" / journal.new_run_id()
    station = last_run.parent / "station.json" if last_run is not None else None
    rerunner = Rerunner(pkg, pkg.python or sys.executable, base, station if station and station.is_file() else None)
    prefix = prefix_of(victim, orders(last_run)) if last_run is not None else None
    observed = False
    if prefix is None:
        through = rerunner.run_through(victim)
        if through is None:
            raise RerunError(f"{victim} is not a test of package {pkg.name}")
        prefix, observed = through
        if not observed:
            verdict = bisect.Verdict(victim, bisect.NOT_REPRODUCED, reruns=1, detail="passes after the tests before it")
            return verdict, None, rerunner.invocations
    verdict = investigate_one(rerunner, victim, prefix, Budget(config.max_reruns), observed=observed)
    return verdict, verdict_finding(verdict, []), rerunner.invocations
