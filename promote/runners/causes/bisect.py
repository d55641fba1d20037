"""Find every earlier test that makes a test fail: split the tests before it, both halves in one rerun, then confirm.

The oracle runs selections (`subset + [victim]`, each in a fresh process) and says, for each, whether the victim
failed. One request is one pytest call when the plugin can fork the selections from one collected session (see
promote/runners/plugin/forked.py); otherwise each selection is a call of its own, and the calls are counted.

How sure a named polluter is. Think of a race: a victim that fails half the time after any test at all, each
process on its own, and never alone. Each observation of it is then a coin, and the confirmation stops once the
coins it has thrown could have all come out this way with probability at most 2**-CONFIDENCE_BITS (1 in 128):
a split whose two halves disagree (one fails, one passes) is one coin, promote's own no-op test passing before
it is one, and each repeat of the polluter failing again is one. A polluter among N tests takes about log2(N)
splits, so the confirmation after them is short: one call, two repeats of each polluter and of the no-op test.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from promote.core.vocab import FLAKY as FLAKY
from promote.core.vocab import GENUINE as GENUINE
from promote.core.vocab import NOT_REPRODUCED as NOT_REPRODUCED
from promote.core.vocab import ORDER_DEPENDENT as ORDER_DEPENDENT
from promote.core.vocab import UNDECIDED as UNDECIDED
from promote.core.vocab import RerunVerdict
from promote.runners.plugin.forked import NOOP_ID
from promote.runners.rerun_verdict import Verdict as Verdict

Selection = tuple[str, ...]
# What one request showed (per selection: did the victim fail) and how many pytest calls it took.
Observe = Callable[[Sequence[Selection]], tuple[list[bool], int]]

# A race that fails half the time after anything is named with probability at most 2**-CONFIDENCE_BITS.
CONFIDENCE_BITS = 9
# Fewest fresh repeats of each polluter (and of the no-op test) after the search, however sure the search was.
MIN_REPEATS = 2
# Most failing groups followed at once: 64 selections in one call.
MOST_GROUPS = 32
NOOP: Selection = (NOOP_ID,)
OUT_OF_BUDGET = "the rerun budget ran out before an answer"


class CannotTell(Exception):
    """A rerun could not say whether the test failed."""


class BudgetExhausted(CannotTell):
    """The rerun budget ran out before the question was answered."""


class Hung(CannotTell):
    """The test ran past its timeout when run alone: it hangs (or is too slow) by itself."""


class Noisy(Exception):
    """One selection both failed and passed: the failure is flaky, whatever the order."""

    def __init__(self, selection: Selection, results: list[bool]) -> None:
        super().__init__(selection)
        self.selection, self.results = selection, tuple(results)


class Oracle:
    """Counts pytest calls, keeps every result per selection, and stops at the budget.

    A selection seen both failing and passing raises `Noisy` at once: the reruns are for causes, not for
    chasing noise.
    """

    def __init__(self, victim: str, observe: Observe, budget: int) -> None:
        self.victim = victim
        self._observe = observe
        self.budget = budget
        self.used = 0
        self.results: dict[Selection, list[bool]] = {}

    def observe(self, selections: Sequence[Sequence[str]]) -> list[bool]:
        """Each selection afresh, each in a process of its own; `Noisy` once a selection has both failed and passed."""
        if self.used >= self.budget:
            raise BudgetExhausted
        keys = [tuple(s) for s in selections]
        failed, calls = self._observe(keys)
        self.used += calls
        for key, result in zip(keys, failed, strict=True):
            self.note(key, result)
        return failed

    def fails(self, prefix: Sequence[str]) -> bool:
        """Whether the victim failed after `prefix`, from the first time it was run (run now if never)."""
        key = tuple(prefix)
        if key not in self.results:
            return self.observe([key])[0]
        return self.results[key][0]

    def note(self, prefix: Sequence[str], failed: bool) -> None:
        """Record a rerun's result: a selection seen both failing and passing raises `Noisy`."""
        seen = self.results.setdefault(tuple(prefix), [])
        seen.append(failed)
        if len(set(seen)) > 1:
            raise Noisy(tuple(prefix), seen)

    def counts(self, prefix: Sequence[str]) -> str:
        """`k of n after X` (or `alone`) for the results of one selection."""
        seen = self.results.get(tuple(prefix), [])
        return f"{sum(seen)} of {len(seen)} {_selection(prefix)}"


def _selection(prefix: Sequence[str]) -> str:
    if not prefix:
        return "alone"
    if tuple(prefix) == NOOP:
        return "after promote's no-op test"
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
    # The signal that killed the process while the test ran alone, and the last frames of its fatal-error dump.
    signal: str | None = None
    frames: tuple[str, ...] = ()
    # `fails` is a rerun that collected only the test's own module, as `pytest MODULE::TEST` does.
    module_only: bool = False

    @property
    def ran(self) -> int:
        """How many reruns were made (the one that could not tell, and the one without the importers, included)."""
        return len(self.fails) + (self.stopped is not None) + (self.without_importers is False)


def rerun_alone(run: Callable[[Sequence[str]], bool], budget: int) -> Alone:
    """The test alone, once, within `budget` (a failure that repeats alone is genuine)."""
    if budget < 1:
        return Alone()
    try:
        return Alone((run(()),))
    except CannotTell as e:
        return Alone((), e)


@dataclass(frozen=True)
class Search:
    """What splitting the prefix found: tests each of which alone makes the victim fail, or else a group that
    makes it fail only as a whole; and how many splits were a single path (one half failed, the other passed)."""

    singles: tuple[str, ...]
    together: tuple[str, ...] | None
    single_path: int
    more: bool = False  # more failing groups than MOST_GROUPS: some polluters may be left unnamed


def _split(oracle: Oracle, prefix: Sequence[str], hints: Sequence[str] = ()) -> Search:
    """Halve every group known to fail, all halves in one request, until single tests are left.

    `hints`: tests of the prefix already named polluters of another victim of the same run. The first cut is then
    those tests against the rest rather than two halves: a victim that fails after the same polluters as an earlier
    one is found in one request, and any other polluter is still searched for in the rest.
    """
    order = {t: i for i, t in enumerate(prefix)}
    hinted = tuple(_in_order({t for t in hints if t in order}, order))
    groups: list[Selection] = [tuple(prefix)]
    singles: list[str] = []
    together: Selection | None = None
    single_path, more, first = 0, False, True
    while groups:
        singles += [g[0] for g in groups if len(g) == 1]
        splits = [(g[: len(g) // 2], g[len(g) // 2 :]) for g in groups if len(g) > 1]
        if first and 0 < len(hinted) < len(prefix):
            splits = [(hinted, tuple(t for t in prefix if t not in set(hinted)))]
        if not splits:
            break
        if len(splits) > MOST_GROUPS:
            splits, more = splits[:MOST_GROUPS], True
        halves = [half for pair in splits for half in pair]
        failed = oracle.observe(halves + ([NOOP] if first else []))
        if first and failed[-1]:
            # It fails after promote's no-op test too: no earlier test is needed, so none is searched for.
            return Search((), None, 0)
        first = False
        groups = []
        for (a, b), fa, fb in zip(splits, failed[0::2], failed[1::2], strict=False):
            groups += [g for g, f in ((a, fa), (b, fb)) if f]
            if not (fa or fb) and together is None:
                together = a + b
        single_path += len(splits) == 1 and len(groups) == 1
    return Search(tuple(_in_order(singles, order)), together if not singles else None, single_path, more)


def _in_order(subset: Iterable[str], order: dict[str, int]) -> list[str]:
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


def _confirm(oracle: Oracle, suspects: Sequence[Selection], known_bits: int) -> bool:
    """Each suspect selection and promote's no-op test afresh, in one request, as many times as the bound asks.

    True when every suspect failed again each time and the no-op test passed each time; a selection that did
    both raises `Noisy`. A victim that fails after the no-op test as well fails after any test: False.
    """
    seen_noop = len(oracle.results.get(NOOP, []))
    repeats = MIN_REPEATS
    while known_bits + repeats * len(suspects) + seen_noop + repeats < CONFIDENCE_BITS:
        repeats += 1
    failed = oracle.observe([s for s in suspects for _ in range(repeats)] + [NOOP] * repeats)
    return all(failed[: repeats * len(suspects)]) and not any(failed[repeats * len(suspects) :])


def classify(
    victim: str,
    prefix: Sequence[str],
    observe: Observe,
    *,
    budget: int,
    observed: bool = True,
    alone: Alone | None = None,
    hints: Sequence[str] = (),
) -> Verdict:
    """Genuine, flaky or order-dependent (with every polluter that reproduces), from reruns in fresh processes.

    `observed` says the victim was seen failing after the whole `prefix` already (in the run being
    investigated); when it was not, that is rerun first. `alone`: step 1, made already (and paid for).
    `hints`: polluters named for other victims of the same run, tried first (see `_split`).
    """
    oracle = Oracle(victim, observe, budget)

    def verdict(kind: RerunVerdict, polluters: Sequence[str] = (), detail: str = "", each: bool = False) -> Verdict:
        return Verdict(victim, kind, tuple(polluters), oracle.used, detail, each=each)

    try:
        return _classify(oracle, victim, list(prefix), observed, alone, verdict, hints)
    except Noisy as e:
        # The victim alone, as far as it was rerun, says whether it ever failed with nothing before it.
        others = "".join(f", {oracle.counts(s)}" for s in ((), NOOP) if s != e.selection and s in oracle.results)
        return verdict(FLAKY, detail=f"failed {oracle.counts(e.selection)}{others}")
    except Hung as e:
        # Timing out alone is no less a failure of its own than failing alone: nothing earlier caused it.
        return verdict(GENUINE, detail=str(e))
    except BudgetExhausted:
        return verdict(UNDECIDED, detail=f"{OUT_OF_BUDGET} ({oracle.used} of {budget})")
    except CannotTell as e:
        return verdict(UNDECIDED, detail=str(e))


def _classify(
    oracle: Oracle,
    victim: str,
    prefix: list[str],
    observed: bool,
    alone: Alone | None,
    verdict: Callable[..., Verdict],
    hints: Sequence[str],
) -> Verdict:
    # step 1: alone. Failing in the run and again alone, with nothing before it, is a genuine failure:
    # one fresh process is the evidence, and a second would double the cost of every real failure.
    if alone is not None and alone.stopped is not None:
        raise alone.stopped
    if alone is not None and alone.fails:
        oracle.results[()] = list(alone.fails)
    if oracle.fails([]):
        return verdict(GENUINE, detail="fails when run alone")
    if not prefix:
        if alone is not None and alone.module_only and oracle.observe([NOOP])[0]:
            return _by_collection(oracle, victim)
        return verdict(FLAKY, detail="failed in the run with no test before it; passes alone")
    if not observed and not oracle.fails(prefix):
        return verdict(NOT_REPRODUCED, detail="passes alone and after the tests that ran before it")
    # step 2: split, both halves in one request, following every half that fails.
    found = _split(oracle, prefix, hints)
    if oracle.results.get(NOOP) == [True]:
        # It failed after promote's no-op test, which changes nothing: confirmed on that control alone (a mixed
        # result raises Noisy), never on tests of the suite, which may be polluters themselves.
        if alone is not None and alone.module_only:
            return _by_collection(oracle, victim)
        _confirm(oracle, [], 0)
        return verdict(ORDER_DEPENDENT, detail=f"{oracle.counts(NOOP)}, {oracle.counts([])}")
    if len(found.singles) > 2 and len(found.singles) == len(prefix):
        # Every test before it makes it fail, and promote's no-op test does not: something each test of the suite
        # does (an autouse fixture, a hook). Confirmed on the first, a middle and the last of them.
        picked = [(t,) for t in dict.fromkeys((prefix[0], prefix[len(prefix) // 2], prefix[-1]))]
        if _confirm(oracle, picked, found.single_path):
            detail = f"each of the {len(prefix)} tests before it: {_detail(oracle, picked, False)}"
            return verdict(ORDER_DEPENDENT, detail=detail, each=True)
        return verdict(FLAKY, detail=f"the failure did not reproduce ({_detail(oracle, picked, False)})")
    if found.singles:
        suspects = [(t,) for t in found.singles]
        if _confirm(oracle, suspects, found.single_path):
            return verdict(ORDER_DEPENDENT, found.singles, _detail(oracle, suspects, found.more), each=True)
        return verdict(FLAKY, detail=f"the failure did not reproduce ({_detail(oracle, suspects, False)})")
    # step 3: no single test does it: does the whole prefix still? then the smallest group that does, together.
    if not oracle.observe([tuple(prefix)])[0]:
        counts = f"{oracle.counts(prefix)}, {oracle.counts([])}"
        return verdict(FLAKY, detail=f"failed in the run; passes alone and after the same tests ({counts})")
    order = {t: i for i, t in enumerate(prefix)}
    group = _in_order(_minimize(oracle, list(found.together or prefix), [], order), order)
    if _confirm(oracle, [tuple(group)], 0):
        return verdict(ORDER_DEPENDENT, group, _detail(oracle, [tuple(group)], False))
    return verdict(FLAKY, detail=f"the failure did not reproduce ({_detail(oracle, [tuple(group)], False)})")


def _by_collection(oracle: Oracle, victim: str) -> Verdict:
    """Alone it collected only its own module and passed; after the no-op test, with the whole package collected as
    in the run, it failed: confirmed on that control alone (a mixed result raises Noisy)."""
    _confirm(oracle, [], 0)
    detail = f"{oracle.counts(NOOP)}, {oracle.counts([])}"
    return Verdict(victim, ORDER_DEPENDENT, (), oracle.used, detail, by_collection=True)


def _detail(oracle: Oracle, suspects: Sequence[Selection], more: bool) -> str:
    counts = [oracle.results.get(s, []) for s in suspects]
    if len(suspects) > 3 and all(c == counts[0] for c in counts):
        # Many polluters seen alike: one count for all, rather than each test's id again.
        shown = f"{sum(counts[0])} of {len(counts[0])} after each of them"
    else:
        shown = ", ".join(oracle.counts(s) for s in suspects)
    tail = f"; more than {MOST_GROUPS} groups failed, so some polluters may be unnamed" if more else ""
    return f"{shown}, {oracle.counts([])}, {oracle.counts(NOOP)}{tail}"
