"""Run a program with a time limit; on timeout, kill it and everything it started."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from promote.core.redact import redact

_PR_SET_PDEATHSIG = 1

# A shell that waits for the command and, told its parent died, kills its whole process group: the
# command's own children too (a local `git push` runs `git-receive-pack` and the mirror's hooks, which
# finish the push and move the mirror when only `git` itself is killed).
_GUARD = 'trap "kill -9 0" TERM; "$@" & wait $!'


# A one-line report quotes at most this much of what a program said.
TELLING_MAX = 300


def telling_line(
    text: str, *, starts: Sequence[str] = (), contains: Sequence[str] = (), first: bool = False, marked: bool = False
) -> str:
    """The line of a program's output that says what went wrong ("" when there is none), at most TELLING_MAX long.

    The last (with `first`, the first) non-blank line that starts with one of `starts` or holds one of
    `contains`; when no line does, the last (first) non-blank line, unless only a `marked` line will do.
    """
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    telling = [ln for ln in lines if ln.startswith(tuple(starts)) or any(c in ln for c in contains)]
    if telling or marked:
        lines = telling
    if not lines:
        return ""
    return (lines[0] if first else lines[-1])[:TELLING_MAX]


@dataclass(frozen=True)
class Telling:
    """Which line of a program's complaint tells what went wrong (see telling_line), and what to say when none does."""

    starts: tuple[str, ...] = ()
    contains: tuple[str, ...] = ()
    first: bool = False
    silent: str = "exit status {status}"


@dataclass(frozen=True)
class Finished:
    """One external command that ended: as shown (redacted), its exit status, what it printed (stderr redacted).

    `status` is None when it never got one: killed at its time limit, or it could not be started.
    """

    shown: str
    status: int | None
    stdout: str
    stderr: str
    # stdout exactly as written, for output that is not text (a tar of results).
    output: bytes = field(default=b"", repr=False)
    telling: Telling = Telling()

    @property
    def ok(self) -> bool:
        return self.status == 0

    @property
    def reason(self) -> str:
        """The most telling line of the complaint, for a one-line report."""
        t = self.telling
        line = telling_line(self.stderr, starts=t.starts, contains=t.contains, first=t.first)
        return line or t.silent.format(status=self.status)


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
    telling: Telling = Telling(),
) -> Finished:
    """Run `argv` (a list, never a shell); raises OSError only when it cannot be started.

    With `die_with_promote` (and no `stdin`: the guard gives the program /dev/null), the program and
    its children are killed when promote dies, even by SIGKILL, where the platform allows it.
    On timeout, the status is None and the output is what came before the kill.
    """
    shown = redact(" ".join(argv))
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
            status: int | None = proc.returncode
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            status = None
    text = out.decode("utf-8", "replace")
    return Finished(shown, status, text, redact(err.decode("utf-8", "replace")), out, telling)
