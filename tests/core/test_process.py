"""The one bounded runner, its result type and the one "telling line" rule, on real processes."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from promote.core.external import failure, run_command
from promote.core.git import run_git
from promote.core.process import TELLING_MAX, Telling, run_bounded, telling_line


def test_telling_line_prefers_a_marked_line_and_falls_back_to_the_last_or_first() -> None:
    text = "Cloning...\nfatal: repository not found\n\nerror: could not read\nhint: try again\n"
    assert telling_line(text, starts=("fatal:", "error:")) == "error: could not read"
    assert telling_line(text, starts=("fatal:", "error:"), first=True) == "fatal: repository not found"
    assert telling_line(text, contains=("not found",)) == "fatal: repository not found"
    assert telling_line(text) == "hint: try again"
    assert telling_line(text, first=True) == "Cloning..."
    assert telling_line(text, starts=("ssh:",), marked=True) == ""
    assert telling_line("  \n\n") == ""
    assert len(telling_line("x" * 1000)) == TELLING_MAX


def test_a_finished_command_says_its_status_output_and_telling_line(tmp_path: Path) -> None:
    script = (
        "echo out; echo 'note: warming up' >&2; echo 'error: broke token=hf_abcdefghijklmnopqrstuvwxyz' >&2; exit 3"
    )
    done = run_bounded(["sh", "-c", script], cwd=tmp_path, telling=Telling(starts=("error:",)))
    assert (done.status, done.ok, done.stdout, done.output) == (3, False, "out\n", b"out\n")
    assert done.reason.startswith("error: broke token=") and "hf_abc" not in done.reason
    silent = run_bounded(["sh", "-c", "exit 4"], telling=Telling(silent="it said nothing ({status})"))
    assert silent.reason == "it said nothing (4)"


def test_a_timeout_kills_the_whole_process_group_and_leaves_no_status(tmp_path: Path) -> None:
    pid_file = tmp_path / "grandchild.pid"
    # The grandchild holds no pipe of ours: only killing the group ends it.
    script = f"sleep 60 >/dev/null 2>&1 & echo $! > {pid_file}; wait"
    t0 = time.monotonic()
    done = run_bounded(["sh", "-c", script], timeout=1.0)
    assert done.status is None and not done.ok
    assert time.monotonic() - t0 < 10
    grandchild = int(pid_file.read_text())
    for _ in range(50):
        if not Path(f"/proc/{grandchild}").exists() or "Z" in _state(grandchild):
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"process {grandchild} outlived the timeout")


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "Z"


def test_git_keeps_its_first_complaint_and_its_timeout_message(tmp_path: Path) -> None:
    done = run_git(tmp_path, "rev-parse", "--verify", "HEAD")
    assert not done.ok and done.reason.startswith("fatal: not a git repository")
    assert done.shown == "git rev-parse --verify HEAD"


def test_a_configured_command_that_fails_is_one_sentence_naming_it(tmp_path: Path) -> None:
    ok = run_command(("sh", "-c", "echo https://user:secret@example.com/x"), cwd=tmp_path, timeout=10)
    assert failure(ok) is None and "secret" not in ok.stdout
    failed = run_command(("sh", "-c", "echo first >&2; echo last >&2; exit 2"), cwd=tmp_path, timeout=10)
    assert failure(failed) == "`sh -c echo first >&2; echo last >&2; exit 2` exited with status 2: last"
    missing = run_command(("/nonexistent/tool",), cwd=tmp_path, timeout=10)
    assert (failure(missing) or "").startswith("`/nonexistent/tool` cannot be started: ")
    slow = run_command((sys.executable, "-c", "import time; time.sleep(30)"), cwd=tmp_path, timeout=0.5)
    assert (failure(slow) or "").endswith("did not finish in 0.5 s")


def _daemon(pid_file: Path, holds: str = "2") -> str:
    """Shell that leaves a `setsid sleep 30` behind, in a session of its own, holding fd `holds` of ours."""
    others = " ".join(f"{fd}>/dev/null" for fd in ("1", "2") if fd != holds)
    return f"setsid sleep 30 </dev/null {others} & echo $! > {pid_file}; "


@pytest.fixture
def daemons(tmp_path: Path) -> Iterator[list[Path]]:
    """Pid files of the daemons a test leaves behind; each is killed by its pid afterwards."""
    files: list[Path] = []
    yield files
    for f in files:
        with contextlib.suppress(OSError, ValueError):
            os.kill(int(f.read_text()), signal.SIGKILL)


@pytest.mark.parametrize("holds", ["1", "2"])
def test_a_command_that_exited_is_done_whatever_a_daemon_still_holds(
    tmp_path: Path, daemons: list[Path], holds: str
) -> None:
    daemons.append(tmp_path / "daemon.pid")
    script = _daemon(daemons[0], holds) + "echo out; echo 'error: said so' >&2; exit 5"
    t0 = time.monotonic()
    done = run_bounded(["sh", "-c", script], timeout=20)
    took = time.monotonic() - t0
    assert (done.status, done.stdout, done.stderr) == (5, "out\n", "error: said so\n")
    assert took < 3, f"waited {took:.1f} s for a pipe the daemon holds"
    assert _state(int(daemons[0].read_text())) != "Z", "the daemon is not ours to kill: it must still run"


def test_a_timeout_with_a_daemon_holding_stderr_ends_at_the_limit(tmp_path: Path, daemons: list[Path]) -> None:
    daemons.append(tmp_path / "daemon.pid")
    t0 = time.monotonic()
    done = run_bounded(["sh", "-c", _daemon(daemons[0]) + "echo started >&2; sleep 30"], timeout=1.0)
    took = time.monotonic() - t0
    assert done.status is None and done.stderr == "started\n"
    assert took < 4, f"a 1 s limit took {took:.1f} s"


def test_a_command_that_closed_its_pipes_and_runs_on_is_stopped_at_its_limit(tmp_path: Path) -> None:
    t0 = time.monotonic()
    done = run_bounded(["sh", "-c", "echo early; exec >/dev/null 2>&1; sleep 30"], timeout=1.0)
    assert done.status is None and done.stdout == "early\n"
    assert time.monotonic() - t0 < 4
    quiet = run_bounded(["sh", "-c", "exec >/dev/null 2>&1; sleep 0.3; exit 7"], timeout=20)
    assert quiet.status == 7


def test_stdin_larger_than_a_pipe_goes_through_and_a_reader_that_stops_early_is_fine() -> None:
    data = bytes(range(256)) * 8192  # 2 MiB: many times a pipe's buffer
    done = run_bounded(["sh", "-c", "cat; echo done >&2"], stdin=data, timeout=60)
    assert (done.status, done.output, done.stderr) == (0, data, "done\n")
    early = run_bounded(["sh", "-c", "head -c 10 >/dev/null; exit 3"], stdin=data, timeout=60)
    assert early.status == 3


def test_a_program_that_writes_past_max_output_is_stopped_with_no_status() -> None:
    # It would print forever: the bound, not the time limit, ends it.
    forever = [sys.executable, "-c", "import sys\nwhile True: sys.stdout.write('x' * 65536)"]
    started = time.monotonic()
    done = run_bounded(forever, timeout=60, max_output=1_000_000)
    assert done.status is None
    assert len(done.output) > 1_000_000
    assert time.monotonic() - started < 30
    # Within the bound, nothing changes.
    small = run_bounded([sys.executable, "-c", "print('ok')"], timeout=60, max_output=1_000_000)
    assert (small.status, small.stdout) == (0, "ok\n")
