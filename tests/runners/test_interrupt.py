"""Killing `promote test` leaves no pytest process behind, whatever signal it gets."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers.packages import write_config, write_package

pytestmark = pytest.mark.slow

HANGS = """
    import time

    def test_quick(): pass
    def test_hangs(): time.sleep(120)
"""


def processes_under(path: Path) -> list[str]:
    """Command lines of live processes that mention `path` or run in it (read from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        # pytest runs in the package's directory and names no path of it on its command line.
        if (str(path) in cmdline or Path(cwd).is_relative_to(path)) and state != "Z":
            found.append(f"{entry.name}: {cmdline}")
    return found


def start_hanging_run(tmp_path: Path, workers: int) -> tuple[subprocess.Popen[bytes], Path]:
    """`promote test` on a package whose second test hangs; returns once that test is running."""
    write_package(tmp_path, "hangs", {"test_hangs.py": HANGS})
    write_config(tmp_path, [{"name": "hangs", "path": "hangs", "workers": workers}])
    proc = subprocess.Popen(
        [sys.executable, "-m", "promote", "test"], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        logs = list(tmp_path.glob(".promote/runs/*/hangs/*/progress-*.jsonl"))
        if any("test_hangs" in line for log in logs for line in log.read_text().splitlines() if '"start"' in line):
            return proc, tmp_path / "hangs"
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.1)
    proc.kill()
    raise AssertionError("the hanging test never started")


def wait_for_none(path: Path, limit_s: float = 15.0) -> list[str]:
    deadline = time.monotonic() + limit_s
    while (left := processes_under(path)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads the process table from /proc")
@pytest.mark.parametrize("workers", [1, 2])
def test_sigkill_of_promote_test_leaves_no_pytest_running(tmp_path: Path, workers: int) -> None:
    proc, package = start_hanging_run(tmp_path, workers)
    assert processes_under(package), "pytest should be running the package"

    proc.send_signal(signal.SIGKILL)
    proc.wait()

    assert wait_for_none(package) == []


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads the process table from /proc")
def test_sigterm_stops_the_run_and_keeps_it_in_the_history_as_interrupted(tmp_path: Path) -> None:
    proc, package = start_hanging_run(tmp_path, 2)

    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)

    assert proc.returncode == 130
    assert "interrupted" in err.decode()
    assert wait_for_none(package, 5.0) == []
    history = subprocess.run(
        [sys.executable, "-m", "promote", "history", "--json"], cwd=tmp_path, capture_output=True, text=True
    )
    (run,) = json.loads(history.stdout)["runs"]
    assert run["interrupted"] is True
    assert run["kind"] == "test"
