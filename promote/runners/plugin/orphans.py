"""Inside each pytest process promote starts: end this process when the one that started it is gone.

A `promote test` that is killed (even with SIGKILL) cannot stop its pytest processes itself. Each of
them, and each xdist worker, notices that its parent died (it is re-parented, so `getppid()`
changes) and kills itself: nothing keeps running unseen past the run that started it. Polling
the parent works the same on Linux and macOS, and, unlike PR_SET_PDEATHSIG, does not fire when
merely the thread that started the process ends.

The watcher is a bare `_thread` thread that never touches `threading`: it stays out of
`threading.enumerate()`, so neither the tested suite's own thread checks nor promote's thread
probe ever see it.
"""

from __future__ import annotations

import _thread
import os
import signal
import time

POLL_S = 0.5
# The watcher's native thread id: a thread that holds no lock, which a process forked from this one may leave behind.
watchers: set[int] = set()


def _watch(parent: int, poll_s: float) -> None:
    watchers.add(_thread.get_native_id())
    while True:
        time.sleep(poll_s)
        if os.getppid() != parent:
            # Nothing is left to read this process's results: stop now, whatever test is running.
            os.kill(os.getpid(), signal.SIGKILL)


def exit_with_parent(poll_s: float = POLL_S) -> None:
    """SIGKILL this process as soon as the process that started it has died."""
    _thread.start_new_thread(_watch, (os.getppid(), poll_s))
