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
    # It passes with only its own module collected, and fails after promote's no-op test with the whole package
    # collected: importing the package's other modules is what makes it fail.
    by_collection: bool = False


@dataclass(frozen=True)
class Group:
    """Failed tests of one package that raised the same exception type through the same line: one cause."""

    raised: str  # the exception's type
    at: str  # `path:line`, relative to the rootdir when `own`, else the library file's last two path parts
    own: bool
    tests: tuple[str, ...]  # sorted by id: the first is the representative

    @property
    def sample(self) -> tuple[str, ...]:
        """The tests rerun for the group: its representative and its last member. Two, so that the group's reruns
        alone take one round on two cores (each is a fresh process that imports the package)."""
        return (self.tests[0], self.tests[-1])

    @property
    def cause(self) -> str:
        return f"{self.raised} at {self.at}"
