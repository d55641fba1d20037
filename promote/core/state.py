"""promote's own state on disk: `.promote/` under the repository, its run ids, private files and directories."""

from __future__ import annotations

import os
from datetime import datetime, timezone
from pathlib import Path
from typing import BinaryIO

from promote.core.errors import PromoteError

STATE_DIR = ".promote"
RUNS = "runs"
BISECT = "bisect"


class StateError(PromoteError):
    """promote's own state (`.promote/`) cannot be created, read or written."""


def new_run_id() -> str:
    """A run's id: sortable by time (to the microsecond, so two runs in one second keep their order), and unique."""
    # os.urandom, not `secrets`: the same bytes, without loading hashlib.
    now = datetime.now(timezone.utc)
    return now.strftime("%Y%m%dT%H%M%S") + f".{now.microsecond:06d}Z-" + os.urandom(2).hex()


def private_dir(path: Path) -> Path:
    """`path` as a directory, each missing level created 0700: runs and journals may hold secrets."""
    # mkdir(parents=True) would give the parents the default mode: create them one by one instead.
    missing = []
    for level in (path, *path.parents):
        if level.is_dir():
            break
        missing.append(level)
    for level in reversed(missing):
        level.mkdir(mode=0o700, exist_ok=True)
    return path


def private_file(path: Path, flags: int = os.O_WRONLY | os.O_APPEND) -> int:
    """An open descriptor on `path`, created 0600 if missing; the caller closes it."""
    return os.open(path, flags | os.O_CREAT | os.O_CLOEXEC, 0o600)


def write_private(path: Path, text: str) -> Path:
    """Write `text` to `path` (replacing what was there), created 0600 in a 0700 directory."""
    private_dir(path.parent)
    with os.fdopen(private_file(path, os.O_WRONLY | os.O_TRUNC), "w", encoding="utf-8") as f:
        f.write(text)
    return path


def open_private_log(path: Path) -> BinaryIO:
    """`path` opened for writing (truncated), created 0600 in a 0700 directory: a process's log."""
    private_dir(path.parent)
    return os.fdopen(private_file(path, os.O_WRONLY | os.O_TRUNC), "wb")


def state_path(root: Path) -> Path:
    """Where `.promote/` is under `root`, not created: for reading what may not be there."""
    return root / STATE_DIR


def state_dir(root: Path) -> Path:
    """`.promote/` under `root`, created 0700 on first use and ignored by git on its own."""
    path = state_path(root)
    try:
        private_dir(path)
        ignore = path / ".gitignore"
        if not ignore.exists():
            # Our state must never show up as an untracked change in the user's repository.
            fd = private_file(ignore, os.O_WRONLY | os.O_TRUNC)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write("*\n")
    except OSError as e:
        raise StateError(f"cannot use {path} for promote's state: {e.strerror or e}") from None
    return path


def runs_dir(root: Path) -> Path:
    """`.promote/runs/`: one directory per `promote test` or audit run."""
    return state_dir(root) / RUNS


def runs_path(root: Path) -> Path:
    """Where `.promote/runs/` is under `root`, not created: for finding earlier runs."""
    return state_path(root) / RUNS


def bisect_dir(root: Path) -> Path:
    """`.promote/bisect/`: one directory per `promote bisect`."""
    return state_dir(root) / BISECT
