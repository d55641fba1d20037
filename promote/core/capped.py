"""Read a configuration file someone else wrote without trusting its size."""

from __future__ import annotations

from pathlib import Path


def read_capped(path: Path, limit: int) -> bytes | None:
    """All of `path` when it holds at most `limit` bytes; None when it holds more (OSError when it cannot be read)."""
    with path.open("rb") as f:
        data = f.read(limit + 1)
    return data if len(data) <= limit else None


class Unreadable(Exception):
    """A file that could not be read within its bound: one line naming it, and why."""


def read_bounded(path: Path, limit: int) -> bytes:
    """All of `path`, or Unreadable when it cannot be read or holds more than `limit` bytes."""
    try:
        data = read_capped(path, limit)
    except OSError as e:
        raise Unreadable(f"{path}: cannot be read: {e.strerror or e}") from None
    if data is None:
        raise Unreadable(f"{path}: larger than {limit} bytes: not read")
    return data
