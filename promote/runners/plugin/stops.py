"""What each process collected, why pytest stopped before running all of it (its own --maxfail or -x), and that
its records are complete.

The runner compares what ran with what was collected: a test collected and never started is `not-run`, still
counted as collected, never as a test gone from the package. Once a process says its records are complete (and
its exit status), the runner reads them at once instead of waiting for the interpreter's own shutdown, which
takes seconds once a suite has imported torch or transformers.
"""

from __future__ import annotations

import contextlib
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from promote.core import state
from promote.core.bounded_json import JsonRejected, read_object
from promote.runners.plugin.records import write_atomic


@dataclass(frozen=True)
class Stop:
    """Why one pytest process stopped early, in pytest's words, and the --maxfail it ran under (0: none)."""

    reason: str
    maxfail: int


def write_collected(out_dir: Path, worker: str, nodeids: list[str]) -> None:
    """The ids (as recorded) this process collected to run, after every selection, one per line."""
    write_atomic(out_dir / f"collected-{worker}.txt", "".join(f"{n}\n" for n in nodeids))


def write_stop(out_dir: Path, process: str, reason: str, maxfail: int) -> None:
    write_atomic(out_dir / f"stopped-{process}.json", json.dumps({"reason": reason, "maxfail": maxfail}))


def read_collected(out_dir: Path) -> list[str]:
    """Every id any process of this part collected to run, once, in the order first seen."""
    seen: dict[str, None] = {}
    for path in sorted(out_dir.glob("collected-*.txt")):
        try:
            seen.update(dict.fromkeys(line for line in path.read_text(encoding="utf-8").splitlines() if line))
        except (OSError, UnicodeDecodeError):
            continue
    return list(seen)


def read_stop(out_dir: Path) -> Stop | None:
    """Why a process of this part stopped early, when one said (the first, by name)."""
    for path in sorted(out_dir.glob("stopped-*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            return Stop(str(data["reason"]), int(data.get("maxfail") or 0))
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return None


SESSION = pytest.StashKey[pytest.Session]()


def session_finished(session: pytest.Session, *, records_here: bool) -> None:
    """An xdist controller's records (its workers') are complete now, before it waits for its workers to exit;
    a process that records its own tests says so once unconfigured (everything written and printed)."""
    if (ended := _ended(session.config)) is None:
        return
    if records_here:
        session.config.stash[SESSION] = session
    else:
        write_ended(ended, int(session.exitstatus))


def unconfigured(config: pytest.Config) -> None:
    # The status as pytest will return it: a later hook of the session may have changed it.
    if (ended := _ended(config)) is not None and SESSION in config.stash:
        write_ended(ended, int(config.stash[SESSION].exitstatus))


def _ended(config: pytest.Config) -> Path | None:
    """Where the process promote started says its records are complete (never an xdist worker, never a fleet's)."""
    path = config.getoption("promote_ended", default=None)
    if path is None or hasattr(config, "workerinput") or config.getoption("promote_fleet", default=None):
        return None
    return Path(path)


def write_ended(path: Path, exitstatus: int) -> None:
    """This process's records are complete and it will exit with `exitstatus` (what pytest returns)."""
    # Everything pytest printed is in the log before the runner may read it.
    sys.stdout.flush()
    sys.stderr.flush()
    # A disk too full for it only leaves the runner waiting for the process's end, as without it.
    with contextlib.suppress(state.StateError):
        write_atomic(path, json.dumps({"exitstatus": exitstatus}))


def read_ended(path: Path) -> int | None:
    """The exit status a process said it ends with once its records were complete; None until it said so."""
    try:
        status = read_object(path).get("exitstatus")
    except (OSError, JsonRejected):
        return None
    return status if isinstance(status, int) and not isinstance(status, bool) else None
