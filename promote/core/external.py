"""Run a user-configured command (e.g. `ssh mini cat /srv/app/REVISION`): no shell, a timeout, redacted output."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from promote.core.process import Finished, run_bounded, telling_line
from promote.core.redact import redact


def run_command(argv: tuple[str, ...], *, cwd: Path, timeout: float) -> Finished:
    """Run `argv` in `cwd`; on timeout kill it and everything it started; its stdout redacted, as it is shown."""
    shown = redact(" ".join(argv))
    try:
        done = run_bounded(argv, cwd=cwd, timeout=timeout)
    except OSError as e:
        return Finished(shown, None, "", f"cannot be started: {e.strerror or e}")
    if done.status is None:
        return Finished(shown, None, "", f"did not finish in {timeout:g} s")
    return replace(done, stdout=redact(done.stdout))


def failure(done: Finished) -> str | None:
    """Why a configured command gave nothing usable, as one sentence naming it; None when it succeeded."""
    if done.ok:
        return None
    if done.status is None:
        return f"`{done.shown}` {done.stderr}"
    line = telling_line(done.stderr)
    return f"`{done.shown}` exited with status {done.status}" + (f": {line}" if line else "")
