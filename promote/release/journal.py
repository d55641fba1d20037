"""An append-only record of every operation promote performed on a mirror."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from promote.core.redact import redact
from promote.core.state import StateError, private_file, state_dir, state_path

JOURNAL = "journal.jsonl"


@dataclass(frozen=True)
class MergeRecord:
    """The journal's account of the merge that put the candidate on the mirrors."""

    trunk: str
    candidate: str
    time: str
    pushed: tuple[tuple[str, str | None], ...]  # (mirror, its trunk before), for each mirror advanced

    @property
    def headline(self) -> str:
        return f"{self.trunk} fast-forwarded to `{self.candidate[:7]}` at {self.time}, no force"


def append(root: Path, entry: dict[str, object]) -> dict[str, object]:
    """Append one entry, stamped with the time, to `.promote/journal.jsonl`, on disk before returning.

    Raises StateError when it cannot be written (state dir a file, the journal a directory, disk full).
    """
    record = {"time": datetime.now(timezone.utc).isoformat(timespec="seconds"), **entry}
    line = (redact(json.dumps(record, sort_keys=True)) + "\n").encode("utf-8")
    path = state_dir(root) / JOURNAL
    try:
        fd = private_file(path, os.O_RDWR | os.O_APPEND)
        try:
            size = os.fstat(fd).st_size
            # A line cut short (a full disk, a kill mid-write) must not swallow the next one.
            if size and os.pread(fd, 1, size - 1) != b"\n":
                line = b"\n" + line
            # One write on an O_APPEND descriptor: a line is never interleaved with another writer's.
            if os.write(fd, line) != len(line):
                raise OSError(28, "short write (disk full?)")
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as e:
        raise StateError(f"cannot write the journal {path}: {e.strerror or e}") from None
    return record


def writable(root: Path) -> Path:
    """The journal's path, after making sure an entry could be appended to it (creating it if need be)."""
    path = state_dir(root) / JOURNAL
    try:
        os.close(private_file(path))
    except OSError as e:
        raise StateError(f"cannot write the journal {path}: {e.strerror or e}") from None
    return path


def read(root: Path) -> list[dict[str, object]]:
    """Every journal entry, oldest first; a line cut short by a crash is skipped."""
    path = state_path(root) / JOURNAL
    try:
        text = path.read_text(encoding="utf-8") if path.exists() else ""
    except OSError as e:
        raise StateError(f"cannot read the journal {path}: {e.strerror or e}") from None
    entries = []
    for line in text.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict):
            entries.append(entry)
    return entries


def last_merge(root: Path, candidate: str) -> MergeRecord | None:
    """The journal's record of the merge that put `candidate` on every mirror, if promote did it."""
    entries = read(root)
    for i in range(len(entries) - 1, -1, -1):
        e = entries[i]
        if e.get("op") == "merge" and e.get("candidate") == candidate and e.get("verdict") == "merged":
            start = max((j for j in range(i) if entries[j].get("op") == "merge"), default=-1) + 1
            pushed = {
                str(p.get("mirror")): (None if p.get("before") is None else str(p.get("before")))
                for p in entries[start:i]
                if p.get("op") == "push" and p.get("candidate") == candidate and p.get("status") == "advanced"
            }
            return MergeRecord(str(e.get("trunk")), candidate, str(e.get("time", "")), tuple(pushed.items()))
    return None
