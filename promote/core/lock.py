"""One promote run at a time per repository: an advisory lock on `.promote/lock` that names its holder."""

from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

from promote.core.bounded_json import loads
from promote.core.errors import PromoteError
from promote.core.state import StateError, private_file, read_state, state_dir

LOCK = "lock"
# How long a second run waits for the first by default; PROMOTE_LOCK_WAIT_S overrides it.
DEFAULT_WAIT_S = 10.0
_POLL_S = 0.1


class LockBusy(PromoteError):
    """Another promote run holds the lock (exit 2: nothing was done, run again later)."""


def wait_default() -> float:
    """The configured wait: PROMOTE_LOCK_WAIT_S seconds, else DEFAULT_WAIT_S."""
    raw = os.environ.get("PROMOTE_LOCK_WAIT_S", "")
    try:
        return max(0.0, float(raw)) if raw else DEFAULT_WAIT_S
    except ValueError:
        raise PromoteError(f"PROMOTE_LOCK_WAIT_S: expected a number of seconds, got {raw!r}") from None


def holder(path: Path) -> str:
    """Who holds the lock, as its holder wrote it: pid, command and start time."""
    try:
        info = loads(read_state(path).decode("utf-8").strip() or "{}")
    except (OSError, ValueError, StateError):
        info = {}
    if not isinstance(info, dict) or "pid" not in info:
        return "a promote run that has not said who it is yet"
    return f"pid {info.get('pid')} (`{info.get('command')}`, started {info.get('started')})"


@contextmanager
def hold(root: Path, command: str, *, wait_s: float | None = None) -> Iterator[Path]:
    """Hold `.promote/lock` under `root` while the block runs; wait up to `wait_s`, then raise LockBusy."""
    with hold_file(state_dir(root) / LOCK, command, wait_s=wait_s) as path:
        yield path


@contextmanager
def hold_file(path: Path, command: str, *, wait_s: float | None = None) -> Iterator[Path]:
    """Hold an flock on `path` (created 0600) while the block runs; wait up to `wait_s`, then raise LockBusy.

    The kernel drops an flock when its process dies, so a lock left by a killed run is simply taken.
    """
    wait = wait_default() if wait_s is None else wait_s
    try:
        fd = private_file(path, os.O_RDWR)
    except OSError as e:
        raise PromoteError(f"cannot open the lock {path}: {e.strerror or e}") from None
    try:
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise LockBusy(f"another promote run holds {path}: {holder(path)}; waited {wait:g} s") from None
                time.sleep(_POLL_S)
        started = datetime.now(timezone.utc).isoformat(timespec="seconds")
        note = json.dumps({"pid": os.getpid(), "command": command, "started": started}) + "\n"
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, note.encode("utf-8"), 0)
        except OSError:
            # The note only names the holder for whoever waits (a full disk refuses it); the flock is the lock.
            pass
        yield path
    finally:
        # Closing the descriptor releases the lock; the file stays, naming the last holder.
        os.close(fd)
