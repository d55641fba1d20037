"""Read a configuration file someone else wrote without trusting its size."""

from __future__ import annotations

from pathlib import Path


def read_capped(path: Path, limit: int) -> bytes | None:
    """All of `path` when it holds at most `limit` bytes; None when it holds more (OSError when it cannot be read)."""
    with path.open("rb") as f:
        data = f.read(limit + 1)
    return data if len(data) <= limit else None
