"""pytest processes whose records are complete and read, still shutting down, waited for before a run is stored.

Once a suite has imported torch or transformers, the interpreter's own shutdown takes a second or more after the
last record is written, and an xdist controller then waits for each worker's. A process says when its records
are complete (promote.runners.plugin.stops); the run reads them at once and goes on (the next rerun, the causes)
while the process shuts down, and `settle` waits for every such process before the run is stored, so none is
left running and none is cut short. A process whose exit status is not the one it said (an atexit handler, a
crash at shutdown) is returned by `settle`: CI would see that status.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

R = TypeVar("R")

# How long a process may take to shut down after its records are complete before it is killed.
SETTLE_S = 120.0


@dataclass(frozen=True)
class Ended:
    """A process that shut down with another status than the one it said once its records were complete."""

    package: str
    part: str
    said: int
    status: int
    log: Path


@dataclass(frozen=True)
class _Tail:
    package: str
    part: str | None  # None: a rerun, whose verdict its records alone decide
    proc: subprocess.Popen[bytes]
    said: int
    log: Path
    group: bool  # started in a session of its own: killed with the processes it started


class Tails:
    """The processes still shutting down; safe to use from the rerun threads at once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tails: list[_Tail] = []

    def add(
        self,
        proc: subprocess.Popen[bytes],
        said: int,
        log: Path,
        *,
        package: str,
        part: str | None = None,
        group: bool = False,
    ) -> None:
        with self._lock:
            self._tails.append(_Tail(package, part, proc, said, log, group))

    def settle(self, timeout_s: float = SETTLE_S) -> tuple[Ended, ...]:
        """Wait for every process still shutting down (killing one that overruns `timeout_s`); those of a
        package's run (not its reruns) that ended with another status than they said."""
        with self._lock:
            tails, self._tails = self._tails, []
        deadline = time.monotonic() + timeout_s
        changed = []
        for tail in tails:
            try:
                status = tail.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _kill(tail)
                status = tail.proc.wait()
            if tail.part is not None and status != tail.said:
                changed.append(Ended(tail.package, tail.part, tail.said, int(status), tail.log))
        return tuple(changed)

    def kill(self) -> None:
        """End every process still shutting down (the run is being interrupted)."""
        with self._lock:
            tails, self._tails = self._tails, []
        for tail in tails:
            _kill(tail)
            tail.proc.wait()


def _kill(tail: _Tail) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if tail.group:
            os.killpg(tail.proc.pid, signal.SIGKILL)
        else:
            tail.proc.kill()


# One promote process's: its runs and reruns hand their processes here, and the run settles them.
TAILS = Tails()


def settled(work: Callable[[], R]) -> tuple[R, tuple[Ended, ...]]:
    """`work`'s result once every process it left shutting down has ended (killed at once when it is interrupted),
    and those that ended with another status than they said."""
    try:
        done = work()
    except BaseException:
        TAILS.kill()
        raise
    return done, TAILS.settle()
