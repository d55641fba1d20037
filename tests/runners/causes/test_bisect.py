"""The bisection algorithm, against deterministic oracles (the end-to-end runs live in test_order.py)."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

from promote.runners.causes.bisect import (
    FLAKY,
    GENUINE,
    ORDER_DEPENDENT,
    REPEATS,
    UNDECIDED,
    Alone,
    CannotTell,
    Hung,
    classify,
    replaying,
    rerun_alone,
)

TESTS = [f"t{i:03d}" for i in range(200)]


def polluted_by(*polluters: str):  # type: ignore[no-untyped-def]
    calls: list[tuple[str, ...]] = []

    def run(prefix: Sequence[str]) -> bool:
        calls.append(tuple(prefix))
        return all(p in prefix for p in polluters)

    return run, calls


def test_single_polluter_found_within_log2_reruns_plus_the_repeats_that_confirm_it() -> None:
    run, calls = polluted_by("t037")
    verdict = classify("t180", TESTS[:180], run, budget=50)
    assert verdict.kind == ORDER_DEPENDENT
    assert verdict.polluters == ("t037",)
    # Named only after failing on each of 4 runs after it and passing on each of 4 alone, and on none
    # of 4 after the tests either side of it (controls: a race fails after any test).
    assert verdict.detail == "4 of 4 after t037, 0 of 4 alone, 0 of 4 after t036, 0 of 4 after t038"
    assert calls.count(("t037",)) == calls.count(()) == calls.count(("t036",)) == calls.count(("t038",)) == REPEATS
    assert REPEATS == 4
    assert verdict.reruns == len(calls) <= math.ceil(math.log2(200)) + 4 * REPEATS


def test_every_position_of_a_single_polluter_is_found() -> None:
    for i in range(0, 180, 7):
        run, _ = polluted_by(TESTS[i])
        assert classify("t180", TESTS[:180], run, budget=50).polluters == (TESTS[i],)


def test_two_tests_needed_together_are_both_named_in_run_order() -> None:
    run, calls = polluted_by("t150", "t012")
    verdict = classify("t180", TESTS[:180], run, budget=100)
    assert verdict.kind == ORDER_DEPENDENT
    assert verdict.polluters == ("t012", "t150")
    # Every rerun kept the original order of the tests it ran.
    assert all(list(c) == sorted(c) for c in calls)


def test_a_failure_that_repeats_alone_is_genuine_after_one_rerun() -> None:
    verdict = classify("t180", TESTS[:180], lambda prefix: True, budget=50)
    assert (verdict.kind, verdict.reruns, verdict.polluters) == (GENUINE, 1, ())


def test_a_failure_nothing_reproduces_is_flaky() -> None:
    verdict = classify("t180", TESTS[:180], lambda prefix: False, budget=50)
    assert (verdict.kind, verdict.detail) == (
        FLAKY,
        "failed in the run; passes alone and after the same tests (0 of 1 after t000, t001, t002 and 177 more, "
        "0 of 1 alone)",
    )


def test_flaky_that_does_not_reproduce_after_the_suspect() -> None:
    count = iter(range(100))
    # Fails on the 1st and 3rd rerun only: no stable polluter exists.
    verdict = classify("t003", TESTS[:3], lambda prefix: next(count) in (1,), budget=50)
    assert verdict.kind == FLAKY


def test_budget_cut_short_is_undecided_never_a_pass() -> None:
    run, calls = polluted_by("t037")
    verdict = classify("t180", TESTS[:180], run, budget=4)
    assert verdict.kind == UNDECIDED
    assert verdict.polluters == ()
    assert len(calls) == 4
    assert "budget" in verdict.detail


def test_hanging_alone_is_genuine_after_one_rerun() -> None:
    def run(prefix: Sequence[str]) -> bool:
        raise Hung("t180 ran longer than the timeout")

    verdict = classify("t180", TESTS[:180], run, budget=50)
    assert (verdict.kind, verdict.reruns, verdict.detail) == (GENUINE, 1, "t180 ran longer than the timeout")


def test_reruns_alone_made_ahead_are_replayed_not_made_again() -> None:
    run, calls = polluted_by("t037")
    alone = rerun_alone(run, 2)
    # It passed alone: one rerun, no second one to confirm a failure.
    assert alone == Alone((False,))
    verdict = classify("t180", TESTS[:180], replaying(alone, run), budget=50)
    assert (verdict.kind, verdict.polluters) == (ORDER_DEPENDENT, ("t037",))
    # The one made ahead, then the confirming ones: none made twice.
    assert calls.count(()) == REPEATS
    assert verdict.reruns == len(calls)


def test_rerun_alone_stops_at_its_budget_and_keeps_what_could_not_tell() -> None:
    assert rerun_alone(lambda prefix: True, 1) == Alone((True,))
    assert rerun_alone(lambda prefix: True, 5) == Alone((True,))
    assert rerun_alone(lambda prefix: False, 5) == Alone((False,))
    assert rerun_alone(lambda prefix: True, 0) == Alone(())

    def broken(prefix: Sequence[str]) -> bool:
        raise CannotTell("exit 3: INTERNALERROR SystemExit: 1")

    alone = rerun_alone(broken, 2)
    assert (alone.fails, alone.ran) == ((), 1)
    verdict = classify("t180", TESTS[:180], replaying(alone, broken), budget=50)
    assert (verdict.kind, verdict.detail) == (UNDECIDED, "exit 3: INTERNALERROR SystemExit: 1")


def test_a_race_that_fails_every_other_time_after_any_test_is_flaky_with_its_counts_and_stops_early() -> None:
    calls: list[tuple[str, ...]] = []

    def run(prefix: Sequence[str]) -> bool:
        calls.append(tuple(prefix))
        # After any test, one time in two; alone, never.
        return bool(prefix) and sum(1 for c in calls if c) % 2 == 1

    verdict = classify("t180", TESTS[:180], run, budget=50)

    assert (verdict.kind, verdict.polluters) == (FLAKY, ())
    # The selection it stopped at failed and passed: said with the counts, as soon as it was seen.
    assert "failed 1 of 2 after " in verdict.detail, verdict.detail
    assert verdict.reruns == len(calls) <= math.ceil(math.log2(180)) + 2


def test_a_polluter_that_reproduces_only_sometimes_is_flaky_not_order_dependent() -> None:
    alone_after: list[bool] = []

    def run(prefix: Sequence[str]) -> bool:
        if tuple(prefix) != ("t037",):
            return "t037" in prefix
        alone_after.append(len(alone_after) != 1)  # right after t037, the second run passes
        return alone_after[-1]

    verdict = classify("t180", TESTS[:180], run, budget=50)

    assert (verdict.kind, verdict.polluters) == (FLAKY, ())
    assert verdict.detail == f"failed {alone_after.count(True)} of {len(alone_after)} after t037, 0 of 1 alone"
    assert alone_after == [True, False]


def test_a_race_at_one_in_two_after_any_test_is_seldom_called_order_dependent() -> None:
    # Random (seeded, so the same every time), counted over many classifications: the controls after the
    # neighbours catch what 4 of 4 lets by (one control and 3 of 3 still named a polluter 7 times in 100).
    kinds = []
    for seed in range(400):
        draw = random.Random(seed).random
        kinds.append(
            classify("t040", TESTS[:40], lambda prefix, draw=draw: bool(prefix) and draw() < 0.5, budget=100).kind
        )
    assert kinds.count(ORDER_DEPENDENT) <= 0.005 * len(kinds), kinds.count(ORDER_DEPENDENT)
    assert FLAKY in kinds


def test_a_victim_failing_after_every_test_tried_names_no_polluter() -> None:
    # It passes only first in its process: the controls either side fail as the suspect does, every time.
    calls: list[tuple[str, ...]] = []

    def run(prefix: Sequence[str]) -> bool:
        calls.append(tuple(prefix))
        return bool(prefix)

    verdict = classify("t180", TESTS[:180], run, budget=60)
    assert verdict.kind == ORDER_DEPENDENT
    assert verdict.polluters == ()
    assert verdict.detail == "4 of 4 after t000, 0 of 4 alone, 4 of 4 after t001, 4 of 4 after t002"


def test_one_failing_control_leaves_the_polluter_named() -> None:
    # Two tests that pollute alike, side by side: one control fails too, the other passes.
    run, _ = polluted_by("t037")

    def either(prefix: Sequence[str]) -> bool:
        return run(prefix) or "t036" in prefix

    verdict = classify("t180", TESTS[:180], either, budget=60)
    assert verdict.kind == ORDER_DEPENDENT
    assert verdict.polluters in (("t036",), ("t037",))
