"""The sweep: requests through the front door, switch off and on; what the caller saw against what the seat counted."""

from __future__ import annotations

import json
import math
import statistics
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from promote.accel.commands import WAYS, CommandError, both_ways, run_way, shown
from promote.accel.ledger import Engagement, Entry, Tally, read, tally
from promote.config.settings import AccelerationConfig, Config, SweepConfig
from promote.core.bounded_json import Json, JsonRejected, read_lines

Scalar = str | int | float | bool | None
ClassKey = tuple[tuple[str, Scalar], ...]


@dataclass(frozen=True)
class Seen:
    """One request as the caller saw it."""

    request: Mapping[str, object]
    ok: bool
    error: str | None
    seconds: float


@dataclass(frozen=True)
class SweepClass:
    """One request class with the switch on: what the caller got, what the seat counted, what came from elsewhere."""

    key: ClassKey
    sent: int
    answered: int
    caller_failed: int
    caller_failed_off: int  # the same class with the switch off
    first_error: str | None  # the caller's first error with the switch on
    seat: Tally  # the path's own count of this class's requests, switch on
    elsewhere: int | None  # answered, but neither served nor declined by the seat; None: no ledger to tell
    answered_s: float | None  # the caller's median seconds for an answered request
    answered_off_s: float | None = None  # the same with the switch off: the latency the path is measured against

    @property
    def label(self) -> str:
        return label(self.key)

    def to_json(self) -> dict[str, object]:
        return {
            "class": dict(self.key), "label": self.label, "sent": self.sent, "answered": self.answered,
            "caller_failed": self.caller_failed, "caller_failed_off": self.caller_failed_off,
            "first_error": self.first_error, "seat": self.seat.to_json(), "answered_elsewhere": self.elsewhere,
            "answered_median_s": None if self.answered_s is None else round(self.answered_s, 6),
            "answered_off_median_s": None if self.answered_off_s is None else round(self.answered_off_s, 6),
        }  # fmt: skip


@dataclass(frozen=True)
class SweepResult:
    """Every request class, the parameters that define a class, and each view's unreadable lines."""

    classes: tuple[SweepClass, ...] = ()
    group_by: tuple[str, ...] = ()
    engagement: Engagement | None = None
    caller_unparseable: int = 0
    sent_off: int = 0
    error: str | None = None  # one line: the sweep could not run or its output could not be read

    @property
    def ledger_lines(self) -> int:
        return 0 if self.engagement is None else self.engagement.lines

    def to_json(self) -> dict[str, object]:
        return {
            "group_by": list(self.group_by), "classes": [c.to_json() for c in self.classes],
            "ledger": None if self.engagement is None else self.engagement.to_json(),
            "caller_unparseable": self.caller_unparseable, "sent_off": self.sent_off, "error": self.error,
        }  # fmt: skip


def label(key: ClassKey) -> str:
    """`temperature=0.4, model=qwen3` (strings bare, everything else as JSON)."""
    if not key:
        return "every request"
    return ", ".join(f"{k}={v if isinstance(v, str) else json.dumps(v)}" for k, v in key)


def _seen(raw: Json | JsonRejected) -> Seen | None:
    if not isinstance(raw, dict):
        return None
    request, ok, error, seconds = raw.get("request"), raw.get("ok"), raw.get("error"), raw.get("seconds")
    if not isinstance(request, dict) or not isinstance(ok, bool):
        return None
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not math.isfinite(seconds):
        return None
    return Seen(request, ok, None if error is None else str(error), float(seconds))


def read_caller(path: Path) -> tuple[tuple[Seen, ...], int]:
    """The caller's lines and how many could not be read; a sweep that wrote no file is an OSError."""
    seen, bad = [], 0
    for line in read_lines(path):
        s = _seen(line)
        if s is None:
            bad += 1
        else:
            seen.append(s)
    return tuple(seen), bad


def _scalar_keys(request: Mapping[str, object]) -> set[str]:
    return {k for k, v in request.items() if v is None or isinstance(v, (str, int, float, bool))}


def shared_keys(caller: Sequence[Seen], seat: Sequence[Entry]) -> tuple[str, ...]:
    """The scalar parameters every request has in both views (a prompt, a list, differs per request and is left out)."""
    views = [_scalar_keys(s.request) for s in caller] + [_scalar_keys(e.request) for e in seat]
    return tuple(sorted(set.intersection(*views))) if views else ()


def key_of(request: Mapping[str, object], keys: Sequence[str]) -> ClassKey:
    out: list[tuple[str, Scalar]] = []
    for k in keys:
        v = request.get(k)
        out.append((k, v if v is None or isinstance(v, (str, int, float, bool)) else json.dumps(v, sort_keys=True)))
    return tuple(out)


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def compare(
    caller: dict[str, tuple[Seen, ...]], seat: dict[str, tuple[Entry, ...]], keys: Sequence[str], *, measured: bool
) -> tuple[SweepClass, ...]:
    """Group both views of the switch-on arm by `keys`; the switch-off arm's caller failures beside them."""
    on = caller["on"]
    classes = sorted({key_of(s.request, keys) for s in on} | {key_of(e.request, keys) for e in seat["on"]}, key=label)
    out = []
    for key in classes:
        mine = [s for s in on if key_of(s.request, keys) == key]
        entries = [e for e in seat["on"] if key_of(e.request, keys) == key]
        counted = tally(entries)
        answered = sum(s.ok for s in mine)
        failed = [s for s in mine if not s.ok]
        off = [s for s in caller["off"] if key_of(s.request, keys) == key]
        elsewhere = max(0, answered - counted.served - counted.declined) if measured else None
        out.append(SweepClass(
            key, len(mine), answered, len(failed), sum(not s.ok for s in off), failed[0].error if failed else None,
            counted, elsewhere, _median([s.seconds for s in mine if s.ok]), _median([s.seconds for s in off if s.ok]),
        ))  # fmt: skip
    return tuple(out)


def run_sweep(config: Config, accel: AccelerationConfig, spec: SweepConfig) -> SweepResult:
    """Both arms (at once when there are two cores), then each view read and the classes compared."""
    with tempfile.TemporaryDirectory(prefix="promote-sweep-") as name:
        tmp = Path(name)
        outs = {w: tmp / f"caller-{w}.jsonl" for w in WAYS}
        try:
            # The arms are independent requests through the same front door: on two cores they share the wall time.
            both_ways(lambda w: run_way(config, accel, spec.command, w, outs[w], tmp / f"ledger-{w}.jsonl",
                                        timeout_s=spec.timeout_s))  # fmt: skip
        except CommandError as e:
            return SweepResult(error=str(e))
        caller: dict[str, tuple[Seen, ...]] = {}
        seat: dict[str, tuple[Entry, ...]] = {}
        bad, seat_bad = 0, {}
        for way in WAYS:
            try:
                caller[way], n = read_caller(outs[way])
            except OSError:
                return SweepResult(error=f"`{shown(spec.command)}` (switch {way}) wrote nothing to {{out}}")
            bad += n
            seat[way], seat_bad[way] = read(tmp / f"ledger-{way}.jsonl", accel.name)
    engagement = Engagement(tally(seat["off"], seat_bad["off"]), tally(seat["on"], seat_bad["on"]))
    keys = spec.group_by or shared_keys([*caller["off"], *caller["on"]], [*seat["off"], *seat["on"]])
    classes = compare(caller, seat, keys, measured=engagement.lines > 0)
    return SweepResult(classes, tuple(keys), engagement, bad, len(caller["off"]))
