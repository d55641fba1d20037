"""A pytest process says when its records are complete; promote reads them then and waits for its shutdown later.

Real pytest processes: the plugin's marker (without xdist, and from an xdist controller before its workers have
exited), and `promote test` on packages whose conftest does slow or status-changing work at interpreter exit.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from promote.runners.package import PLUGIN
from promote.runners.plugin.stops import read_ended
from tests.helpers.cli import run
from tests.helpers.packages import write_config, write_package

pytestmark = pytest.mark.slow

SUITE = """
    def test_passes():
        pass

    def test_fails():
        assert 1 == 2
"""


def pytest_with_marker(where: Path, *more: str) -> tuple[int, Path]:
    out, ended = where / "out", where / "out" / "ended.json"
    out.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:promote", "-p", PLUGIN, "-p", "no:cacheprovider", "-q",
         f"--promote-out={out}", f"--promote-ended={ended}", *more],
        cwd=where / "pkg", capture_output=True, text=True,
    )  # fmt: skip
    return done.returncode, ended


def test_a_process_without_xdist_says_its_status_once_everything_is_written(tmp_path: Path) -> None:
    write_package(tmp_path, "pkg", {"test_a.py": SUITE})

    status, ended = pytest_with_marker(tmp_path, "-p", "no:xdist")

    assert (status, read_ended(ended)) == (1, 1)
    assert (tmp_path / "out" / "results-main.json").is_file()


def test_an_xdist_controller_says_it_before_its_workers_have_exited(tmp_path: Path) -> None:
    pytest.importorskip("xdist")
    # Each worker, at its interpreter's exit, waits for the controller's marker: had the controller written it
    # only after its workers exited, no worker would ever see it.
    conftest = f"""
        import atexit, os, time
        from pathlib import Path

        def _wait_for_marker():
            marker = Path({str(tmp_path / "out" / "ended.json")!r})
            deadline = time.monotonic() + 30
            while not marker.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            with open({str(tmp_path / "seen.txt")!r}, "a") as f:
                f.write(f"{{marker.exists()}}\\n")

        if os.environ.get("PYTEST_XDIST_WORKER"):
            atexit.register(_wait_for_marker)
    """
    write_package(tmp_path, "pkg", {"test_a.py": SUITE, "conftest.py": conftest})

    status, ended = pytest_with_marker(tmp_path, "--numprocesses=2")

    assert (status, read_ended(ended)) == (1, 1)
    assert (tmp_path / "seen.txt").read_text().split() == ["True", "True"]


def test_no_marker_without_the_option_and_never_from_a_worker(tmp_path: Path) -> None:
    pytest.importorskip("xdist")
    write_package(tmp_path, "pkg", {"test_a.py": SUITE})
    (tmp_path / "out").mkdir()
    subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:promote", "-p", PLUGIN, "-p", "no:cacheprovider", "-q",
         f"--promote-out={tmp_path / 'out'}", "--numprocesses=2"],
        cwd=tmp_path / "pkg", capture_output=True,
    )  # fmt: skip
    assert not list((tmp_path / "out").glob("ended*"))


# Every pytest process notes its start; at its exit it waits a little, then notes its end.
SLOW_EXIT = """
    import atexit, os, time

    LOG = {log!r}

    def _note(what):
        with open(LOG, "a") as f:
            f.write(f"{{what}} {{os.getpid()}}\\n")

    _note("start")

    @atexit.register
    def _slow_exit():
        time.sleep(0.5)
        _note("end")
"""


@pytest.mark.parametrize("workers", [1, 2])
def test_every_process_shuts_down_in_full_before_the_run_is_stored(tmp_path: Path, workers: int) -> None:
    if workers > 1:
        pytest.importorskip("xdist")
    log = tmp_path / "processes.txt"
    write_package(tmp_path, "pkg", {"test_a.py": SUITE, "conftest.py": SLOW_EXIT.format(log=str(log))})
    write_config(tmp_path, [{"name": "pkg", "path": "pkg", "workers": workers}])

    result = run(tmp_path, "test", "--json")

    report = json.loads(result.stdout)
    # The failure was rerun (a process of its own), and the run is red for its own reason only.
    assert result.exit_code == 1
    assert [f["check"] for f in report["findings"] if f["check"] == "package-error"] == []
    lines = [line.split() for line in log.read_text().splitlines()]
    started = {pid for what, pid in lines if what == "start"}
    ended = {pid for what, pid in lines if what == "end"}
    assert len(started) >= 2 and started == ended, lines


def test_a_status_changed_at_shutdown_is_said_and_counted(tmp_path: Path) -> None:
    pytest.importorskip("xdist")
    # In the xdist controller only: the workers' records are complete and passed, then the controller exits 7.
    conftest = """
        import atexit, os

        if not os.environ.get("PYTEST_XDIST_WORKER"):
            atexit.register(lambda: os._exit(7))
    """
    write_package(tmp_path, "pkg", {"test_a.py": "def test_passes():\n    pass\n", "conftest.py": conftest})
    write_config(tmp_path, [{"name": "pkg", "path": "pkg", "workers": 2}])

    result = run(tmp_path, "test", "--json")

    report = json.loads(result.stdout)
    assert result.exit_code != 0
    errors = [f for f in report["findings"] if f["check"] == "package-error"]
    assert len(errors) == 1, report["findings"]
    assert "exited with status 7 after its parallel tests had ended with status 0" in errors[0]["message"]
    assert errors[0]["subject"] == "pkg"
