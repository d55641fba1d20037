"""A mirror whose transport leaves a daemon holding git's stderr (ssh's ControlPersist master does): check and
merge finish with git's real result, promptly, not as a timeout."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.cli import run, run_json
from tests.helpers.gitrepos import Fleet, commit, git

LIMIT_S = 10  # far above what git needs here, far below the daemons' 30 s


@pytest.fixture
def daemon_transport(fleet: Fleet, tmp_path: Path) -> Iterator[Path]:
    """Every mirror reached through upload-pack and receive-pack wrappers that each leave a `setsid sleep 30`
    behind, in a session of its own, with git's stderr inherited; the daemons are killed by pid afterwards."""
    pids = tmp_path / "daemon.pids"
    for program in ("git-upload-pack", "git-receive-pack"):
        wrapper = tmp_path / f"daemon-{program}"
        wrapper.write_text(
            f'#!/bin/sh\nsetsid sleep 30 </dev/null >/dev/null &\necho $! >> {pids}\nexec {program} "$@"\n'
        )
        wrapper.chmod(0o755)
        key = "uploadpack" if program == "git-upload-pack" else "receivepack"
        for name in fleet.mirrors:
            git(fleet.work, "config", f"remote.{name}.{key}", str(wrapper))
    fleet.config(f"mirror_timeout_s = {LIMIT_S}\n")
    yield pids
    for pid in pids.read_text().split() if pids.exists() else []:
        with contextlib.suppress(OSError):
            os.kill(int(pid), signal.SIGKILL)


def test_check_through_a_daemon_holding_stderr_is_decided_promptly(fleet: Fleet, daemon_transport: Path) -> None:
    candidate = commit(fleet.work, "feature")
    t0 = time.monotonic()
    code, report = run_json(fleet.work, "check")
    took = time.monotonic() - t0

    assert len(daemon_transport.read_text().split()) >= len(fleet.mirrors), "the wrappers did not run"
    assert (code, report["verdict"], report["candidate"]) == (0, "promotable", candidate)
    assert {m["status"] for m in report["mirrors"]} == {"fast-forward"}
    assert report["findings"] == []
    assert took < LIMIT_S, f"check took {took:.1f} s: it waited for the daemon, not for git"


def test_merge_through_a_daemon_holding_stderr_advances_every_mirror(fleet: Fleet, daemon_transport: Path) -> None:
    old = fleet.head("origin")
    candidate = commit(fleet.work, "feature")
    t0 = time.monotonic()
    result = run(fleet.work, "merge")
    took = time.monotonic() - t0

    assert result.exit_code == 0, result.output
    assert {fleet.head(m) for m in fleet.mirrors} == {candidate}
    assert result.stdout.splitlines()[0] == (
        f"main fast-forwarded {old[:7]} to {candidate[:7]} on origin, mini, station, laptop, no force"
    )
    assert "timeout" not in result.output
    # Each push and each read-back went through a wrapper: waiting for a daemon on any of them would show.
    assert took < 2 * LIMIT_S, f"merge took {took:.1f} s"
