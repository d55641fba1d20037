"""`promote test` on a station over ssh when something goes wrong: each fault named, only what ran counted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import venv
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import sshd
from tests.helpers.remote import SUITE, of, package, promote_test, sshd_or_skip, station_errors, workspace

pytestmark = pytest.mark.slow

# The middle test tells the harness it is running (and its pid), then waits to be cut off.
SLEEPER = {
    "test_slow.py": """
        import os
        import time
        from pathlib import Path

        def test_a_before():
            pass

        def test_b_sleeps():
            marker = Path(os.environ["PROMOTE_TEST_MARKER"])
            if marker.exists():
                return  # rerun alone, once the run was cut off: it passes
            marker.write_text(str(os.getpid()))
            time.sleep(120)

        def test_c_after():
            pass
    """,
}


@pytest.fixture
def server(tmp_path: Path) -> Iterator[sshd.Sshd]:
    yield from sshd_or_skip(tmp_path / "sshd")


def test_unreachable_station_is_an_error_and_the_other_packages_still_count(tmp_path: Path, server: sshd.Sshd) -> None:
    closed = sshd.free_port()
    station = server.station_toml("training", port=closed, python=sys.executable, workdir=str(tmp_path / "station"))
    body = package("here") + package("there", "training") + station
    repo = workspace(tmp_path, {"here": SUITE, "there": SUITE}, body)

    code, report, _ = promote_test(repo)

    assert code == 1
    counts = ("passed", "failed", "errors", "skipped", "blocked", "crashed")
    assert [of(report, "there")[k] for k in counts] == [0] * 6
    assert of(report, "here")["passed"] == 4
    [error] = station_errors(report)
    assert error["severity"] == "error" and error["subject"] == "training"
    assert error["message"] == (
        f"station training (ssh {server.destination}:{closed}): cannot connect to {server.destination} "
        f"(ssh: connect to host 127.0.0.1 port {closed}: Connection refused)"
    )


def test_a_key_the_station_does_not_know_is_refused(tmp_path: Path, server: sshd.Sshd) -> None:
    stranger = str(server.root / "stranger_key")
    station = server.station_toml("training", identity=stranger, python=sys.executable, workdir=str(tmp_path / "st"))
    repo = workspace(tmp_path, {"there": SUITE}, package("there", "training") + station)

    code, report, _ = promote_test(repo)

    assert code == 1
    assert of(report, "there")["passed"] == 0
    [error] = station_errors(report)
    assert "authentication refused" in error["message"]
    assert "Permission denied (publickey)" in error["message"]


def test_a_station_python_without_pytest_is_named(tmp_path: Path, server: sshd.Sshd) -> None:
    bare = tmp_path / "bare-venv"
    venv.create(bare, with_pip=False)
    station = server.station_toml("training", python=str(bare / "bin" / "python"), workdir=str(tmp_path / "station"))
    repo = workspace(tmp_path, {"there": SUITE}, package("there", "training") + station)

    code, report, _ = promote_test(repo)

    assert code == 1
    assert of(report, "there")["passed"] == 0
    [error] = station_errors(report)
    assert "cannot import pytest and pytest-xdist" in error["message"]
    assert "No module named 'pytest'" in error["message"]


@pytest.mark.parametrize("cut", ["connection", "pytest"])
def test_a_worker_cut_off_midway_is_replaced_on_its_station_and_counts_once(
    tmp_path: Path, server: sshd.Sshd, cut: str
) -> None:
    marker = tmp_path / "sleeping"
    station = server.station_toml("training", python=sys.executable, workdir=str(tmp_path / "station"))
    body = package("there", "training", env={"PROMOTE_TEST_MARKER": str(marker)}) + station
    repo = workspace(tmp_path, {"there": SLEEPER}, body)
    cmd = [sys.executable, "-m", "promote", "-C", str(repo), "test", "--json"]
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        deadline = time.monotonic() + 120
        # The test writes its pid into the marker: it may exist a moment before the pid is in it.
        while not (marker.exists() and marker.read_text().strip()):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.1)
        pid = int(marker.read_text())
        if cut == "connection":
            assert server.drop_sessions() > 0
        else:
            os.killpg(os.getpgid(pid), 9)
        out, _ = proc.communicate(timeout=120)

    report = json.loads(out)
    assert proc.returncode == 1
    pkg = of(report, "there")
    # The station still answers: its worker is replaced there and runs what was left, nothing counted twice.
    assert (pkg["passed"], pkg["failed"], pkg["crashed"]) == (2, 0, 1)
    assert set(pkg["placement"].values()) == {"training"}
    [crash] = [f for f in report["findings"] if f["check"] == "worker-crash"]
    assert crash["subject"] == "test_slow.py::test_b_sleeps"
    assert f"on station training (ssh {server.destination}:{server.port}) stopped" in crash["message"]
    assert "ssh connection was cut" in crash["message"]
    # Investigated where it crashed: rerun on the station, where it no longer crashes.
    [verdict] = pkg["reruns"]
    assert (verdict["test"], verdict["station"], verdict["verdict"]) == (
        "test_slow.py::test_b_sleeps",
        "training",
        "flaky",
    )
    assert station_errors(report) == []
    # Nothing is left running there: the cut-off worker ended with its session.
    assert not alive(pid)


def alive(pid: int) -> bool:
    """Whether `pid` is running (a zombie nobody reaped has ended)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in status
