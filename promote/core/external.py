"""Run a user-configured command (e.g. `ssh mini cat /srv/app/REVISION`): no shell, a timeout, redacted output."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from promote.core.process import run_bounded
from promote.core.redact import redact


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
        done = run_bounded(argv, cwd=cwd, timeout=timeout)
    except OSError as e:
        return CommandResult(shown, "", f"`{shown}` cannot be started: {e.strerror or e}")
    if done.status is None:
        return CommandResult(shown, "", f"`{shown}` did not finish in {timeout:g} s")
    out, err = done.stdout, done.stderr
    stdout = out.decode("utf-8", "replace")
    if done.status != 0:
        lines = [ln.strip() for ln in redact(err.decode("utf-8", "replace")).splitlines() if ln.strip()]
        detail = f": {lines[-1]}" if lines else ""
        return CommandResult(shown, "", f"`{shown}` exited with status {done.status}{detail}")
    return CommandResult(shown, redact(stdout), None)
