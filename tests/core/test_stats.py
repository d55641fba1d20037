"""The benchmarks' verdict on a target: a median per-round ratio and the interval the rounds allow."""

from __future__ import annotations

import math
import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from _common import MedianInterval, median_interval


@pytest.mark.parametrize(("n", "k", "coverage"), [(5, 1, 0.9375), (9, 2, 0.9609375), (15, 4, 0.96484375)])
def test_the_interval_is_the_narrowest_pair_of_order_statistics_that_covers_enough(
    n: int, k: int, coverage: float
) -> None:
    values = [float(v) for v in random.Random(n).sample(range(1000), n)]

    interval = median_interval(values, confidence=0.9)

    xs = sorted(values)
    assert (interval.low, interval.high, interval.coverage) == (xs[k - 1], xs[n - k], coverage)


def test_the_stated_coverage_holds_for_a_skewed_distribution() -> None:
    # Exponential rounds (true median ln 2): how often does the 9-round interval contain it?
    rng = random.Random(7)
    trials = 20_000
    hits = 0
    for _ in range(trials):
        interval = median_interval([rng.expovariate(1.0) for _ in range(9)])
        hits += interval.low <= math.log(2) <= interval.high
    assert abs(hits / trials - 0.9609375) < 0.01


@pytest.mark.parametrize(
    ("interval", "verdict"),
    [
        (MedianInterval(1.02, 1.09, 0.96), "met"),
        (MedianInterval(1.02, 1.10, 0.96), "met"),
        (MedianInterval(1.11, 1.30, 0.96), "missed"),
        (MedianInterval(1.05, 1.15, 0.96), "undecided"),
    ],
)
def test_only_an_interval_wholly_on_one_side_decides(interval: MedianInterval, verdict: str) -> None:
    assert interval.verdict(1.10) == verdict


def test_no_rounds_is_an_error() -> None:
    with pytest.raises(ValueError, match="no values"):
        median_interval([])
