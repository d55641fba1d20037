"""Name the cause of order-dependent failures: rerun each failed test alone, then bisect its prefix."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence, Set
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TypeVar

from promote.config import Config, PackageConfig
from promote.core import state
from promote.core.findings import Finding
from promote.core.vocab import CRASHES_ALONE, is_red
from promote.runners.causes import bisect, groups, imports, station_rerun
from promote.runners.causes.budget import Budget, out_of_budget
from promote.runners.causes.fleet_causes import across, rerunners, unreachable
from promote.runners.causes.rerun import RerunError, Rerunner, Seen
from promote.runners.causes.verdict_findings import verdict_finding
from promote.runners.configuration import chosen, locate, rootdir_of
from promote.runners.plugin import progress
from promote.runners.plugin.records import read_all_results
from promote.runners.rerun_verdict import Group
from promote.runners.summary import PackageResult

A = TypeVar("A")
B = TypeVar("B")
R = TypeVar("R")


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
    """Top-level ids of tests that failed (or whose subtests failed) or whose process died; timeouts excluded."""
    skip = {f.subject for f in result.findings if f.check == "timeout"}
    skip |= set(result.blocked_tests)  # a missing requirement, not an earlier test, stopped these
    ids: list[str] = []
    for t in result.tests:
        top = t.parent or t.nodeid
        # index 0: a module that failed to collect; there is no test to rerun.
        if is_red(t.outcome) and t.index > 0 and top not in skip and top not in ids:
            ids.append(top)
    # A test whose process died is investigated like a failure: alone first, where it crashes again or not.
    return ids + [t for t in result.crashed_tests if t not in skip and t not in ids]


@dataclass(frozen=True)
class Step:
    """A rerun about to start, for a live line: `alone` or `bisect`, the test, and this is k of n."""

    action: str
    test: str
    k: int
    n: int
    before: int = 0  # how many tests run ahead of it in this rerun (the most, of the selections it runs)
    side: int = 1  # selections this rerun runs, each in a process of its own


StepCallback = Callable[[Step], None]


class Steps:
    """Counts reruns as they start and tells `on_step` (thread-safe: reruns alone run concurrently)."""

    def __init__(self, on_step: StepCallback | None, action: str, n: int) -> None:
        self.on_step, self.action, self.n, self.k = on_step, action, n, 0
        self.lock = threading.Lock()

    def started(self, test: str, before: int, side: int = 1) -> None:
        if self.on_step is None:
            return
        with self.lock:
            self.k += 1
            self.n = max(self.n, self.k)
            self.on_step(Step(self.action, test, self.k, self.n, before, side))


def oracle(
    rerunner: Rerunner, victim: str, steps: Steps | None = None, ignore: Sequence[str] = ()
) -> Callable[[Sequence[str]], bool]:
    """Whether `victim` fails after the given tests, in a fresh process; `ignore`: modules left out of collection."""
    observe = observer(rerunner, victim, steps, ignore)
    return lambda subset: observe([tuple(subset)])[0][0]


def observer(
    rerunner: Rerunner,
    victim: str,
    steps: Steps | None = None,
    ignore: Sequence[str] = (),
    seen: list[Seen] | None = None,
    only: str | None = None,
) -> bisect.Observe:
    """bisect's view of a request: whether `victim` failed after each selection, and the pytest calls it took.
    `seen`: where to keep what each selection showed (a crash's signal and frames); `only`: the one module
    collected (else the whole package, as in the run)."""

    def run(selections: Sequence[bisect.Selection]) -> tuple[list[bool], int]:
        if steps is not None:
            steps.started(victim, max(map(len, selections), default=0), len(selections))
        try:
            shown, calls = rerunner.observe(selections, victim, ignore=ignore, only=only)
        except RerunError as e:
            raise bisect.CannotTell(str(e)) from None
        for selection, one in zip(selections, shown, strict=True):
            if one.timed_out and not selection:
                raise bisect.Hung(
                    f"{victim} ran longer than the package's timeout ({rerunner.pkg.timeout_s:g} s) and was killed"
                )
        if seen is not None:
            seen.extend(shown)
        # Hanging only after other tests is failing after them.
        return [one.failed for one in shown], calls

    return run


def investigate_one(
    rerunner: Rerunner,
    victim: str,
    prefix: list[str],
    budget: Budget,
    *,
    observed: bool,
    alone: bisect.Alone | None = None,
    on_step: StepCallback | None = None,
    share: int | None = None,
    hints: Sequence[str] = (),
) -> bisect.Verdict:
    """Classify one failed test; `alone`: its reruns alone, already made (and paid for); `share`: the most of the
    budget it may take (all that is left by default); `hints`: polluters of earlier victims, tried first."""
    if alone is not None and alone.fails[:1] == (True,) and alone.signal is not None:
        return crashes_alone(victim, alone)
    granted = budget.take(budget.left if share is None else share, by=victim)
    # About log2 of the prefix, plus the confirmation; the count grows if the search takes more.
    steps = Steps(on_step, "bisect", max(1, len(prefix)).bit_length() + 1)
    verdict = bisect.classify(
        victim, prefix, observer(rerunner, victim, steps), budget=granted, observed=observed, alone=alone, hints=hints
    )
    budget.give(max(0, granted - verdict.reruns), by=victim)
    if verdict.kind == bisect.UNDECIDED and verdict.detail.startswith(bisect.OUT_OF_BUDGET):
        verdict = replace(verdict, detail=out_of_budget(budget, victim, granted, verdict.reruns))
    return replace(verdict, reruns=verdict.reruns + (alone.ran if alone else 0))


def crashes_alone(victim: str, alone: bisect.Alone) -> bisect.Verdict:
    """A test whose process dies when it runs alone: its own crash, with the signal and where it happened."""
    frames = f"; last frames: {' <- '.join(alone.frames)}" if alone.frames else ""
    detail = f"its process died of {alone.signal} when it ran alone{frames}"
    return bisect.Verdict(victim, CRASHES_ALONE, (), alone.ran, detail)


def rerun_alone(
    rerunner: Rerunner,
    victims: Sequence[str],
    budget: Budget,
    on_step: StepCallback | None = None,
    importers: Sequence[str] = (),
) -> list[bisect.Alone]:
    """Every victim alone, at once on the free cores: each one's step 1 depends on no other victim.

    Alone is as `pytest MODULE::TEST` runs it: only the victim's own module collected. Failing there, the failure
    is its own. Where other modules changed state when imported (`importers`), a victim that passed so is rerun
    alone once more with the whole package collected, as in the run, to tell an import's failure from an
    earlier test's.

    The budget is set aside in victim order before any rerun starts, so which victims get reruns
    does not depend on which rerun ends first: first one rerun alone for each victim, then the second (with
    the whole package) for those that have suspects, as far as the budget goes.
    """
    suspected = [imports.suspects_of(v, importers) for v in victims]
    grants = [budget.take(1, by=v) for v in victims]
    grants = [
        g + (budget.take(1, by=v) if suspects and g else 0)
        for v, g, suspects in zip(victims, grants, suspected, strict=True)
    ]
    steps = Steps(on_step, "alone", sum(grants))

    def alone(victim: str, given: tuple[int, list[str]]) -> bisect.Alone:
        granted, suspects = given
        if granted < 1:
            return bisect.Alone()
        whole = bool(suspects) and granted >= 2
        try:
            seen: list[Seen] = []
            failed = observer(rerunner, victim, steps, seen=seen, only=module_of(victim))([()])[0][0]
            first = seen[0] if seen else Seen(failed)
            if failed or not whole:
                return bisect.Alone((failed,), None, True if whole else None, first.signal, first.frames, True)
            seen = []
            failed = observer(rerunner, victim, steps, seen=seen)([()])[0][0]
        except bisect.CannotTell as e:
            return bisect.Alone((), e, without_importers=False if whole else None)
        first = seen[0] if seen else Seen(failed)
        return bisect.Alone((failed,), None, False, first.signal, first.frames)

    found = on_free_cores(rerunner, alone, victims, list(zip(grants, suspected, strict=True)))
    for victim, g, a in zip(victims, grants, found, strict=True):
        budget.give(g - a.ran, by=victim)
    return found


def module_of(test: str) -> str:
    """The module a test id is in, relative to the rootdir (`tests/test_a.py::T::t` -> `tests/test_a.py`)."""
    return test.split("::", 1)[0]


def on_free_cores(rerunner: Rerunner, work: Callable[[A, B], R], firsts: Sequence[A], seconds: Sequence[B]) -> list[R]:
    """`work` over the pairs, at once on the free cores (each pair's reruns depend on no other's), in their order."""
    workers = max(1, min(len(firsts), os.cpu_count() or 1))
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="rerun")
    try:
        return list(pool.map(work, firsts, seconds))
    except BaseException:
        # Interrupted (Ctrl-C): the reruns under way are killed, not waited for, and no more start.
        rerunner.stop()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def investigate(
    pkg: PackageConfig,
    result: PackageResult,
    budget: Budget,
    on_step: StepCallback | None = None,
    *,
    only: Set[str] | None = None,
) -> PackageResult:
    """Classify every failed test of one package run (those in `only`, when given); add findings and verdicts to
    its result. Failures of one cause are rerun as a group, and said once (`groups`)."""
    victims = [t for t in failed_tests(result) if only is None or t in only]
    far = unreachable(result, victims)
    victims = [t for t in victims if t not in {v.test for v in far}]
    verdicts: list[bisect.Verdict] = []
    shared: list[Group] = []
    # Over a fleet, each failure is rerun on the station where it failed, with the tests that ran before it there.
    for rerunner, chunk in rerunners(pkg, result, victims):
        shown, agreed = _verdicts(rerunner, chunk, result, budget, on_step)
        if isinstance(rerunner, station_rerun.StationRerunner):
            shown = across(pkg, result, rerunner, [replace(v, ran_on=rerunner.place.name) for v in shown], budget)
        verdicts += shown
        shared += agreed
    verdicts += far
    leaks = [f for f in result.findings if f.check == "leaked-state"]
    by_test = {v.test: v for v in verdicts}
    in_groups = {t for g in shared for t in g.tests}
    found = [
        f for g in shared if (f := groups.group_finding(g, [by_test[t] for t in g.sample], leaks, result)) is not None
    ]
    found += [
        f
        for v in verdicts
        if v.test not in in_groups and (f := verdict_finding(v, leaks, result.locate(v.test))) is not None
    ]
    # A crash that repeats alone is said once, with its signal and frames, in place of the run's own line.
    alone_crashes = {v.test for v in verdicts if v.kind == CRASHES_ALONE}
    kept = tuple(f for f in result.findings if not (f.check == "worker-crash" and f.subject in alone_crashes))
    if not verdicts:
        return result
    return replace(result, findings=kept + tuple(found), verdicts=tuple(verdicts), groups=tuple(shared))


def _verdicts(
    rerunner: Rerunner, victims: list[str], result: PackageResult, budget: Budget, on_step: StepCallback | None
) -> tuple[list[bisect.Verdict], list[Group]]:
    """Every victim's verdict, in victim order, and the groups of one cause whose sampled members agreed.

    Only a group's sample is rerun; where the sample disagrees, its other members are rerun one by one after.
    """
    cause_groups, singles = groups.cause_groups(result, victims)
    picked = sorted({*singles, *(t for g in cause_groups for t in g.sample)})
    found = dict(zip(picked, _rerun(rerunner, picked, result, budget, on_step), strict=True))
    agreed, rest = [], []
    for g in cause_groups:
        sample = [found[t] for t in g.sample]
        if groups.agree(sample):
            agreed.append(g)
            found.update({t: groups.inherited(g, sample[0], t) for t in g.tests if t not in found})
        else:
            rest += [t for t in g.tests if t not in found]
    if rest:
        found.update(zip(rest, _rerun(rerunner, rest, result, budget, on_step), strict=True))
    return [found[v] for v in victims], agreed


def _rerun(
    rerunner: Rerunner, victims: list[str], result: PackageResult, budget: Budget, on_step: StepCallback | None
) -> list[bisect.Verdict]:
    worker_orders = orders(result.out_dir)
    modules = imports.importers(result.leaks)
    alone = rerun_alone(rerunner, victims, budget, on_step, modules)
    # Bisection, in victim order: the budget left for each one does not depend on timing. Each victim still to be
    # bisected gets an equal share of what is left; what one does not spend goes to those after it.
    # Victims after the same polluters share its search: each one named is tried first for the victims after it.
    searched = [done.fails == (False,) for done in alone]
    verdicts: list[bisect.Verdict] = []
    for i, (victim, done) in enumerate(zip(victims, alone, strict=True)):
        share = budget.left // max(1, sum(searched[i:])) if searched[i] else 0
        prefix = prefix_of(victim, worker_orders) or []
        named = [p for v in verdicts if v.kind == bisect.ORDER_DEPENDENT for p in v.polluters]
        verdicts.append(
            investigate_one(
                rerunner, victim, prefix, budget, observed=True, alone=done, on_step=on_step, share=share, hints=named
            )
        )
    if modules:
        verdicts = _by_import(rerunner, verdicts, modules, budget, [a.without_importers for a in alone])
    return verdicts


def _by_import(
    rerunner: Rerunner,
    verdicts: list[bisect.Verdict],
    modules: list[str],
    budget: Budget,
    without: list[bool | None],
) -> list[bisect.Verdict]:
    """`imports.by_import` of each genuine failure within the run's rerun budget (each needs all of its reruns, or
    none, set aside in victim order before any starts), at once on the free cores: each collects the whole package.
    `without`: per victim, whether its rerun alone without the importers failed (True: its own failure, not asked
    again), passed (False: by_import's first rerun, made already), or was not made (None)."""
    most = imports.MOST_MODULES + 2
    grants = []
    for v, w in zip(verdicts, without, strict=True):
        granted = budget.take(most, by=v.test) if v.kind == bisect.GENUINE and w is not True else 0
        if granted < most:
            budget.give(granted, by=v.test)
            granted = 0
        grants.append(granted)

    def one(verdict: bisect.Verdict, given: tuple[int, bool | None]) -> bisect.Verdict:
        granted, passed = given[0], given[1] is False
        return imports.by_import(rerunner, verdict, modules, passed_without=passed) if granted else verdict

    found = on_free_cores(rerunner, one, verdicts, list(zip(grants, without, strict=True)))
    for v, f, g in zip(verdicts, found, grants, strict=True):
        budget.give(g - (f.reruns - v.reruns) if g else 0, by=v.test)
    return found


def bisect_by_hand(
    config: Config, pkg: PackageConfig, victim: str, *, last_run: Path | None, on_step: StepCallback | None = None
) -> tuple[bisect.Verdict, Finding | None, int]:
    """`promote bisect`: from the last run's order when it has the test, else from collection order."""
    base = state.bisect_dir(config.root) / state.new_run_id()
    station = last_run.parent / "station.json" if last_run is not None else None
    rerunner = Rerunner(pkg, pkg.interpreter, base, station if station and station.is_file() else None)
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
    verdict = investigate_one(rerunner, victim, prefix, Budget(config.max_reruns), observed=observed, on_step=on_step)
    package = rootdir_of(config.root, pkg.path)
    # Node ids are rooted where pytest chose its rootdir (a configuration above the package moves it).
    workers = [] if last_run is None else [w for part in sorted(last_run.iterdir()) if part.is_dir()
                                           for w in read_all_results(part)]  # fmt: skip
    where = locate(chosen(package, workers).rootdir, victim)
    return verdict, verdict_finding(verdict, [], where), rerunner.invocations
