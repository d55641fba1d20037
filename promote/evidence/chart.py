"""The history chart's geometry: one stacked bar per run on a date axis, with ticks, labels and a legend."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

WIDTH, HEIGHT = 720, 260
LEFT, RIGHT, TOP, BOTTOM = 56, 16, 40, 58
SERIES = (("passed", "passed", "#2e7d32"), ("failed", "failed, errors or crashed", "#c62828"),
          ("blocked", "blocked (no station can run them)", "#f9a825"))  # fmt: skip
# What the stories add to a run's bar, drawn as a narrow bar inside it (each is part of a series above, not more
# tests): its flaky failures, and the tests that had not run for `never_ran_after` runs.
MARKS = (("flaky", "flaky", "#6a1b9a"), ("never_ran", "never ran", "#546e7a"))
# With the marks in the legend, the series say less, so that five labels fit one line.
SHORT = {"passed": "passed", "failed": "red", "blocked": "blocked"}
MIN_SEGMENT = 2.0  # px: a single failure under hundreds of passes still shows


@dataclass(frozen=True)
class Segment:
    series: str
    colour: str
    y: float
    height: float
    count: int


@dataclass(frozen=True)
class Bar:
    run: str
    label: str  # the run's start, for the tooltip
    x: float
    width: float
    segments: tuple[Segment, ...]
    marks: tuple[Segment, ...] = ()  # narrow, from the bottom: flaky and never-ran counts


@dataclass(frozen=True)
class Chart:
    width: int
    height: int
    plot: tuple[int, int, int, int]  # left, top, right, bottom
    title: str
    x_label: str
    y_label: str
    x_ticks: tuple[tuple[float, str, str], ...]  # (x, label, text-anchor)
    y_ticks: tuple[tuple[float, str], ...]
    bars: tuple[Bar, ...]
    legend: tuple[tuple[float, str, str], ...]  # (x, label, colour)
    runs: int


def _moment(text: str) -> datetime | None:
    try:
        moment = datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def _nice_top(value: int) -> int:
    """The smallest round number (1, 1.5, 2, 2.5, 3, 4, 5, 6 or 8 times a power of ten) at or above `value`."""
    step = 1
    while True:
        for k in (1, 1.5, 2, 2.5, 3, 4, 5, 6, 8):
            if k * step >= value and float(k * step).is_integer():
                return int(k * step)
        step *= 10


def _x_ticks(start: datetime, end: datetime, x_of: Any) -> tuple[tuple[float, str, str], ...]:
    span = end - start
    fmt = "%Y-%m-%d" if span >= timedelta(days=3) else "%m-%d %H:%M"
    count = 1 if span.total_seconds() <= 0 else 5
    moments = [start + span * (i / max(1, count - 1)) for i in range(count)] if count > 1 else [start]
    labels = [(x_of(m), m.astimezone(timezone.utc).strftime(fmt)) for m in moments]
    # Two identical labels side by side say nothing: keep the first of each.
    kept: list[tuple[float, str]] = []
    for x, label in labels:
        if label not in {shown for _, shown in kept}:
            kept.append((x, label))
    # The outermost labels hang inwards from their tick, so none is cut at the chart's edge.
    return tuple(
        (x, label, "start" if i == 0 and len(kept) > 1 else "end" if i == len(kept) - 1 and len(kept) > 1 else "middle")
        for i, (x, label) in enumerate(kept)
    )


def _one_tick(moments: list[datetime], x_of: Any) -> tuple[tuple[float, str, str], ...]:
    return tuple((x_of(m), m.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M"), "middle") for m in moments)


def _legend(left: int, *, marked: bool) -> tuple[tuple[float, str, str], ...]:
    """Swatch positions, each after the previous label (about 7 px a character at 12 px)."""
    out, x = [], float(left)
    entries = (
        [(SHORT[key], colour) for key, _, colour in SERIES]
        if marked
        else [(label, colour) for _, label, colour in SERIES]
    )
    entries += [(label, colour) for _, label, colour in MARKS] if marked else []
    for label, colour in entries:
        out.append((x, label, colour))
        x += 17 + len(label) * 7 + 18
    return tuple(out)


def _stacked(
    point: dict[str, Any], series: tuple[tuple[str, str, str], ...], bottom: int, scale: float
) -> tuple[Segment, ...]:
    """One segment per series the point counts, stacked upwards from `bottom`."""
    y, out = float(bottom), []
    for key, _, colour in series:
        count = int(point.get(key, 0))
        if count:
            tall = max(MIN_SEGMENT, count * scale)
            y -= tall
            out.append(Segment(key, colour, round(y, 1), round(tall, 1), count))
    return tuple(out)


def layout(history: list[dict[str, Any]]) -> Chart:
    """Bars for `history` (oldest first): x by when each run started, y by its test counts."""
    left, top, right, bottom = LEFT, TOP, WIDTH - RIGHT, HEIGHT - BOTTOM
    dated = [(h, _moment(h.get("started", ""))) for h in history]
    moments = [m for _, m in dated if m is not None]
    first = min(moments, default=datetime(1970, 1, 1, tzinfo=timezone.utc))
    last = max(moments, default=first)
    if len(moments) <= 1:
        # One run: its bar in the middle, under one tick naming when it ran (a dated span would suggest more runs).
        first, last = first - timedelta(hours=1), last + timedelta(hours=1)
    elif last == first:
        first, last = first - timedelta(hours=1), last + timedelta(hours=1)
    pad = (last - first) * 0.03
    start, end = first - pad, last + pad

    def x_of(m: datetime) -> float:
        return round(left + (right - left) * ((m - start) / (end - start)), 1)

    totals = [sum(int(h.get(s, 0)) for s, _, _ in SERIES) for h in history]
    ceiling = _nice_top(max([1, *totals]))
    scale = (bottom - top) / ceiling
    width = round(min(24.0, max(1.5, (right - left) / max(1, len(history)) * 0.6)), 1)
    bars = []
    for i, (h, m) in enumerate(dated):
        centre = x_of(m) if m is not None else left + (right - left) * (i + 0.5) / max(1, len(history))
        segments, marks = _stacked(h, SERIES, bottom, scale), _stacked(h, MARKS, bottom, scale)
        label = m.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC") if m else str(h.get("started", ""))
        bars.append(Bar(str(h.get("run", "")), label, round(centre - width / 2, 1), width, segments, marks))
    y_ticks = tuple((round(bottom - v * scale, 1), str(v)) for v in (0, ceiling // 2, ceiling) if v or v == 0)
    n = len(history)
    return Chart(
        width=WIDTH,
        height=HEIGHT,
        plot=(left, top, right, bottom),
        title=f"Tests per run, {n} comparable run{'s' if n != 1 else ''}",
        x_label="run started (UTC)",
        y_label="tests",
        x_ticks=_x_ticks(first, last, x_of) if len(moments) > 1 else _one_tick(moments, x_of),
        y_ticks=tuple(dict.fromkeys(y_ticks)),
        bars=tuple(bars),
        legend=_legend(left, marked=any(b.marks for b in bars)),
        runs=n,
    )
