"""The quality yardstick: the team's evaluation, switch off and on, its items paired and judged against a margin."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from promote.accel.commands import WAYS, CommandError, TimedOut, Way, both_ways, run_way, shown
from promote.accel.ledger import Engagement, read_tally
from promote.config.settings import AccelerationConfig, Config, QualityConfig
from promote.core.bounded_json import Json, JsonRejected, read_lines
from promote.core.paired import Pairs, clopper_pearson, items_to_decide, mcnemar_p, newcombe
from promote.core.vocab import QualityVerdict

# The stronger arm solving this share of the items or more: a gap near the ceiling cannot be seen.
SATURATED_AT = 0.95
SHOWN_UNPAIRED = 5  # item ids of the unpaired shown by name
NO_PAIRS = Pairs(0, 0, 0, 0)


class DuplicateItem(ValueError):
    """An item id on two lines of one arm's output: the command's error, not promote's."""


@dataclass(frozen=True)
class Items:
    """One arm's output: each item's pass or fail, and the lines that were not an item."""

    passed: Mapping[str, bool]
    unparseable: int = 0


@dataclass(frozen=True)
class QualityReport:
    """The yardstick's items paired off and on, the exact figures per arm, the paired difference and the verdict."""

    verdict: QualityVerdict
    margin: float
    confidence: float
    pairs: Pairs = NO_PAIRS
    unpaired: tuple[str, ...] = ()  # item ids in one arm only, sorted
    unparseable: int = 0
    p_value: float | None = None
    difference: tuple[float, float, float] | None = None  # estimate, low, high of on - off (fractions of items)
    on_interval: tuple[float, float] | None = None  # exact (Clopper-Pearson) per arm
    off_interval: tuple[float, float] | None = None
    saturated: bool = False
    to_decide: int | None = None  # items that would decide an inconclusive verdict at the observed rates
    timed_out: tuple[Way, ...] = ()
    error: str | None = None  # one line, when the verdict is error
    engagement: Engagement | None = None

    @property
    def items(self) -> int:
        return self.pairs.n

    @property
    def served(self) -> int | None:
        """Requests the path served with the switch on, by its own count (None: it kept none)."""
        e = self.engagement
        return None if e is None or e.lines == 0 else e.on.served

    @property
    def vacuous(self) -> bool:
        """The path's own count says it served none of the items with the switch on."""
        return self.served == 0 and self.items > 0

    @property
    def holds(self) -> bool:
        """Non-inferior on items the path took part in: what lets output that differs stand."""
        return self.verdict == "non-inferior" and not self.vacuous

    def to_json(self) -> dict[str, object]:
        diff = self.difference
        t = self.pairs
        return {
            "verdict": self.verdict, "items": t.n, "on_passed": t.on, "off_passed": t.off, "on_only": t.on_only,
            "off_only": t.off_only, "unpaired": len(self.unpaired),
            "unpaired_items": list(self.unpaired[:SHOWN_UNPAIRED]),
            "unparseable": self.unparseable, "p_value": None if self.p_value is None else round(self.p_value, 6),
            "difference": None if diff is None else dict(zip(("estimate", "low", "high"), _r(diff), strict=True)),
            "on_interval": None if self.on_interval is None else _r(self.on_interval),
            "off_interval": None if self.off_interval is None else _r(self.off_interval),
            "margin": self.margin, "confidence": self.confidence, "saturated": self.saturated,
            "saturated_at": SATURATED_AT, "to_decide": self.to_decide, "timed_out": list(self.timed_out),
            "error": self.error, "ledger": None if self.engagement is None else self.engagement.to_json(),
        }  # fmt: skip


def _r(values: tuple[float, ...]) -> list[float]:
    return [round(v, 6) for v in values]


def _item(raw: Json | JsonRejected) -> tuple[str, bool] | None:
    if not isinstance(raw, dict):
        return None
    item, passed = raw.get("item"), raw.get("passed")
    return (item, passed) if isinstance(item, str) and isinstance(passed, bool) else None


def read_items(path: Path) -> Items:
    """One arm's items; a missing file is an OSError, an item on two lines a DuplicateItem."""
    passed: dict[str, bool] = {}
    bad = 0
    for line in read_lines(path):
        item = _item(line)
        if item is None:
            bad += 1
        elif item[0] in passed:
            raise DuplicateItem(item[0])
        else:
            passed[item[0]] = item[1]
    return Items(passed, bad)


def pair(off: Mapping[str, bool], on: Mapping[str, bool]) -> tuple[Pairs, tuple[str, ...]]:
    """The 2x2 table over every item either arm wrote, and the ids of those only one arm has.

    An item an arm did not answer counts as that arm failing it: an arm that leaves out the items it gets
    wrong must not look as good as one that answers them all.
    """
    both = on_only = off_only = neither = 0
    for item in off.keys() | on.keys():
        was, now = off.get(item, False), on.get(item, False)
        if was and now:
            both += 1
        elif now:
            on_only += 1
        elif was:
            off_only += 1
        else:
            neither += 1
    return Pairs(both, on_only, off_only, neither), tuple(sorted(off.keys() ^ on.keys()))


def judge(t: Pairs, spec: QualityConfig) -> QualityReport:
    """The figures and the verdict: non-inferior above -margin, inferior below it, inconclusive across it."""
    if t.n == 0:
        return QualityReport("error", spec.margin, spec.confidence, t, error="no item was scored both ways")
    estimate, low, high = newcombe(t, spec.confidence)
    verdict: QualityVerdict = (
        "non-inferior" if low > -spec.margin else "inferior" if high < -spec.margin else "inconclusive"
    )
    return QualityReport(
        verdict, spec.margin, spec.confidence, t,
        p_value=mcnemar_p(t.on_only, t.off_only), difference=(estimate, low, high),
        on_interval=clopper_pearson(t.on, t.n, spec.confidence),
        off_interval=clopper_pearson(t.off, t.n, spec.confidence),
        saturated=max(t.on, t.off) >= SATURATED_AT * t.n,
        to_decide=items_to_decide(t, spec.confidence, spec.margin) if verdict == "inconclusive" else None,
    )  # fmt: skip


def _arm(config: Config, accel: AccelerationConfig, spec: QualityConfig, tmp: Path, way: Way) -> str | None:
    """Run one arm; None when it finished, its one line when it was stopped at the limit (its output still read)."""
    try:
        run_way(config, accel, spec.command, way, tmp / f"items-{way}.jsonl", tmp / f"ledger-{way}.jsonl",
                timeout_s=spec.timeout_s)  # fmt: skip
    except TimedOut as e:
        return str(e)
    return None


def run_quality(config: Config, accel: AccelerationConfig, spec: QualityConfig) -> QualityReport:
    """Both arms (at once when there are two cores), their items paired and judged; a failure is verdict error."""
    what = f"`{shown(spec.command)}`"
    with tempfile.TemporaryDirectory(prefix="promote-quality-") as name:
        tmp = Path(name)
        try:
            stopped = both_ways(lambda w: _arm(config, accel, spec, tmp, w))
        except CommandError as e:
            return QualityReport("error", spec.margin, spec.confidence, error=str(e))
        arms: dict[str, Items] = {}
        for way in WAYS:
            try:
                arms[way] = read_items(tmp / f"items-{way}.jsonl")
            except OSError:
                arms[way] = Items({})
                if stopped[way] is None:
                    line = f"{what} (switch {way}) wrote nothing to {{out}}"
                    return QualityReport("error", spec.margin, spec.confidence, error=line)
            except DuplicateItem as e:
                line = f"{what} (switch {way}) wrote item {json.dumps(str(e))} twice: each item is one line"
                return QualityReport("error", spec.margin, spec.confidence, error=line)
        engaged = Engagement(*(read_tally(tmp / f"ledger-{w}.jsonl", accel.name) for w in WAYS))
    t, unpaired = pair(arms["off"].passed, arms["on"].passed)
    report = judge(t, spec) if t.n else QualityReport("error", spec.margin, spec.confidence, t)
    report = replace(report, unpaired=unpaired, unparseable=sum(a.unparseable for a in arms.values()),
                     engagement=engaged)  # fmt: skip
    timed_out = tuple(w for w in WAYS if stopped[w] is not None)
    if timed_out:
        # What the arms wrote before the limit is counted and shown, never judged.
        line = "; ".join(s for s in stopped.values() if s is not None)
        return replace(report, verdict="timed-out", timed_out=timed_out, error=line, to_decide=None)
    if t.n == 0:
        return replace(report, error=f"{what}: neither arm wrote an item")
    return report
