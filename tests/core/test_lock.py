"""One promote run at a time: a real flock, a holder that names itself, and one killed holder taken over."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from promote.core import state
from promote.core.lock import LockBusy, hold
from promote.release import journal

HOLDER = """
import sys, time
from pathlib import Path
from promote.core.lock import hold
with hold(Path(sys.argv[1]), "promote audit"):
    print("held", flush=True)
    time.sleep(60)
"""


def test_a_lock_left_by_a_killed_run_is_taken_over(tmp_path: Path) -> None:
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        with pytest.raises(LockBusy) as busy, hold(tmp_path, "promote merge", wait_s=0):
            pass
        assert f"pid {holder.pid} (`promote audit`, started " in str(busy.value)
    finally:
        holder.kill()
        holder.wait()

    # The kernel dropped the dead holder's flock: the next run takes the lock without waiting.
    with hold(tmp_path, "promote merge", wait_s=0) as path:
        assert json.loads(path.read_text())["pid"] == os.getpid()
        assert json.loads(path.read_text())["command"] == "promote merge"


def test_a_second_holder_in_the_same_process_waits_then_gives_up(tmp_path: Path) -> None:
    with (
        hold(tmp_path, "promote test", wait_s=0),
        pytest.raises(LockBusy, match=r"waited 0\.2 s"),
        hold(tmp_path, "promote merge", wait_s=0.2),
    ):
        pass
    with hold(tmp_path, "promote merge", wait_s=0):
        pass


def test_promote_state_is_private(tmp_path: Path) -> None:
    with hold(tmp_path, "promote merge", wait_s=0):
        journal.append(tmp_path, {"op": "probe"})
    promote_dir = tmp_path / ".promote"
    assert stat.S_IMODE(promote_dir.stat().st_mode) == 0o700
    for name in ("lock", "journal.jsonl", ".gitignore"):
        assert stat.S_IMODE((promote_dir / name).stat().st_mode) == 0o600, name
    assert state.private_dir(promote_dir / "runs" / "x").stat().st_mode & 0o077 == 0


def test_a_line_cut_short_by_a_crash_is_skipped_and_does_not_swallow_the_next(tmp_path: Path) -> None:
    journal.append(tmp_path, {"op": "push-intent", "id": "a"})
    with (tmp_path / ".promote" / "journal.jsonl").open("a") as f:
        f.write('{"op": "push", "id"')  # a write that a full disk or a kill cut short
    journal.append(tmp_path, {"op": "push", "id": "b"})
    assert [(e["op"], e["id"]) for e in journal.read(tmp_path)] == [("push-intent", "a"), ("push", "b")]
