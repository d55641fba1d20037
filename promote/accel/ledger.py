"""The path's own counter: read the lines an accelerated path appended to PROMOTE_LEDGER, and tally them."""

from __future__ import annotations

import json
import math
import statistics
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Literal, cast

from promote.accel.ledger_writer import LEDGER_ENV, OUTCOMES
from promote.core.vocab import LedgerOutcome as Outcome

__all__ = ["LEDGER_ENV", "Engagement", "Entry", "Outcome", "Tally", "fresh", "read", "read_tally", "tally"]


@dataclass(frozen=True)
class Entry:
    """One request as the path counted it."""

    outcome: Outcome
    reason: str | None
    seconds: float
    request: Mapping[str, object]


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


def _entry(line: str, accel: str) -> Entry | Literal[False] | None:
    """The line's entry; None for another path's line; False for a line that is not a ledger line."""
    try:
        raw = json.loads(line)
    except ValueError:
        return False
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
    return Entry(cast(Outcome, outcome), reason, float(seconds), request)


def read(path: Path, accel: str) -> tuple[tuple[Entry, ...], int]:
    """The path's entries in the file (none when it is absent) and how many lines were not ledger lines."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return (), 0
    entries, bad = [], 0
    for line in text.splitlines():
        if not line.strip():
            continue
        entry = _entry(line, accel)
        if entry is False:
            bad += 1
        elif entry is not None:
            entries.append(entry)
    return tuple(entries), bad


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def tally(entries: Iterable[Entry], unparseable: int = 0) -> Tally:
    """Count the entries by outcome; reasons grouped by their text."""
    by: dict[str, list[Entry]] = {o: [] for o in OUTCOMES}
    for e in entries:
        by[e.outcome].append(e)

    def reasons(outcome: str) -> tuple[tuple[str, int], ...]:
        counted = Counter(e.reason or "(no reason given)" for e in by[outcome])
        return tuple(sorted(counted.items(), key=lambda kv: (-kv[1], kv[0])))

    return Tally(
        served=len(by["served"]), declined=len(by["declined"]), failed=len(by["failed"]), unparseable=unparseable,
        declined_reasons=reasons("declined"), failed_reasons=reasons("failed"),
        served_s=_median([e.seconds for e in by["served"]]), declined_s=_median([e.seconds for e in by["declined"]]),
        failed_s=_median([e.seconds for e in by["failed"]]),
    )  # fmt: skip


def read_tally(path: Path, accel: str) -> Tally:
    entries, bad = read(path, accel)
    return tally(entries, bad)


@contextmanager
def fresh(step: str) -> Iterator[Path]:
    """A new, empty directory for one step's ledgers (one file per arm in it), removed afterwards."""
    with TemporaryDirectory(prefix=f"promote-ledger-{step}-") as tmp:
        yield Path(tmp)
