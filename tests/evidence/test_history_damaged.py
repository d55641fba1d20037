"""A damaged history (SQLite's "database disk image is malformed" on a read, not on opening) is moved aside once,
and a `.promote/` that refuses writing (read-only, full) is one line with the documented exit code."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from promote.evidence.history import DB_NAME, History
from tests.helpers.cli import run
from tests.helpers.gitrepos import commit, git
from tests.helpers.packages import write_config, write_package
from tests.helpers.tmpfs import fill, mounted, read_only

PAGE = 4096


def _repository(root: Path) -> Path:
    """A repository with one green package whose tests have long ids, so that its history spans many pages."""
    tests = "".join(f"def test_{'x' * 80}_{i}():\n    pass\n\n" for i in range(120))
    write_package(root, "pkg", {"test_a.py": tests})
    config = write_config(root, [{"name": "pkg", "path": "pkg"}])
    config.write_text(config.read_text().replace('trunk = "main"\n', 'trunk = "main"\nmirrors = []\n'))
    git(root, "init", "-q", "-b", "main")
    commit(root, "start", {})
    return root / ".promote"


def damage(db: Path) -> bytes:
    """Every page of `db` after the first two overwritten at its start: the header still reads, the tables do not."""
    checkpoint = sqlite3.connect(db)
    checkpoint.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    checkpoint.close()
    data = bytearray(db.read_bytes())
    assert len(data) > 4 * PAGE, "the history is too small to damage past its header"
    for offset in range(2 * PAGE, len(data), PAGE):
        data[offset : offset + 16] = b"\xde\xad\xbe\xef" * 4
    db.write_bytes(bytes(data))
    return bytes(data)


def test_a_history_damaged_past_its_header_is_moved_aside_once_and_a_new_one_started(tmp_path: Path) -> None:
    state = _repository(tmp_path)
    assert run(tmp_path, "-q", "test").exit_code == 0
    assert run(tmp_path, "-q", "test").exit_code == 0
    damaged = damage(state / DB_NAME)
    # SQLite opens it (the header is whole) and fails only on reading the runs: the case that was never moved aside.
    probe = sqlite3.connect(state / DB_NAME)
    with pytest.raises(sqlite3.DatabaseError, match="malformed"):
        probe.execute("SELECT * FROM outcomes").fetchall()
    probe.close()

    result = run(tmp_path, "-q", "test", "--json")
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output
    [warning] = result.stderr.splitlines()
    [aside] = state.glob(f"{DB_NAME}.corrupt-*")
    assert warning.startswith("promote: warning: ") and "malformed" in warning and aside.name in warning
    assert aside.read_bytes() == damaged
    # The new history holds this run, and the next commands read it with nothing more said.
    report = json.loads(result.stdout)
    listing = run(tmp_path, "history", "--json")
    assert (listing.exit_code, listing.stderr) == (0, "")
    assert [r["run"] for r in json.loads(listing.stdout)["runs"]] == [report["run"]]
    assert run(tmp_path, "-q", "test").stderr == ""


def test_history_and_audit_on_a_damaged_history_say_so_once_and_keep_their_exit_codes(tmp_path: Path) -> None:
    state = _repository(tmp_path)
    assert run(tmp_path, "-q", "test").exit_code == 0
    damage(state / DB_NAME)
    listing = run(tmp_path, "history", "--tests", "--json")
    assert listing.exit_code == 0, listing.output
    assert listing.stderr.count("\n") == 1 and "moved to history.sqlite.corrupt-" in listing.stderr
    assert json.loads(listing.stdout)["tests"] == []

    assert run(tmp_path, "-q", "test").exit_code == 0
    clean = run(tmp_path, "-q", "audit")
    damage(state / DB_NAME)
    audit = run(tmp_path, "-q", "audit")
    assert audit.exit_code == clean.exit_code != 2, audit.output
    assert [line for line in audit.stderr.splitlines() if "history" in line] == [
        line for line in audit.stderr.splitlines() if "moved to history.sqlite.corrupt-" in line
    ]
    assert len(list(state.glob(f"{DB_NAME}.corrupt-*"))) == 2 and "Traceback" not in audit.output


def test_a_read_only_state_directory_is_one_line_and_exit_2(tmp_path: Path) -> None:
    state = _repository(tmp_path)
    assert run(tmp_path, "-q", "test").exit_code == 0
    before = (state / DB_NAME).read_bytes()
    with read_only(state):
        for command in (["history"], ["history", "--tests"], ["-q", "test"]):
            result = run(tmp_path, *command)
            assert result.exit_code == 2, (command, result.output)
            [line] = [line for line in result.stderr.splitlines() if not line.startswith("promote: warning: ")]
            assert line.startswith("promote: error: ") and "Traceback" not in result.output, (command, line)
            assert "Read-only file system" in line or "Permission denied" in line or "readonly" in line, line
        assert (state / DB_NAME).read_bytes() == before
    assert not list(state.glob(f"{DB_NAME}.corrupt-*"))


def test_a_full_state_directory_under_history_is_one_line_and_exit_2(tmp_path: Path) -> None:
    state = _repository(tmp_path)
    state.mkdir()
    with mounted(state, "400k"):
        fill(state, leave=0)  # before any history was made
        result = run(tmp_path, "history", "--tests")
        assert result.exit_code == 2, result.output
        [line] = result.stderr.splitlines()
        assert line.startswith("promote: error: ") and ".promote" in line, line
        assert "No space left on device" in line or "disk is full" in line, line
        (state / "filler").unlink()
        assert run(tmp_path, "-q", "test").exit_code == 0
        fill(state, leave=0)  # with a history: SQLite cannot make its shared-memory file to read it
        for command in (["history"], ["history", "--tests"], ["history", "--test", "test_a.py::test_x"]):
            result = run(tmp_path, *command)
            assert result.exit_code == 2 and "Traceback" not in result.output, (command, result.output)
            [line] = result.stderr.splitlines()
            assert line.startswith(f"promote: error: {state / DB_NAME}: cannot open the history database"), line
        assert not list(state.glob(f"{DB_NAME}.corrupt-*"))  # a full disk is not damage: nothing moved aside


def test_a_damaged_history_opened_directly_is_replaced_by_an_empty_usable_one(tmp_path: Path) -> None:
    state = _repository(tmp_path)
    assert run(tmp_path, "-q", "test").exit_code == 0
    damage(state / DB_NAME)
    history = History(state)  # opens: the header is whole
    try:
        assert history.run_ids() == []
        assert history.read("PRAGMA integrity_check") == [("ok",)]
    finally:
        history.close()
