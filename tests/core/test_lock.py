"""One promote run at a time: a real flock, a holder that names itself, and one killed holder taken over."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from dataclasses import replace
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
        journal.append(tmp_path, journal.MergeDone("main", "0" * 40, "merged"))
    promote_dir = tmp_path / ".promote"
    assert stat.S_IMODE(promote_dir.stat().st_mode) == 0o700
    for name in ("lock", "journal.jsonl", ".gitignore"):
        assert stat.S_IMODE((promote_dir / name).stat().st_mode) == 0o600, name
    assert state.private_dir(promote_dir / "runs" / "x").stat().st_mode & 0o077 == 0


def test_a_line_cut_short_by_a_crash_is_skipped_and_does_not_swallow_the_next(tmp_path: Path) -> None:
    intent = journal.PushIntent("a", "origin", "/srv/origin.git", "main", None, "1" * 40)
    journal.append(tmp_path, intent)
    with (tmp_path / ".promote" / "journal.jsonl").open("a") as f:
        f.write('{"op": "push", "id"')  # a write that a full disk or a kill cut short
    journal.append(tmp_path, replace(intent, id="b").done("advanced", "1" * 40, None))
    read = journal.read(tmp_path)
    assert [(e.op, e.id) for e in read if not isinstance(e, journal.MergeDone)] == [("push-intent", "a"), ("push", "b")]
    assert all(e.time for e in read)


def test_each_entry_reads_back_as_written_and_a_line_of_another_kind_is_skipped(tmp_path: Path) -> None:
    intent = journal.PushIntent("r/origin", "origin", "/srv/origin.git", "main", "2" * 40, "3" * 40)
    written = [
        journal.append(tmp_path, intent),
        journal.append(tmp_path, intent.done("rejected", "2" * 40, "pre-receive hook declined")),
        journal.append(tmp_path, journal.MergeDone("main", "3" * 40, "blocked")),
    ]
    with (tmp_path / ".promote" / "journal.jsonl").open("a") as f:
        f.write('{"op": "gc", "time": "x"}\n{"op": "merge", "trunk": "main", "candidate": "c", "verdict": "maybe"}\n')
    assert journal.read(tmp_path) == written
    lines = [json.loads(x) for x in (tmp_path / ".promote" / "journal.jsonl").read_text().splitlines()]
    assert lines[1] == {
        "op": "push", "id": "r/origin", "mirror": "origin", "url": "/srv/origin.git", "trunk": "main",
        "before": "2" * 40, "candidate": "3" * 40, "status": "rejected", "after": "2" * 40,
        "reason": "pre-receive hook declined", "time": written[1].time,
    }  # fmt: skip
