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


def _inside_state(path: Path) -> bool:
    return STATE_DIR in path.parts


def private_dir(path: Path) -> Path:
    """`path` as a directory, each missing level created 0700: runs and journals may hold secrets.

    Inside `.promote/`, a level that is a symlink is refused (StateError), never followed: a checkout (a pull
    request's) can hold one pointing anywhere, and promote would write its state there.
    """
    # mkdir(parents=True) would give the parents the default mode: create them one by one instead.
    missing = []
    for level in (path, *path.parents):
        if _inside_state(level) and level.is_symlink():
            raise StateError(f"{level} is a symlink; promote does not follow symlinks in its state directory")
        if level.is_dir() and not _inside_state(level.parent):
            break
        if not level.is_dir():
            missing.append(level)
    for level in reversed(missing):
        try:
            level.mkdir(mode=0o700, exist_ok=True)
        except OSError as e:
            raise StateError(f"cannot use {level} for promote's state: {e.strerror or e}") from None
    return path


def private_file(path: Path, flags: int = os.O_WRONLY | os.O_APPEND) -> int:
    """An open descriptor on `path`, created 0600 if missing; the caller closes it.

    Inside `.promote/`, a symlink at `path` is refused by the kernel (OSError, ELOOP) rather than followed.
    """
    nofollow = getattr(os, "O_NOFOLLOW", 0) if _inside_state(path) else 0
    return os.open(path, flags | os.O_CREAT | os.O_CLOEXEC | nofollow, 0o600)


def read_state(path: Path) -> bytes:
    """The bytes of a file of promote's state; b"" when it is missing. A symlink there is refused, never read:
    a checkout can hold one pointing at any file of the machine, and promote would show or parse it."""
    nofollow = getattr(os, "O_NOFOLLOW", 0) if _inside_state(path) else 0
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | nofollow)
    except FileNotFoundError:
        return b""
    except OSError as e:
        if path.is_symlink():
            raise StateError(f"{path} is a symlink; promote does not follow symlinks in its state directory") from None
        raise StateError(f"cannot read {path}: {e.strerror or e}") from None
    with os.fdopen(fd, "rb") as f:
        return f.read()


def write_private(path: Path, text: str) -> Path:
    """Write `text` to `path` (replacing what was there), created 0600 in a 0700 directory."""
    private_dir(path.parent)
    try:
        with os.fdopen(private_file(path, os.O_WRONLY | os.O_TRUNC), "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as e:  # a full disk: one line naming the file, not a traceback
        raise StateError(f"cannot write {path}: {e.strerror or e}") from None
    return path


def open_private_log(path: Path) -> BinaryIO:
    """`path` opened for writing (truncated), created 0600 in a 0700 directory: a process's log."""
    private_dir(path.parent)
    try:
        return os.fdopen(private_file(path, os.O_WRONLY | os.O_TRUNC), "wb")
    except OSError as e:
        raise StateError(f"cannot write {path}: {e.strerror or e}") from None


def state_path(root: Path) -> Path:
    """Where `.promote/` is under `root`, not created: for reading what may not be there."""
    return root / STATE_DIR


def state_dir(root: Path) -> Path:
    """`.promote/` under `root`, created 0700 on first use and ignored by git on its own."""
    path = state_path(root)
    _refuse_tracked(root)
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


# Roots whose `.promote/` git was asked about once already in this process.
_UNTRACKED: set[Path] = set()


def _refuse_tracked(root: Path) -> None:
    """StateError when git tracks anything under `.promote/`: committed state (a symlink to a file elsewhere,
    a forged journal) comes from whoever wrote the commit, and promote must not write through it or trust it."""
    if root in _UNTRACKED:
        return
    from promote.core.git import run_git

    listed = run_git(root, "ls-files", "-z", "--", STATE_DIR)
    tracked = [p for p in listed.stdout.split("\0") if p] if listed.ok else []
    if tracked:
        raise StateError(
            f"{root / tracked[0]} is tracked by git; {STATE_DIR}/ is promote's own state and must not be "
            f"committed (`git rm -r --cached {STATE_DIR}`)"
        )
    _UNTRACKED.add(root)


def runs_dir(root: Path) -> Path:
    """`.promote/runs/`: one directory per `promote test` or audit run."""
    return state_dir(root) / RUNS


def runs_path(root: Path) -> Path:
    """Where `.promote/runs/` is under `root`, not created: for finding earlier runs."""
    return state_path(root) / RUNS


def bisect_dir(root: Path) -> Path:
    """`.promote/bisect/`: one directory per `promote bisect`."""
    return state_dir(root) / BISECT
