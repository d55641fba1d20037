"""The path's own counter: read the lines an accelerated path appended to PROMOTE_LEDGER, and tally them."""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Literal, TypeGuard, cast

from promote.accel.ledger_writer import LEDGER_ENV, OUTCOMES
from promote.core.bounded_json import Json, JsonRejected, read_lines
from promote.core.vocab import LedgerOutcome as Outcome

__all__ = ["LEDGER_ENV", "Engagement", "Entry", "Outcome", "Tally", "fresh", "pooled", "read", "read_tally", "tally"]


@dataclass(frozen=True)
class Entry:
    """One request as the path counted it."""

    outcome: Outcome
    reason: str | None
    seconds: float
    request: Mapping[str, object]
    drafted: int | None = None  # tokens the path proposed (a drafter's), when it counts them
    accepted: int | None = None  # of those, the tokens the target kept


@dataclass(frozen=True)
class Acceptance:
    """The tokens an arm's path drafted and how many were accepted (from the lines that count them)."""

    drafted: int
    accepted: int

    @property
    def rate(self) -> float | None:
        return self.accepted / self.drafted if self.drafted else None

    def to_json(self) -> dict[str, object]:
        rate = self.rate
        return {"drafted": self.drafted, "accepted": self.accepted, "rate": None if rate is None else round(rate, 4)}


@dataclass(frozen=True)
class Tally:
    """What the path counted in one arm: outcomes, reasons grouped (most frequent first), median seconds each."""

    served: int = 0
    declined: int = 0
    failed: int = 0
    unparseable: int = 0  # lines that were not a ledger line (never fatal, always reported)
    declined_reasons: tuple[tuple[str, int], ...] = ()
    failed_reasons: tuple[tuple[str, int], ...] = ()
    served_s: float | None = None
    declined_s: float | None = None
    failed_s: float | None = None
    acceptance: Acceptance | None = None  # None: no line counted drafted tokens

    @property
    def requests(self) -> int:
        return self.served + self.declined + self.failed

    @property
    def lines(self) -> int:
        """Every line the arm's file held for this path, unparseable ones included: the ledger was written."""
        return self.requests + self.unparseable

    def to_json(self) -> dict[str, object]:
        return {
            "served": self.served, "declined": self.declined, "failed": self.failed, "unparseable": self.unparseable,
            "declined_reasons": [{"reason": r, "count": n} for r, n in self.declined_reasons],
            "failed_reasons": [{"reason": r, "count": n} for r, n in self.failed_reasons],
            "median_s": {"served": _round(self.served_s), "declined": _round(self.declined_s),
                         "failed": _round(self.failed_s)},
            "acceptance": None if self.acceptance is None else self.acceptance.to_json(),
        }  # fmt: skip


@dataclass(frozen=True)
class Engagement:
    """The path's tally in each arm of one step: off (or the baseline) and on (or the candidate)."""

    off: Tally
    on: Tally

    @property
    def lines(self) -> int:
        return self.off.lines + self.on.lines

    def to_json(self) -> dict[str, object]:
        return {"off": self.off.to_json(), "on": self.on.to_json()}


def _round(v: float | None) -> float | None:
    return None if v is None else round(v, 6)


def _entry(raw: Json | JsonRejected, accel: str) -> Entry | Literal[False] | None:
    """The line's entry; None for another path's line; False for a line that is not a ledger line."""
    if not isinstance(raw, dict):
        return False
    if raw.get("accel") != accel:
        return None if isinstance(raw.get("accel"), str) else False
    outcome, reason, seconds, request = raw.get("outcome"), raw.get("reason"), raw.get("seconds"), raw.get("request")
    if outcome not in OUTCOMES or not (reason is None or isinstance(reason, str)):
        return False
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not math.isfinite(seconds):
        return False
    if not isinstance(request, dict):
        return False
    drafted, accepted = raw.get("drafted"), raw.get("accepted")
    if not (_tokens(drafted) and _tokens(accepted)):
        return False
    # Accepted tokens are some of the drafted ones: more than were drafted, or none drafted, is not a count.
    if accepted is not None and (drafted is None or accepted > drafted):
        return False
    return Entry(cast(Outcome, outcome), reason, float(seconds), request, drafted, accepted)


def _tokens(v: object) -> TypeGuard[int | None]:
    """Absent, or a count of tokens: an int >= 0 (not a bool)."""
    return v is None or (isinstance(v, int) and not isinstance(v, bool) and v >= 0)


def read(path: Path, accel: str, *, upto: int | None = None) -> tuple[tuple[Entry, ...], int]:
    """The path's entries in the file (none when it is absent; its first `upto` bytes) and the lines that were not."""
    try:
        lines = read_lines(path, upto=upto)
    except FileNotFoundError:
        return (), 0
    entries, bad = [], 0
    for line in lines:
        entry = _entry(line, accel)
        if entry is False:
            bad += 1
        elif entry is not None:
            entries.append(entry)
    return tuple(entries), bad


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def acceptance(entries: Iterable[Entry]) -> Acceptance | None:
    """Drafted and accepted tokens summed over the entries that count them; None when none does."""
    counting = [e for e in entries if e.drafted is not None]
    if not counting:
        return None
    return Acceptance(sum(e.drafted or 0 for e in counting), sum(e.accepted or 0 for e in counting))


def tally(entries: Iterable[Entry], unparseable: int = 0) -> Tally:
    """Count the entries by outcome; reasons grouped by their text."""
    by: dict[str, list[Entry]] = {o: [] for o in OUTCOMES}
    kept = list(entries)
    for e in kept:
        by[e.outcome].append(e)

    def reasons(outcome: str) -> tuple[tuple[str, int], ...]:
        counted = Counter(e.reason or "(no reason given)" for e in by[outcome])
        return tuple(sorted(counted.items(), key=lambda kv: (-kv[1], kv[0])))

    return Tally(
        served=len(by["served"]), declined=len(by["declined"]), failed=len(by["failed"]), unparseable=unparseable,
        declined_reasons=reasons("declined"), failed_reasons=reasons("failed"),
        served_s=_median([e.seconds for e in by["served"]]), declined_s=_median([e.seconds for e in by["declined"]]),
        failed_s=_median([e.seconds for e in by["failed"]]), acceptance=acceptance(kept),
    )  # fmt: skip


def read_tally(path: Path, accel: str, *, upto: int | None = None) -> Tally:
    entries, bad = read(path, accel, upto=upto)
    return tally(entries, bad)


def pooled(paths: Iterable[Path], accel: str) -> Tally:
    """One tally over several files (one arm of every bench case): their lines counted together."""
    entries: list[Entry] = []
    bad = 0
    for path in paths:
        found, unreadable = read(path, accel)
        entries += found
        bad += unreadable
    return tally(entries, bad)


@contextmanager
def fresh(step: str) -> Iterator[Path]:
    """A new, empty directory for one step's ledgers (one file per arm in it), removed afterwards."""
    with TemporaryDirectory(prefix=f"promote-ledger-{step}-") as tmp:
        yield Path(tmp)
