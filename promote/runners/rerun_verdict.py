"""What the reruns showed about one failing test: made by `causes/`, kept in a package's result (`summary`).

Its own module, below both, so that `summary` need not import `causes`, which imports `summary`.
"""

from __future__ import annotations

from dataclasses import dataclass

from promote.core.vocab import RerunVerdict


@dataclass(frozen=True)
class Verdict:
    """What the reruns showed about one failing test."""

    test: str
    kind: RerunVerdict
    polluters: tuple[str, ...] = ()
    reruns: int = 0
    detail: str = ""
    # The polluters are modules whose import changed state, not tests that ran earlier.
    by_import: bool = False
    # Each polluter makes the test fail on its own (several found apart); False: they are needed together. With no
    # polluters named: it fails after every test of the suite before it, yet not after promote's no-op test.
    each: bool = False
    # Over a fleet: the station it failed (and was rerun) on, and the others where it passed when run alone.
    ran_on: str | None = None
    passes_on: tuple[str, ...] = ()
