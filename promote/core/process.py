"""Run a program with a time limit; on timeout, kill it and everything it started."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

_PR_SET_PDEATHSIG = 1

# A shell that waits for the command and, told its parent died, kills its whole process group: the
# command's own children too (a local `git push` runs `git-receive-pack` and the mirror's hooks, which
# finish the push and move the mirror when only `git` itself is killed).
_GUARD = 'trap "kill -9 0" TERM; "$@" & wait $!'


@dataclass(frozen=True)
class Finished:
    """How a bounded run ended: `status` is None when the time limit killed it."""

    status: int | None
    stdout: bytes
    stderr: bytes


def die_with_parent(sig: int = signal.SIGKILL) -> Callable[[], None] | None:
    """A `preexec_fn` that has the kernel send `sig` to the child when promote dies, even by SIGKILL.

    None where there is no prctl (macOS, BSDs): there a child outlives a promote killed with -9.
    The signal comes when the *thread* that started the child ends, so start it from a thread that
    waits for it.
    """
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
        # The parent may have died between fork and prctl; then no signal will ever come.
        if os.getppid() != parent:
            os.kill(os.getpid(), sig)

    return preexec


def guarded(argv: Sequence[str]) -> tuple[list[str], Callable[[], None] | None]:
    """`argv` wrapped so that it and everything it starts die with promote (unchanged where not possible)."""
    preexec = die_with_parent(signal.SIGTERM)
    if preexec is None or not os.path.exists("/bin/sh"):
        return list(argv), None
    return ["/bin/sh", "-c", _GUARD, "promote-guard", *argv], preexec


def run_bounded(
    argv: Sequence[str],
    *,
    cwd: Path | None = None,
    timeout: float | None = None,
    env: Mapping[str, str] | None = None,
    stdin: bytes | None = None,
    die_with_promote: bool = False,
) -> Finished:
    """Run `argv` (a list, never a shell); raises OSError only when it cannot be started.

    With `die_with_promote` (and no `stdin`: the guard gives the program /dev/null), the program and
    its children are killed when promote dies, even by SIGKILL, where the platform allows it.
    """
    preexec = None
    if die_with_promote and stdin is None:
        argv, preexec = guarded(argv)
    # A session of its own lets a timeout kill the program's children (ssh, helpers) along with it;
    # killing only the program would leave them holding its pipes open.
    with subprocess.Popen(
        list(argv),
        cwd=cwd,
        env=None if env is None else dict(env),
        stdin=subprocess.DEVNULL if stdin is None else subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        preexec_fn=preexec,
    ) as proc:
        try:
            out, err = proc.communicate(stdin, timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            return Finished(None, out, err)
    return Finished(proc.returncode, out, err)
