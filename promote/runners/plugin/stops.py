"""What each process collected, and why pytest stopped before running all of it (its own --maxfail or -x).

The runner compares what ran with what was collected: a test collected and never started is `not-run`, still
counted as collected, never as a test gone from the package.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from promote.runners.plugin.records import write_atomic


@dataclass(frozen=True)
class Stop:
    """Why one pytest process stopped early, in pytest's words, and the --maxfail it ran under (0: none)."""

    reason: str
    maxfail: int


def write_collected(out_dir: Path, worker: str, nodeids: list[str]) -> None:
    """The ids (as recorded) this process collected to run, after every selection, one per line."""
    write_atomic(out_dir / f"collected-{worker}.txt", "".join(f"{n}\n" for n in nodeids))


def write_stop(out_dir: Path, process: str, reason: str, maxfail: int) -> None:
    write_atomic(out_dir / f"stopped-{process}.json", json.dumps({"reason": reason, "maxfail": maxfail}))


def read_collected(out_dir: Path) -> list[str]:
    """Every id any process of this part collected to run, once, in the order first seen."""
    seen: dict[str, None] = {}
    for path in sorted(out_dir.glob("collected-*.txt")):
        try:
            seen.update(dict.fromkeys(line for line in path.read_text(encoding="utf-8").splitlines() if line))
        except (OSError, UnicodeDecodeError):
            continue
    return list(seen)


def read_stop(out_dir: Path) -> Stop | None:
    """Why a process of this part stopped early, when one said (the first, by name)."""
    for path in sorted(out_dir.glob("stopped-*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            return Stop(str(data["reason"]), int(data.get("maxfail") or 0))
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return None
