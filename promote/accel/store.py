"""The accelerations' history: one JSON line per run and path, so a page can show the speedup over time."""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from promote.config.settings import Config
from promote.core import state
from promote.core.bounded_json import read_lines

if TYPE_CHECKING:
    from promote.accel.verify import AccelReport

FILE = "accelerations.jsonl"


def record(config: Config, report: AccelReport, *, kind: str, run_id: str | None = None) -> None:
    """Append each path's figures (not its per-round detail) to the history."""
    path = state.state_dir(config.root) / FILE
    when = datetime.now(timezone.utc).isoformat(timespec="seconds")
    lines = []
    for r in report.results:
        bench = r.bench
        lines.append(
            json.dumps({
                "time": when, "kind": kind, "run": run_id, "name": r.name,
                "parity": None if r.parity is None else r.parity.verdict,
                "quality": None if r.quality is None else r.quality.verdict,
                "speedup": None if bench is None or bench.speedup is None else round(bench.speedup, 4),
                "interval": None if bench is None or bench.interval is None
                else [round(bench.interval.low, 4), round(bench.interval.high, 4)],
                "verdict": None if bench is None else bench.verdict,
                "findings": [f.check for f in r.findings],
            })
        )  # fmt: skip
    try:
        with os.fdopen(state.private_file(path), "a", encoding="utf-8") as f:
            f.write("".join(line + "\n" for line in lines))
    except OSError as e:  # a full disk: one line naming the file, not a traceback
        raise state.StateError(f"cannot write {path}: {e.strerror or e}") from None


def recent(config: Config, name: str, limit: int = 20) -> list[dict[str, Any]]:
    """The path's last `limit` entries, oldest first (lines a crash cut short are skipped)."""
    path = state.state_dir(config.root) / FILE
    if not path.is_file():
        return []
    out = []
    for entry in read_lines(path):
        if isinstance(entry, dict) and entry.get("name") == name:
            out.append(entry)
    return out[-limit:]
