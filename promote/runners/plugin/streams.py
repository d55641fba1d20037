"""MLX stream provenance: who made each stream, and the finding when one is used off its thread.

MLX registers streams per thread: using a stream made on another thread raises
`RuntimeError: There is no Stream(cpu, N) in current thread.` The error shows up wherever the
stream is used; the tracker remembers where it was made, so the finding can name that test.
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from promote.core.findings import Finding, Location
from promote.runners.plugin.records import StreamRecord

CROSS_THREAD = re.compile(r"There is no Stream\((\w+), (\d+)\) in current thread")
_STREAM_REPR = re.compile(r"Stream\(Device\((\w+), \d+\), (\d+)\)")
_ADVICE = (
    "MLX streams belong to the thread that made them: make the stream on the thread that uses "
    "it, or use mx.new_thread_local_stream"
)

# Where the session is: (test or collector nodeid, phase, fixture being set up).
if TYPE_CHECKING:  # only in annotations: `str | None` is no runtime value on Python 3.9, where the plugin loads too
    Whereabouts = Callable[[], tuple[str | None, str, str | None]]


def stream_key(stream: Any) -> tuple[str, int] | None:
    """(device type, index) from a stream's repr, e.g. `Stream(Device(cpu, 0), 1)` -> ("cpu", 1)."""
    m = _STREAM_REPR.fullmatch(repr(stream))
    return (m.group(1), int(m.group(2))) if m else None


class StreamTracker:
    """Wraps `mx.new_stream` while installed, recording the test, phase and thread of each call."""

    def __init__(self, mx: Any, where: Whereabouts) -> None:
        self.mx = mx
        self.where = where
        self.records: dict[tuple[str, int], StreamRecord] = {}
        self.threads: dict[tuple[str, int], threading.Thread] = {}
        self._original: Callable[..., Any] = mx.new_stream
        # The installing thread's default streams are known too; other threads' are made lazily.
        for device in [mx.cpu] + ([mx.gpu] if mx.is_available(mx.gpu) else []):
            self._record(mx.default_stream(device), phase="default")

        @functools.wraps(self._original)
        def new_stream(*args: Any, **kwargs: Any) -> Any:
            stream = self._original(*args, **kwargs)
            self._record(stream, phase=None)
            return stream

        self._wrapper = new_stream
        mx.new_stream = new_stream

    def _record(self, stream: Any, *, phase: str | None) -> None:
        key = stream_key(stream)
        if key is None:
            return
        nodeid, current_phase, fixture = self.where()
        thread = threading.current_thread()
        self.records[key] = StreamRecord(
            device=key[0],
            index=key[1],
            created_by=None if phase == "default" else nodeid,
            phase=phase or current_phase,
            thread_name=thread.name,
            thread_id=thread.ident or 0,
            fixture=None if phase == "default" else fixture,
        )
        self.threads[key] = thread

    def uninstall(self) -> None:
        """Put the original `mx.new_stream` back (unless someone else replaced it since)."""
        if self.mx.new_stream is self._wrapper:
            self.mx.new_stream = self._original

    def findings(self, subject: str, text: str, location: Location | None = None) -> list[Finding]:
        """A `cross-thread-stream` finding for each stream named by the error in `text`, at the failing test."""
        out = []
        for device, index in dict.fromkeys(CROSS_THREAD.findall(text)):
            key = (device, int(index))
            out.append(replace(self._finding(subject, key), location=location))
        return out

    def _finding(self, subject: str, key: tuple[str, int]) -> Finding:
        name = f"Stream({key[0]}, {key[1]})"
        rec = self.records.get(key)
        if rec is None:
            message = (
                f"{name} was used on a thread that did not make it; promote did not see it made "
                "by mx.new_stream, so it is most likely another thread's default stream (MLX "
                "gives each thread its own): evaluate arrays on the thread that built them"
            )
            return Finding("cross-thread-stream", "error", subject, message, cause=None)
        alive = self.threads[key].is_alive()
        state = "was still running" if alive else "had already exited"
        if rec.phase == "default":
            made = "as its default stream"
        else:
            fixture = f"by fixture '{rec.fixture}' " if rec.fixture else ""
            made = f"{fixture}during {rec.phase} of {rec.created_by}"
        message = (
            f"{name} was used on a thread that did not make it: it was made {made} on thread "
            f"'{rec.thread_name}' (ident {rec.thread_id}), which {state}. {_ADVICE}"
        )
        return Finding("cross-thread-stream", "error", subject, message, cause=rec.created_by)
