"""An append-only record of every operation promote performed on a mirror."""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from pathlib import Path

from promote.redact import redact

STATE_DIR = ".promote"
JOURNAL = "journal.jsonl"


def new_run_id() -> str:
    """A run's id: sortable by time, unique across runs started in the same second."""
    # os.urandom, not `secrets`: the same bytes, without loading hashlib before the tests can start.
    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-" + os.urandom(2).hex()


def state_dir(root: Path) -> Path:
    """`.promote/` under `root`, created on first use and ignored by git on its own."""
    path = root / STATE_DIR
    path.mkdir(exist_ok=True)
    ignore = path / ".gitignore"
    if not ignore.exists():
        # Our state must never show up as an untracked change in the user's repository.
        ignore.write_text("*\n")
    return path


def append(root: Path, entry: dict[str, object]) -> None:
    """Append one entry, stamped with the time, to `.promote/journal.jsonl`."""
    record = {"time": datetime.now(timezone.utc).isoformat(timespec="seconds"), **entry}
    line = redact(json.dumps(record, sort_keys=True)) + "\n"
    with (state_dir(root) / JOURNAL).open("a", encoding="utf-8") as f:
        f.write(line)
        f.flush()
        os.fsync(f.fileno())


def read(root: Path) -> list[dict[str, object]]:
    """Every journal entry, oldest first."""
    path = root / STATE_DIR / JOURNAL
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
