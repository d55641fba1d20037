"""Run a program with a time limit; on timeout, kill it and everything it started."""

from __future__ import annotations

import contextlib
import ctypes
import itertools
import os
import re
import select
import selectors
import signal
import subprocess
import sys
import time
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

# After a program exits (or is killed at its limit), how long a descendant still holding its pipes may
# go on writing before promote stops reading: everything the program itself wrote is already in the pipe.
DRAIN_S = 0.1
# How often a program with no output is looked at to see whether it exited.
POLL_S = 0.05
_CHUNK = 65536


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


# An exception line pytest prints after INTERNALERROR> (xdist quotes a worker's after "E   ").
_INTERNAL = re.compile(r"^INTERNALERROR>\s+(?:E\s+)?(?P<line>[A-Za-z_][\w.]*(?:Error|Exception|Exit|Warning)\b.*)$")
# xdist's own lines around a worker's internal error: the controller's symptom, never the cause.
_XDIST_SYMPTOMS = ("AssertionError: Traceback", "RuntimeError: Unexpectedly no active workers available")


def internal_error(text: str) -> str:
    """The cause of a pytest INTERNALERROR in `text` ("" when there is none): the first exception's line.

    Under xdist a worker's error comes first, quoted by the controller, and the controller's own
    "Unexpectedly no active workers available" after it: that one is the symptom, with any number of workers.
    """
    for raw in text.splitlines():
        found = _INTERNAL.match(raw.strip())
        if found is not None and not found["line"].startswith(_XDIST_SYMPTOMS):
            return found["line"].strip()[:TELLING_MAX]
    return ""


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
    max_output: int | None = None,
) -> Finished:
    """Run `argv` (a list, never a shell); raises OSError only when it cannot be started.

    With `die_with_promote` (and no `stdin`: the guard gives the program /dev/null), the program and
    its children are killed when promote dies, even by SIGKILL, where the platform allows it.
    On timeout, the status is None and the output is what came before the kill; so it is when the program wrote
    more than `max_output` bytes (stdout and stderr together), killed then. A program that exited
    has its own status, whatever a descendant of it still holds open (see _collect).
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
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            out, err, status = _collect(proc, stdin, deadline, max_output)
        except BaseException:
            # Interrupted (Ctrl-C, SIGTERM): the program and what it started stop with promote, not after it, so
            # nothing (a commit whose hook was still running, a push) lands once promote has given up on it.
            _kill_group(proc)
            raise
    text = out.decode("utf-8", "replace")
    return Finished(shown, status, text, redact(err.decode("utf-8", "replace")), out, telling)


def _collect(
    proc: subprocess.Popen[bytes], stdin: bytes | None, deadline: float | None, max_output: int | None = None
) -> tuple[bytes, bytes, int | None]:
    """(stdout, stderr, status) of `proc`, waiting for its pipes only while it runs and within its time limit.

    End-of-file on a pipe is not the end of the program: a descendant in a session of its own (ssh's
    ControlPersist master, a daemon a transport started) may hold the pipe open long after the program
    exited, and no kill of the program's group reaches it. So the program's exit (or the limit, and the
    kill) ends the wait; what is already in the pipes is read, and a descendant gets DRAIN_S more to finish.
    """
    chunks: dict[int, list[bytes]] = {}
    pending = memoryview(stdin or b"")
    with selectors.DefaultSelector() as sel:
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                chunks[pipe.fileno()] = []
                sel.register(pipe.fileno(), selectors.EVENT_READ)
        if proc.stdin is not None:
            if pending:
                sel.register(proc.stdin.fileno(), selectors.EVENT_WRITE)
            else:
                proc.stdin.close()
        status, timed_out, stop_at = None, False, None
        while sel.get_map():
            now = time.monotonic()
            if stop_at is None:
                status = proc.poll()
                over = max_output is not None and sum(map(len, itertools.chain(*chunks.values()))) > max_output
                if status is None and ((deadline is not None and now >= deadline) or over):
                    _kill_group(proc)
                    timed_out = True
                if status is not None or timed_out:
                    stop_at = now + DRAIN_S
            elif now >= stop_at:
                break
            limit = min(t for t in (stop_at, deadline, now + POLL_S) if t is not None)
            for key, _ in sel.select(max(0.0, limit - now)):
                pending = _transfer(sel, key.fd, proc, chunks, pending)
        for fd in list(sel.get_map()):
            if fd in chunks:
                chunks[fd].append(_read_available(fd))
    if proc.stdin is not None and not proc.stdin.closed:
        with contextlib.suppress(OSError):
            proc.stdin.close()
    if stop_at is None:  # it closed its pipes and runs on: its exit, within the limit, is the end
        try:
            status = proc.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            timed_out = True
    status = None if timed_out else proc.wait()
    out = b"".join(chunks.get(proc.stdout.fileno(), [])) if proc.stdout is not None else b""
    err = b"".join(chunks.get(proc.stderr.fileno(), [])) if proc.stderr is not None else b""
    return out, err, status


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the program and everything in its session's group (it was started as a session leader)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def _transfer(
    sel: selectors.BaseSelector,
    fd: int,
    proc: subprocess.Popen[bytes],
    chunks: dict[int, list[bytes]],
    pending: memoryview,
) -> memoryview:
    """Move what is ready on `fd`: read an output pipe, or write the next piece of stdin; what of stdin is left."""
    if fd in chunks:
        data = os.read(fd, _CHUNK)
        if data:
            chunks[fd].append(data)
        else:
            sel.unregister(fd)
        return pending
    try:
        # At most PIPE_BUF bytes: a pipe that select calls writable takes that much without blocking.
        pending = pending[os.write(fd, pending[: select.PIPE_BUF]) :]
    except BrokenPipeError:
        pending = pending[:0]  # it stopped reading (exited): the rest is not wanted
    if not pending:
        sel.unregister(fd)
        assert proc.stdin is not None
        with contextlib.suppress(OSError):
            proc.stdin.close()
    return pending


def _read_available(fd: int) -> bytes:
    """What is already in the pipe `fd`, without waiting for more."""
    os.set_blocking(fd, False)
    parts = []
    with contextlib.suppress(BlockingIOError, OSError):
        while data := os.read(fd, _CHUNK):
            parts.append(data)
    return b"".join(parts)
