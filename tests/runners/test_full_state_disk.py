"""A full disk under `.promote/` (a real tmpfs mounted there): `test` and `audit` end with one line, no traceback."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.cli import run
from tests.helpers.gitrepos import commit, git
from tests.helpers.packages import write_config, write_package
from tests.helpers.tmpfs import fill, mounted


@pytest.fixture
def work(tmp_path: Path) -> Iterator[Path]:
    """A repository with one package (a pass and a failure, so a rerun runs), `.promote/` a 200 KiB tmpfs."""
    write_package(tmp_path, "pkg", {"test_a.py": "def test_ok():\n    pass\n\ndef test_bad():\n    assert False\n"})
    config = write_config(tmp_path, [{"name": "pkg", "path": "pkg"}])
    config.write_text(config.read_text().replace('trunk = "main"\n', 'trunk = "main"\nmirrors = []\n'))
    git(tmp_path, "init", "-q", "-b", "main")
    commit(tmp_path, "start", {})
    state = tmp_path / ".promote"
    state.mkdir()
    with mounted(state, "200k"):
        yield tmp_path


def clear(state: Path) -> None:
    for path in state.iterdir():
        if path.is_dir():
            subprocess.run(["rm", "-rf", str(path)], check=True)
        else:
            path.unlink()


@pytest.mark.slow
@pytest.mark.parametrize("command", ["test", "audit"])
def test_a_full_state_disk_at_every_step_is_one_line_never_a_traceback(work: Path, command: str) -> None:
    state = work / ".promote"
    seen = set()
    # From no byte free to enough for the whole run: the disk runs out at a different step each time.
    for leave in (0, 4096, 8192, 16384, 32768, 65536, 163840):
        clear(state)
        fill(state, leave=leave)
        result = run(work, "-q", command)
        assert "Traceback" not in result.output and "Error:" not in result.stderr, (leave, result.output)
        if result.exit_code == 2:
            # One error line, last; before it at most the history's warning that it could not take the run.
            *warnings, line = result.stderr.splitlines()
            assert line.startswith("promote: error: "), (leave, line)
            assert all(w.startswith("promote: warning: history not recorded: ") for w in warnings), (leave, warnings)
            assert "No space left on device" in line or "disk is full" in line, (leave, line)
            if "the run's records were not stored" in line and command == "test":
                # The tests ran: what they found is printed before the line that says it was not stored.
                assert "not green" in result.stdout, (leave, result.output)
                seen.add("printed, not stored")
            seen.add("refused")
        else:
            # Far enough for the run to finish: its report is printed and the exit code is the run's own.
            assert result.exit_code in (1, 3), (leave, result.output)
            assert (
                "pkg: test_a.py::test_bad (failed)" in result.stdout
                or "FAIL      Everything E2E Tested" in result.stdout
            )
            seen.add("reported")
    assert seen == {"refused", "reported"} | ({"printed, not stored"} if command == "test" else set())
