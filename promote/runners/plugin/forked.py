"""Several selections of one collected session, each run in a process of its own forked after collection.

A cause is found by asking, again and again, whether a test fails after some earlier tests in a fresh process.
Every rerun imports and collects the whole package first (that is part of the order), so most of a rerun is that
start-up. Here it is paid once: the session collects, then forks one child per selection, and each child runs its
selection in order from exactly the state a fresh process has after collecting, with its own records
(`results-s<i>.json`, `progress-s<i>.jsonl`, `fatal-s<i>.log`); `forked.json` says how each ended (its exit
status or the signal that killed it). The children run one after another, never at once: tests that share a file,
a port or a server would otherwise fail for each other, and two repeats of a racy test would not be independent.

A child starts from the state the parent had: the `random` module, which CPython reseeds in every forked child,
gets the parent's state back (a module that calls `random.seed(...)` when imported is seeded, as in a fresh
process). Forking is refused where it is not safe: off Linux (macOS forbids fork without exec once system
frameworks such as Metal are loaded) and when another thread runs (the child would have only the forking thread,
and a lock another thread held stays held). Then this process runs only the first selection, and `forked.json`
says why, so the runner starts each of the others as a process of its own.
"""

from __future__ import annotations

import contextlib
import faulthandler
import json
import os
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from promote.core import state
from promote.core.bounded_json import JsonRejected, read_object
from promote.runners.plugin.records import write_atomic

SELECTIONS: pytest.StashKey[list[list[str]]] = pytest.StashKey()
NOOP_NAME = "promote-no-op"
# The node id pytest gives an item whose parent is the session (whose own id is empty).
NOOP_ID = f"::{NOOP_NAME}"
MARKER = "forked.json"


class NoOp(pytest.Item):
    """promote's own control: a test that does nothing. A victim that fails after it fails after any test at all."""

    def runtest(self) -> None:
        return None

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, "promote's no-op test"


def read_selections(path: Path) -> list[list[str]]:
    """The selections promote wrote: a JSON list of lists of test ids, each run in this order."""
    data = json.loads(path.read_text(encoding="utf-8"))
    return [[str(t) for t in selection] for selection in data]


def choose(session: pytest.Session, items: list[pytest.Item], selections: list[list[str]]) -> list[pytest.Item]:
    """Every item some selection names (promote's no-op among them when asked for), in collection order."""
    session.config.stash[SELECTIONS] = selections
    wanted = {t for selection in selections for t in selection}
    chosen = [item for item in items if item.nodeid in wanted]
    if NOOP_ID in wanted:
        chosen.append(NoOp.from_parent(session, name=NOOP_NAME))
    return chosen


def fork_refused() -> str | None:
    """Why this process may not fork its selections, or None when it may."""
    if not sys.platform.startswith("linux") or not hasattr(os, "fork"):
        return f"not forked on {sys.platform}: a fork without exec is unsafe there once system frameworks are loaded"
    from promote.runners.plugin.orphans import watchers

    tasks = {int(t) for t in os.listdir("/proc/self/task")} if os.path.isdir("/proc/self/task") else set()
    threads = max(len(tasks - watchers), threading.active_count())
    if threads > 1:
        return f"not forked: {threads} threads run after collection, and a child would have only one of them"
    return None


def run_selections(session: pytest.Session, out_dir: Path, recorder: Any) -> None:
    """Run each selection in a child of its own (or only the first, here, when forking is refused)."""
    selections = session.config.stash[SELECTIONS]
    by_id = {item.nodeid: item for item in session.items}
    chosen = [[by_id[t] for t in selection if t in by_id] for selection in selections]
    why = fork_refused()
    if why is not None:
        _write_marker(out_dir, {"forked": False, "why": why})
        _run(session, recorder, out_dir, 0, chosen[0])
        return
    # Said before any child starts: a rerun killed at its timeout still tells how its selections ran.
    _write_marker(out_dir, {"forked": True})
    ended: dict[int, dict[str, int | None]] = {}
    for i, items in enumerate(chosen):
        sys.stdout.flush()
        sys.stderr.flush()
        # CPython reseeds the `random` module in a forked child; a fresh process keeps what collection seeded.
        seeded = sys.modules["random"].getstate() if "random" in sys.modules else None
        pid = os.fork()
        if pid == 0:
            code = 3
            try:
                from promote.runners.plugin.orphans import exit_with_parent

                exit_with_parent()
                if seeded is not None:
                    sys.modules["random"].setstate(seeded)
                _run(session, recorder, out_dir, i, items)
                code = 0
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        # One child at a time, waited for by its own pid (not any child a plugin of the session may have started).
        _, status = os.waitpid(pid, 0)
        signal = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
        ended[i] = {"status": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None, "signal": signal}
    _write_marker(out_dir, {"forked": True, "ended": {str(i): ended[i] for i in sorted(ended)}})


def _run(session: pytest.Session, recorder: Any, out_dir: Path, i: int, items: list[pytest.Item]) -> None:
    """One selection, in order, recorded as worker `s<i>`; a fatal error's dump goes to its own file."""
    worker = f"s{i}"
    # Open until the process ends, private like every record; without it (a full disk) the dump goes to stderr.
    with contextlib.suppress(OSError):
        fatal = os.open(out_dir / f"fatal-{worker}.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        faulthandler.enable(file=fatal, all_threads=False)
    recorder.become(worker)
    for k, item in enumerate(items):
        nextitem = items[k + 1] if k + 1 < len(items) else None
        item.config.hook.pytest_runtest_protocol(item=item, nextitem=nextitem)
    recorder.pytest_sessionfinish(exitstatus=0)


def _write_marker(out_dir: Path, data: dict[str, Any]) -> None:
    # Replaced whole, never half-written (the runner may read it after killing this process at its timeout), and
    # private like every record; a disk too full for it leaves the runner without it, which it reports as such.
    with contextlib.suppress(state.StateError):
        write_atomic(out_dir / MARKER, json.dumps(data))


def read_marker(out_dir: Path) -> dict[str, Any] | None:
    """What `run_selections` wrote, or None when the process ended before it could."""
    # Through the one bounded reader: the tested code runs in the process that writes it.
    try:
        return read_object(out_dir / MARKER)
    except (OSError, JsonRejected):
        return None
