"""The run's rerun budget: reruns shared by every failed test, and who holds how many of them."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field


@dataclass
class Budget:
    """Reruns left for the whole run; shared by every failed test of every package (and thread)."""

    left: int
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)
    total: int = -1  # what the run started with (max_reruns), for a finding that ran out of it
    # What each failed test holds of it (set aside and not given back): who used it, for a test that got none.
    held: dict[str, int] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        if self.total < 0:
            self.total = self.left

    def take(self, most: int, by: str = "") -> int:
        """Set aside up to `most` reruns for the test `by`; how many were set aside."""
        with self._lock:
            n = max(0, min(most, self.left))
            self.left -= n
            self.held[by] = self.held.get(by, 0) + n
            return n

    def give(self, n: int, by: str = "") -> None:
        """Return reruns set aside for the test `by` and not spent."""
        with self._lock:
            self.left += n
            self.held[by] = self.held.get(by, 0) - n

    def users(self, besides: str) -> int:
        """How many failed tests other than `besides` hold some of the budget."""
        with self._lock:
            return sum(1 for test, n in self.held.items() if n > 0 and test != besides)


def out_of_budget(budget: Budget, victim: str, granted: int, used: int) -> str:
    """Why a test's reruns stopped short, in what it was given: the run's budget, who else used it, its share."""
    others = budget.users(besides=victim)
    whole = f"the rerun budget of {budget.total} (max_reruns, shared by every failed test) ran out before an answer"
    by = f"{others} other failed test(s) used it" if others else "no other failed test used it"
    return f"{whole}: {by}; this test was given {granted} and used {used}"
