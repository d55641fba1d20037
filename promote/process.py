"""Run a program with a time limit; on timeout, kill it and everything it started."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Finished:
    """How a bounded run ended: `status` is None when the time limit killed it."""

    status: int | None
    stdout: bytes
    stderr: bytes


def run_bounded(
    argv: Sequence[str],
    *,
    cwd: Path | None = None,
    timeout: float | None = None,
    env: Mapping[str, str] | None = None,
    stdin: bytes | None = None,
) -> Finished:
    """Run `argv` (a list, never a shell); raises OSError only when it cannot be started."""
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
    ) as proc:
        try:
            out, err = proc.communicate(stdin, timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            return Finished(None, out, err)
    return Finished(proc.returncode, out, err)
