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


def test_every_file_a_test_run_and_an_audit_leave_is_private(tmp_path: Path) -> None:
    import subprocess
    import sys

    from tests.helpers.packages import write_config, write_package

    write_package(tmp_path, "pkg", {"test_a.py": "def test_a(): pass\ndef test_b(): assert False\n"})
    config = write_config(tmp_path, [{"name": "pkg", "path": "pkg", "workers": 2}])
    config.write_text(config.read_text().replace('trunk = "main"', 'trunk = "main"\nmirrors = []', 1))
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=tmp_path, check=True)
    subprocess.run(["git", "add", "-A"], cwd=tmp_path, check=True)
    subprocess.run(["git", "commit", "-qm", "x"], cwd=tmp_path, check=True)
    for command in ("test", "audit"):
        # A real process with the default umask: what promote leaves must not depend on the caller's.
        subprocess.run([sys.executable, "-m", "promote", command], cwd=tmp_path, capture_output=True, check=False)

    found = list((tmp_path / ".promote").rglob("*"))
    names = {p.name for p in found}
    assert {"history.sqlite", "pytest.log", "junit.xml", "run.json", "evidence.html"} <= names
    loose = [
        f"{stat.S_IMODE(p.stat().st_mode):o} {p.relative_to(tmp_path)}"
        for p in found
        if stat.S_IMODE(p.stat().st_mode) != (0o700 if p.is_dir() else 0o600)
    ]
    assert loose == []


def test_run_ids_made_one_after_another_sort_in_that_order() -> None:
    # Runs started within one second must still sort by time: "the previous run" is found by sorting ids.
    ids = [state.new_run_id() for _ in range(50)]
    assert sorted(ids) == ids and len(set(ids)) == 50
