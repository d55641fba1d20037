"""The history survives: two promotes creating it at once, and a history file that is not a database."""

from __future__ import annotations

import json
import multiprocessing
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from promote.evidence.history import DB_NAME, History, StoredRun, TestOutcome
from tests.helpers.cli import run
from tests.helpers.gitrepos import commit, git
from tests.helpers.packages import write_config, write_package

GARBAGE = b"\x00\xffnot a database at all\x1b[2J" * 200


def stored(run_id: str) -> StoredRun:
    return StoredRun(
        run_id=run_id, kind="test", started=f"2026-01-01T00:00:{run_id[-2:]}", finished="x", commit=None,
        command="promote test", tests=(TestOutcome("pkg", "t.py::a", "passed"),),
    )  # fmt: skip


def _record(state: str, run_id: str, barrier: multiprocessing.synchronize.Barrier) -> None:
    barrier.wait()
    history = History(Path(state))
    history.record(stored(run_id))
    history.close()


def test_two_processes_creating_the_history_at_once_never_fail(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("fork")
    for round_ in range(20):
        state = tmp_path / f"round{round_}"
        state.mkdir()
        barrier = ctx.Barrier(3)
        procs = [ctx.Process(target=_record, args=(str(state), f"r{round_:02d}{i:02d}", barrier)) for i in range(3)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(60)
        assert [p.exitcode for p in procs] == [0, 0, 0], f"round {round_}"
        history = History(state)
        assert len(history.run_ids()) == 3
        history.close()


def test_a_garbage_history_file_is_moved_aside_and_a_new_one_started(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / DB_NAME).write_bytes(GARBAGE)
    history = History(tmp_path)
    history.record(stored("r01"))
    assert history.run_ids() == ["r01"]
    history.close()
    [aside] = tmp_path.glob(f"{DB_NAME}.corrupt-*")
    assert aside.read_bytes() == GARBAGE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and aside.name in err and "starting a new history" in err
    db = sqlite3.connect(tmp_path / DB_NAME)
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    db.close()


def test_test_and_history_commands_survive_a_corrupt_history(tmp_path: Path) -> None:
    write_package(tmp_path, "pkg", {"test_a.py": "def test_ok():\n    pass\n"})
    write_config(tmp_path, [{"name": "pkg", "path": "pkg"}])
    git(tmp_path, "init", "-q", "-b", "main")
    commit(tmp_path, "start", {})
    state = tmp_path / ".promote"
    state.mkdir()
    (state / DB_NAME).write_bytes(GARBAGE)

    result = run(tmp_path, "test", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert (state / "runs" / report["run"] / "run.json").is_file()
    assert "moved to history.sqlite.corrupt-" in result.stderr and "Traceback" not in result.stderr

    (state / DB_NAME).write_bytes(GARBAGE)
    listing = run(tmp_path, "history", "--json")
    assert listing.exit_code == 0, listing.output
    assert json.loads(listing.stdout) == {"runs": []}
    assert len(list(state.glob(f"{DB_NAME}.corrupt-*"))) == 2


def test_audit_with_a_corrupt_history_writes_its_pages_and_keeps_the_gates_exit_code(tmp_path: Path) -> None:
    from tests.helpers.gitrepos import make_fleet

    fleet = make_fleet(tmp_path, names=("origin",))
    clean = run(fleet.work, "audit", "--json")
    (fleet.work / ".promote" / DB_NAME).write_bytes(GARBAGE)
    result = run(fleet.work, "audit", "--json")
    assert result.exit_code == clean.exit_code != 2, result.output
    pages = json.loads(result.stdout)["pages"]
    assert all(Path(p).is_file() for p in (pages["md"], pages["html"], pages["json"]))
    assert "starting a new history" in result.stderr and "Traceback" not in result.stderr


def test_a_locked_history_leaves_a_green_test_run_its_summary_and_its_exit_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_package(tmp_path, "pkg", {"test_a.py": "def test_ok():\n    pass\n"})
    write_config(tmp_path, [{"name": "pkg", "path": "pkg"}])
    git(tmp_path, "init", "-q", "-b", "main")
    commit(tmp_path, "start", {})
    assert run(tmp_path, "test").exit_code == 0
    db = tmp_path / ".promote" / DB_NAME
    # Another process holds the database for writing the whole time (an exclusive lock, as sqlite3 takes it).
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(db)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
        monkeypatch.setenv("PROMOTE_LOCK_WAIT_S", "0.5")
        started = time.monotonic()
        result = run(tmp_path, "test")
        elapsed = time.monotonic() - started
    finally:
        holder.communicate("")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("run ") and result.stdout.endswith("all green\n")
    [warning] = [line for line in result.stderr.splitlines() if "history" in line]
    assert (
        warning == f"promote: warning: history not recorded: {db}: cannot open the history database: database is locked"
    )
    assert "Traceback" not in result.output and elapsed < 10
    assert len(History(db.parent).run_ids()) == 1  # the first run only


HOLD = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
sys.stdin.read()
"""
