"""Run a user-configured command (e.g. `ssh mini cat /srv/app/REVISION`): no shell, a timeout, redacted output."""

from __future__ import annotations

import os
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

from promote.redact import redact


@dataclass(frozen=True)
class CommandResult:
    """What a command printed, or why it gave nothing usable (`error`, redacted)."""

    shown: str
    stdout: str
    error: str | None

    @property
    def ok(self) -> bool:
        return self.error is None


def run_command(argv: tuple[str, ...], *, cwd: Path, timeout: float) -> CommandResult:
    """Run `argv` in `cwd`; on timeout kill it and everything it started."""
    shown = redact(" ".join(argv))
    try:
        proc = subprocess.Popen(
            list(argv),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # a group of its own, so a timeout also kills what it started (ssh, ...)
        )
    except OSError as e:
        return CommandResult(shown, "", f"`{shown}` cannot be started: {e.strerror or e}")
    with proc:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            return CommandResult(shown, "", f"`{shown}` did not finish in {timeout:g} s")
    stdout = out.decode("utf-8", "replace")
    if proc.returncode != 0:
        lines = [ln.strip() for ln in redact(err.decode("utf-8", "replace")).splitlines() if ln.strip()]
        detail = f": {lines[-1]}" if lines else ""
        return CommandResult(shown, "", f"`{shown}` exited with status {proc.returncode}{detail}")
    return CommandResult(shown, redact(stdout), None)
