"""Reading promote's state never follows a symlink there: a checkout can point one at any file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from promote.core import lock
from promote.core.state import StateError, read_state
from promote.release import journal


def planted(tmp_path: Path, name: str, text: str) -> Path:
    outside = tmp_path / "outside.txt"
    outside.write_text(text)
    state = tmp_path / "repo" / ".promote"
    state.mkdir(parents=True)
    (state / name).symlink_to(outside)
    return state / name


def test_a_symlinked_journal_is_refused_with_its_name_not_read(tmp_path: Path) -> None:
    entry = {"op": "start", "id": "x"}
    link = planted(tmp_path, "journal.jsonl", json.dumps(entry) + "\n")
    with pytest.raises(StateError, match=r"journal.jsonl is a symlink; promote does not follow symlinks"):
        journal.read(tmp_path / "repo")
    with pytest.raises(StateError):
        read_state(link)


def test_a_symlinked_lock_says_nothing_of_the_file_it_points_at(tmp_path: Path) -> None:
    link = planted(tmp_path, "lock", json.dumps({"pid": 4242, "command": "secret-command", "started": "then"}))
    assert "4242" not in lock.holder(link)
    # A real lock file is read as its holder wrote it.
    real = tmp_path / "repo" / ".promote" / "lock2"
    real.write_text(json.dumps({"pid": 7, "command": "promote merge", "started": "now"}))
    assert lock.holder(real) == "pid 7 (`promote merge`, started now)"


def test_a_missing_state_file_reads_as_empty(tmp_path: Path) -> None:
    (tmp_path / ".promote").mkdir()
    assert read_state(tmp_path / ".promote" / "journal.jsonl") == b""
    assert journal.read(tmp_path) == []
