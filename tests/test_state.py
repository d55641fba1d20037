"""promote's own state: every `.promote/` path comes from core.state; reading never creates it."""

from __future__ import annotations

import stat
from pathlib import Path

from promote.core import state


def test_reading_paths_create_nothing_and_the_state_dir_is_private_and_ignored(tmp_path: Path) -> None:
    assert state.runs_path(tmp_path) == tmp_path / ".promote" / "runs"
    assert not (tmp_path / ".promote").exists()

    runs, bisect = state.runs_dir(tmp_path), state.bisect_dir(tmp_path)

    assert (runs, bisect) == (tmp_path / ".promote" / "runs", tmp_path / ".promote" / "bisect")
    assert state.state_path(tmp_path).is_dir() and not runs.exists() and not bisect.exists()
    assert stat.S_IMODE(state.state_dir(tmp_path).stat().st_mode) == 0o700
    assert (tmp_path / ".promote" / ".gitignore").read_text() == "*\n"
