"""What changed since the previous comparable run: fixes credited by name, and failures filtered instead of fixed."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from promote.core.findings import Finding
from promote.core.vocab import RED
from promote.evidence.history import StoredRun, TestOutcome

# Taken out of the run instead of fixed. Not `blocked`: a red test that is now blocked failed for want of
# something a station lacks (a model, a device), and says so in its own impossible-requirement or
# station-bound finding. Calling it filtered would blame a change nobody made.
FILTERED = ("skipped", "xfailed", "deselected")
T = TypeVar("T")
# (red runs, runs) of one test on the compared run's commit, up to it: the "2 of 7" said of a test that flipped.
Tally = Callable[[str, str], tuple[int, int]]


@dataclass(frozen=True)
class Delta:
    """One test whose fate changed between two runs."""

    package: str
    nodeid: str
    before: str
    after: str
    renamed_from: str | None = None
    failed_of: tuple[int, int] | None = None  # on one commit: (red runs, runs) of it there, this one included

    def to_json(self) -> dict[str, object]:
        return {
            "package": self.package,
            "test": self.nodeid,
            "before": self.before,
            "after": self.after,
            "renamed_from": self.renamed_from,
            "flaky": None if self.failed_of is None else {"failed": self.failed_of[0], "runs": self.failed_of[1]},
        }


@dataclass(frozen=True)
class Deltas:
    """The run compared with the previous comparable one."""

    previous: str | None
    passed_before: int
    passed_now: int
    fixed: tuple[Delta, ...] = ()
    newly_failing: tuple[Delta, ...] = ()
    filtered: tuple[Delta, ...] = ()
    unread: bool = False  # the history could not be opened: earlier runs may exist, none was compared
    # Red one run and green the next (or the other way) on the same commit: nothing changed, so nothing was fixed
    # or broken; the test is flaky, and is said to be.
    flipped: tuple[Delta, ...] = ()
    commit_unchanged: bool = False  # the previous run tested the same commit: nothing can have been fixed or broken

    @property
    def headline(self) -> str:
        if self.unread:
            return f"{self.passed_now} pass; not compared with earlier runs: the history could not be read"
        if self.previous is None:
            return f"first run of these packages: {self.passed_now} pass, nothing earlier to compare with"
        return f"{self.passed_now} now pass where {self.passed_before} did"

    @property
    def first(self) -> bool:
        """No earlier comparable run: nothing was fixed or broken *since*, it is where counting starts."""
        return self.previous is None and not self.unread

    def findings(self) -> list[Finding]:
        return [
            Finding(
                "filtered-not-fixed",
                "error",
                d.nodeid,
                f"was {d.before} in run {self.previous}, now {d.after}"
                + (f" (renamed from {d.renamed_from})" if d.renamed_from else "")
                + ": filtered out, not fixed",
                cause=None,
            )
            for d in self.filtered
        ]

    def to_json(self) -> dict[str, object]:
        return {
            "previous": self.previous,
            "passed_before": self.passed_before,
            "passed_now": self.passed_now,
            "headline": self.headline,
            "first": self.first,
            "unread": self.unread,
            "fixed": [d.to_json() for d in self.fixed],
            "newly_failing": [d.to_json() for d in self.newly_failing],
            "filtered_not_fixed": [d.to_json() for d in self.filtered],
            "same_commit": [d.to_json() for d in self.flipped],
            "commit_unchanged": self.commit_unchanged,
        }


def file_and_name(nodeid: str) -> tuple[str, str]:
    """(file, test name without parameters): what survives a rename of the other."""
    path, _, rest = nodeid.partition("::")
    return path, rest.split("[")[0].rsplit("::", 1)[-1]


def renamed(nodeid: str, appeared: Mapping[tuple[str, str], T]) -> T | None:
    """The new test (of the same package) that is `nodeid` renamed: same file and name, or same name in one other
    file."""
    path, name = file_and_name(nodeid)
    if (path, name) in appeared:
        return appeared[(path, name)]
    moved = [t for (_, n), t in appeared.items() if n == name]
    return moved[0] if len(moved) == 1 else None


def compare(now: StoredRun, before: StoredRun | None, tally: Tally | None = None) -> Deltas:
    """Compare two runs test by test (only the packages both ran); on one commit, a flip is not a fix."""
    if before is None:
        return Deltas(None, 0, now.count("passed"))
    shared = now.packages & before.packages
    old = {(t.package, t.nodeid): t for t in before.tests if t.package in shared}
    new = {(t.package, t.nodeid): t for t in now.tests if t.package in shared}
    appeared: dict[str, dict[tuple[str, str], TestOutcome]] = {}
    for key, t in new.items():
        if key not in old:
            appeared.setdefault(t.package, {})[file_and_name(t.nodeid)] = t
    same = now.commit is not None and now.commit == before.commit
    fixed, failing, filtered, flipped = [], [], [], []
    for key, was in old.items():
        is_now = new.get(key)
        renamed_from = None
        if is_now is None:
            is_now = renamed(was.nodeid, appeared.get(was.package, {}))
            renamed_from = was.nodeid if is_now is not None else None
        after = is_now.outcome if is_now is not None else "disappeared"
        nodeid = is_now.nodeid if is_now is not None else was.nodeid
        delta = Delta(was.package, nodeid, was.outcome, after, renamed_from)
        flip = (was.outcome in RED and after == "passed") or (was.outcome not in RED and after in RED)
        if same and flip and after != "disappeared":
            flipped.append(_counted(delta, tally))
        elif was.outcome in RED and after == "passed":
            fixed.append(delta)
        elif was.outcome in RED and (after in FILTERED or after == "disappeared"):
            filtered.append(delta)
        elif was.outcome not in RED and after in RED:
            failing.append(delta)
    for key, t in new.items():
        if key not in old and t.outcome in RED and not any(d.nodeid == t.nodeid for d in failing):
            failing.append(Delta(t.package, t.nodeid, "absent", t.outcome))
    return Deltas(
        previous=before.run_id,
        passed_before=sum(1 for t in before.tests if t.package in shared and t.outcome == "passed"),
        passed_now=sum(1 for t in now.tests if t.package in shared and t.outcome == "passed"),
        fixed=tuple(fixed),
        newly_failing=tuple(failing),
        filtered=tuple(filtered),
        flipped=tuple(flipped),
        commit_unchanged=same,
    )


def _counted(delta: Delta, tally: Tally | None) -> Delta:
    if tally is None:
        return delta
    return Delta(
        delta.package, delta.nodeid, delta.before, delta.after, delta.renamed_from, tally(delta.package, delta.nodeid)
    )
