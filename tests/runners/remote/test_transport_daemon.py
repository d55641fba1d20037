"""A station whose ssh leaves a daemon holding its stderr (as a ControlPersist master can): every station
command (ssh itself, and git pushing over it) ends when ssh does, and the run has its real result."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import sshd
from tests.helpers.remote import SUITE, of, package, sshd_or_skip, station_errors, workspace

pytestmark = pytest.mark.slow

DAEMON_S = 120


@pytest.fixture
def server(tmp_path: Path) -> Iterator[sshd.Sshd]:
    yield from sshd_or_skip(tmp_path / "sshd")


@pytest.fixture
def daemon_ssh(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """(a directory whose `ssh` leaves a `setsid sleep` behind with stderr inherited, then is the real ssh;
    the file of the daemons' pids, each killed by its pid afterwards)."""
    real = shutil.which("ssh")
    assert real is not None
    bin_dir, pids = tmp_path / "bin", tmp_path / "daemon.pids"
    bin_dir.mkdir()
    wrapper = bin_dir / "ssh"
    wrapper.write_text(
        f'#!/bin/sh\nsetsid sleep {DAEMON_S} </dev/null >/dev/null &\necho $! >> {pids}\nexec {real} "$@"\n'
    )
    wrapper.chmod(0o755)
    yield bin_dir, pids
    for pid in pids.read_text().split() if pids.exists() else []:
        with contextlib.suppress(OSError):
            os.kill(int(pid), signal.SIGKILL)


def test_a_station_run_through_an_ssh_that_leaves_a_daemon_on_stderr_is_prompt_and_real(
    tmp_path: Path, server: sshd.Sshd, daemon_ssh: tuple[Path, Path]
) -> None:
    bin_dir, pids = daemon_ssh
    station = server.station_toml("training", python=sys.executable, workdir=str(tmp_path / "station"))
    repo = workspace(tmp_path, {"there": SUITE}, package("there", "training", workers=2) + station)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}

    t0 = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "promote", "-C", str(repo), "test", "--json"],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    took = time.monotonic() - t0

    report = json.loads(done.stdout)
    assert len(pids.read_text().split()) >= 4, "the station commands did not go through the wrapper"
    assert done.returncode == 1, done.stderr
    assert station_errors(report) == []
    there = of(report, "there")
    assert (there["passed"], there["failed"], there["skipped"]) == (4, 2, 1)
    # Each station command waited for its daemon's sleep before: the first alone took DAEMON_S.
    assert took < DAEMON_S / 2, f"the run took {took:.0f} s"
