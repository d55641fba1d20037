"""Distribution-free statistics for timings: an interval for a median that assumes nothing about the noise."""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class MedianInterval:
    """A distribution-free interval for a median: two order statistics and how often such an interval covers it."""

    low: float
    high: float
    coverage: float

    def verdict(self, target: float) -> str:
        """`met` when the whole interval is at or under `target`, `missed` when it is all above, else `undecided`."""
        if self.high <= target:
            return "met"
        return "missed" if self.low > target else "undecided"

    def verdict_at_least(self, target: float) -> Literal["met", "missed", "undecided"]:
        """For a figure where more is better (a speedup): `met` when all of it is at or above `target`."""
        if self.low >= target:
            return "met"
        return "missed" if self.high < target else "undecided"


def median_interval(values: Sequence[float], confidence: float = 0.9) -> MedianInterval:
    """The narrowest interval [x(k), x(n+1-k)] of the sorted values that covers the median with at least `confidence`.

    Each value lies below the true median with probability 1/2 (whatever the distribution), so the
    number below it is binomial: the interval misses the median with probability 2 * P(B(n, 1/2) < k).
    Five rounds allow only [min, max] (93.75%); more rounds narrow it.
    """
    xs = sorted(values)
    n = len(xs)
    if n == 0:
        raise ValueError("no values")
    best = MedianInterval(xs[0], xs[-1], 1 - 2 * 0.5**n)
    below = 0
    for k in range(1, n // 2 + 1):
        below += math.comb(n, k - 1)
        coverage = 1 - 2 * below / 2**n
        if coverage < confidence:
            break
        best = MedianInterval(xs[k - 1], xs[n - k], coverage)
    return best


def children_cpu() -> float:
    """User + system CPU seconds of every waited-for descendant so far (0 on Windows, which has no rusage)."""
    if sys.platform == "win32":
        return 0.0
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime
