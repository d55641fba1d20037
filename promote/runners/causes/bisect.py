"""Find the smallest set of earlier tests that makes a test fail: halve the prefix, then verify.

The oracle runs `subset + [victim]` in a fresh process and says whether the victim failed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from promote.core.vocab import FLAKY as FLAKY
from promote.core.vocab import GENUINE as GENUINE
from promote.core.vocab import NOT_REPRODUCED as NOT_REPRODUCED
from promote.core.vocab import ORDER_DEPENDENT as ORDER_DEPENDENT
from promote.core.vocab import UNDECIDED as UNDECIDED
from promote.core.vocab import RerunVerdict
from promote.runners.rerun_verdict import Verdict as Verdict


class CannotTell(Exception):
    """A rerun could not say whether the test failed."""


class BudgetExhausted(CannotTell):
    """The rerun budget ran out before the question was answered."""


class Hung(CannotTell):
    """The test ran past its timeout when run alone: it hangs (or is too slow) by itself."""


# How many times a selection must fail (and the victim alone pass) before a polluter is named.
REPEATS = 4


class Noisy(Exception):
    """One selection both failed and passed: the failure is flaky, whatever the order."""

    def __init__(self, selection: tuple[str, ...], results: list[bool]) -> None:
        super().__init__(selection)
        self.selection, self.results = selection, tuple(results)


class Oracle:
    """Counts and caches reruns, keeps every result per selection, and stops at the budget.

    A selection seen both failing and passing raises `Noisy` at once: the reruns are for causes, not for
    chasing noise.
    """

    def __init__(self, victim: str, run: Callable[[Sequence[str]], bool], budget: int) -> None:
        self.victim = victim
        self._run = run
        self.budget = budget
        self.used = 0
        self.results: dict[tuple[str, ...], list[bool]] = {}

    def fails(self, prefix: Sequence[str]) -> bool:
        key = tuple(prefix)
        if key not in self.results:
            return self.fails_fresh(key)
        return self.results[key][0]

    def fails_fresh(self, prefix: Sequence[str]) -> bool:
        """A rerun that is not answered from the cache (to tell flaky from stable)."""
        if self.used >= self.budget:
            raise BudgetExhausted
        self.used += 1
        key = tuple(prefix)
        failed = self._run(key)
        self.note(key, failed)
        return failed

    def note(self, prefix: Sequence[str], failed: bool) -> None:
        """Record a rerun's result: a selection seen both failing and passing raises `Noisy`."""
        seen = self.results.setdefault(tuple(prefix), [])
        seen.append(failed)
        if len(set(seen)) > 1:
            raise Noisy(tuple(prefix), seen)

    def repeat(self, prefix: Sequence[str], times: int = REPEATS) -> bool:
        """Whether `prefix` failed on each of `times` runs (those already made count); stops at the first pass."""
        key = tuple(prefix)
        while len(self.results.get(key, [])) < times:
            if not self.fails_fresh(key):
                return False
        return all(self.results[key])

    def counts(self, prefix: Sequence[str]) -> str:
        """`k of n after X` (or `alone`) for the results of one selection."""
        seen = self.results.get(tuple(prefix), [])
        return f"{sum(seen)} of {len(seen)} {_selection(prefix)}"


def _selection(prefix: Sequence[str]) -> str:
    if not prefix:
        return "alone"
    shown = ", ".join(prefix[:3]) + (f" and {len(prefix) - 3} more" if len(prefix) > 3 else "")
    return f"after {shown}"


@dataclass(frozen=True)
class Alone:
    """Step 1, run ahead for every failed test at once: the reruns of the test alone (True: it failed)."""

    fails: tuple[bool, ...] = ()
    # Why the next rerun alone could not tell (raised again when classify gets there).
    stopped: CannotTell | None = None
    # The rerun alone with the modules that changed state when imported left out of collection: True, it failed
    # there too (its own failure; `fails` is that answer); False, it passed there (`fails` is the rerun with the
    # run's whole collection, made after it); None, not made.
    without_importers: bool | None = None

    @property
    def replayed(self) -> int:
        """The reruns `replaying` answers classify's from (the one that could not tell included)."""
        return len(self.fails) + (self.stopped is not None)

    @property
    def ran(self) -> int:
        """How many reruns were made: those replayed, and the one without the importers that `fails` does not hold."""
        return self.replayed + (self.without_importers is False)


def rerun_alone(run: Callable[[Sequence[str]], bool], budget: int) -> Alone:
    """The test alone, once, within `budget` (a failure that repeats alone is genuine)."""
    fails: list[bool] = []
    try:
        while len(fails) < min(budget, 1):
            fails.append(run(()))
    except CannotTell as e:
        return Alone(tuple(fails), e)
    return Alone(tuple(fails))


def replaying(alone: Alone, run: Callable[[Sequence[str]], bool]) -> Callable[[Sequence[str]], bool]:
    """`run`, answering the reruns alone from `alone` as long as it has answers."""
    left = list(alone.fails)

    def replay(prefix: Sequence[str]) -> bool:
        if not prefix and left:
            return left.pop(0)
        if not prefix and alone.stopped is not None:
            raise alone.stopped
        return run(prefix)

    return replay


def _in_order(subset: Sequence[str], order: dict[str, int]) -> list[str]:
    return sorted(subset, key=order.__getitem__)


def _minimize(oracle: Oracle, candidates: list[str], fixed: list[str], order: dict[str, int]) -> list[str]:
    """Smallest part of `candidates` that, run with `fixed`, still makes the victim fail (ddmin by halves)."""
    while len(candidates) > 1:
        half = len(candidates) // 2
        first, second = candidates[:half], candidates[half:]
        if oracle.fails(_in_order(fixed + first, order)):
            candidates = first
        elif oracle.fails(_in_order(fixed + second, order)):
            candidates = second
        else:
            # Neither half pollutes alone: something from each half is needed together.
            first = _minimize(oracle, first, fixed + second, order)
            second = _minimize(oracle, second, fixed + first, order)
            return first + second
    return candidates


def _fast_halving(oracle: Oracle, candidates: list[str]) -> list[str]:
    """One rerun per halving, assuming a single polluter (the common case); verified afterwards."""
    while len(candidates) > 1:
        half = len(candidates) // 2
        first = candidates[:half]
        candidates = first if oracle.fails(first) else candidates[half:]
    return candidates


def _reproduces(oracle: Oracle, polluters: Sequence[str], prefix: Sequence[str]) -> bool:
    """Whether the victim fails after `polluters` on every one of REPEATS runs, and alone on none.

    Then the controls: the victim after the tests next to the polluters (before and after), REPEATS
    times each. A control that both fails and passes (`Noisy`) shows a failure after whatever ran
    before it, the mark of a race; one that always passes or always fails (another polluter) leaves the
    polluters as found. Two controls, not one: a race passes the polluter's repeats and one consistent
    control about one time in a hundred, and both controls about one in a thousand.
    """
    if not (oracle.repeat(polluters) and _passes_alone(oracle)):
        return False
    for control in _neighbours(polluters, prefix):
        while len(oracle.results.get((control,), [])) < REPEATS:
            oracle.fails_fresh([control])
    return True


def _neighbours(polluters: Sequence[str], prefix: Sequence[str]) -> list[str]:
    """The tests nearest before the first polluter and after the last that are none of them (at most two)."""
    order = list(prefix)
    others = [t for t in order if t not in polluters]
    before = [t for t in order[: order.index(polluters[0])] if t not in polluters]
    after = [t for t in order[order.index(polluters[-1]) + 1 :] if t not in polluters]
    chosen = ([before[-1]] if before else []) + ([after[0]] if after else [])
    # At the edge of the prefix, the nearest others on the one side there is.
    return chosen if len(chosen) == 2 or len(others) < 2 else (others[-2:] if before else others[:2])


def _passes_alone(oracle: Oracle) -> bool:
    # Alone again until REPEATS runs: a failure among them makes the results mixed, so `Noisy`.
    while len(oracle.results.get((), [])) < REPEATS:
        oracle.fails_fresh([])
    return not any(oracle.results[()])


def classify(
    victim: str, prefix: Sequence[str], run: Callable[[Sequence[str]], bool], *, budget: int, observed: bool = True
) -> Verdict:
    """Genuine, flaky or order-dependent (with the polluters), from reruns in fresh processes.

    `observed` says the victim was seen failing after the whole `prefix` already (in the run
    being investigated); when it was not, that is rerun first. A polluter is named only when the
    victim failed after it on each of REPEATS runs and passed alone on each of REPEATS; a selection
    that both failed and passed makes the verdict flaky at once, with the counts seen.
    """
    oracle = Oracle(victim, run, budget)
    order = {t: i for i, t in enumerate(prefix)}

    def verdict(kind: RerunVerdict, polluters: Sequence[str] = (), detail: str = "") -> Verdict:
        return Verdict(victim, kind, tuple(polluters), oracle.used, detail)

    def confirmed(polluters: Sequence[str]) -> Verdict:
        controls = _neighbours(polluters, prefix)
        shown = "".join(f", {oracle.counts([c])}" for c in controls)
        detail = f"{oracle.counts(polluters)}, {oracle.counts([])}{shown}"
        if len(polluters) == 1 and controls and all(all(oracle.results[(c,)]) for c in controls):
            # It failed after every test tried, each time: naming one of them would be naming an arbitrary
            # test. No polluters: the victim fails after any test (it needs to run first in its process).
            return verdict(ORDER_DEPENDENT, (), detail)
        return verdict(ORDER_DEPENDENT, polluters, detail)

    try:
        # step 1: alone. Failing in the run and again alone, with nothing before it, is a genuine failure:
        # one fresh process is the evidence, and a second would double the cost of every real failure.
        if oracle.fails_fresh([]):
            return verdict(GENUINE, detail="fails when run alone")
        if not prefix:
            return verdict(FLAKY, detail="failed in the run with no test before it; passes alone")
        if not observed and not oracle.fails(list(prefix)):
            return verdict(NOT_REPRODUCED, detail="passes alone and after the tests that ran before it")
        # step 2: one rerun per halving, as if one test pollutes; then see it happen afresh, REPEATS times.
        suspect = _fast_halving(oracle, list(prefix))
        if _reproduces(oracle, suspect, prefix):
            return confirmed(suspect)
        # step 3: no single polluter reproduced: does the whole prefix still do it? then ddmin.
        if not oracle.fails_fresh(list(prefix)):
            counts = f"{oracle.counts(list(prefix))}, {oracle.counts([])}"
            return verdict(FLAKY, detail=f"failed in the run; passes alone and after the same tests ({counts})")
        found = _in_order(_minimize(oracle, list(prefix), [], order), order)
        if _reproduces(oracle, found, prefix):
            return confirmed(found)
        counts = f"{oracle.counts(found)}, {oracle.counts([])}"
        return verdict(FLAKY, detail=f"the failure did not reproduce consistently ({counts})")
    except Noisy as e:
        # The victim alone, as far as it was rerun, says whether it ever failed with nothing before it.
        alone = "" if e.selection == () else f", {oracle.counts([])}"
        return verdict(FLAKY, detail=f"failed {oracle.counts(e.selection)}{alone}")
    except Hung as e:
        # Timing out alone is no less a failure of its own than failing alone: nothing earlier caused it.
        return verdict(GENUINE, detail=str(e))
    except BudgetExhausted:
        return verdict(UNDECIDED, detail=f"the rerun budget ({budget}) ran out before an answer")
    except CannotTell as e:
        return verdict(UNDECIDED, detail=str(e))
