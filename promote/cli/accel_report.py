"""The terminal text of `promote accel` and `promote bench`."""

from __future__ import annotations

from promote.accel.results import AccelResult
from promote.accel.rows import (
    BENCH_HEADER,
    REQUESTS_HEADER,
    SWEEP_HEADER,
    bench_table,
    quality_label,
    requests_table,
    rows,
    sweep_table,
)
from promote.accel.verify import AccelReport
from promote.accel.yardstick import quality_text
from promote.cli.render import findings_lines
from promote.cli.terminal import QUALITY_TONES, mark

VERDICTS = {
    "holds": "every accelerated path holds",
    "broken": (
        "BROKEN: a kill switch, parity or the quality yardstick fails, or the path's ledger or the sweep contradicts "
        "its evidence"
    ),
    "undecided": "UNDECIDED: some evidence could not be decided, in these steps:",
}
# The bench's one undecided step without an error line: it ran, and its interval holds the target.
STRADDLES = "the speedup's interval includes the target: more rounds may decide it"


def _table(header: tuple[str, ...], body: list[list[str]]) -> list[str]:
    """The bench's cases or the sweep's classes as aligned columns (nothing when there are none)."""
    if not body:
        return []
    table = [list(header), *body]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    return ["  " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in table]


def _marked(r: AccelResult, table: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The rows, the yardstick's verdict in its colour."""
    if r.quality is None:
        return table
    label, q = quality_label(r), r.quality
    return [(m, quality_text(q, lambda v: mark(v, QUALITY_TONES[v])) if m == label else v) for m, v in table]


def accel_report(report: AccelReport) -> str:
    lines = []
    for r in report.results:
        lines.append(f"{r.name}" + (f" ({r.package})" if r.package else ""))
        table = _marked(r, rows(r))
        width = max((len(m) for m, _ in table), default=0)
        lines += [f"  {m.ljust(width)}  {v}" for m, v in table]
        if r.bench is not None and r.bench.order:
            first = " ".join("B" if o == "baseline" else "C" for o in r.bench.order)
            lines.append(f"  {'Went first'.ljust(width)}  {first} (B baseline, C candidate)")
        lines += _table(BENCH_HEADER, bench_table(r.bench))
        lines += _table(SWEEP_HEADER, sweep_table(r.sweep))
        lines += _table(REQUESTS_HEADER, requests_table(r.parity))
    if report.findings:
        lines.append("")
        lines += findings_lines(report.findings)
    lines.append("")
    lines.append(VERDICTS[report.verdict])
    if report.verdict == "undecided":
        lines += [f"  {u.name}: {u.step}: {u.error or STRADDLES}" for u in report.undecided]
    return "\n".join(lines)
