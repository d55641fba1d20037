"""The per-worker progress log: one JSON line as each test starts and finishes, flushed at once.

It is what survives a worker that dies (segfault, `os._exit`, a kill after a timeout): the
last `start` line without a matching `finish` names the test that was running.
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from promote.core import state
from promote.core.redact import current as current_redactor
from promote.runners.plugin.records import progress_path


@dataclass(frozen=True)
class ProgressEvent:
    """One line: `session` (worker up), `start`, `finish` (with outcome) or `end` (clean exit)."""

    event: str
    worker: str
    t: float
    nodeid: str | None = None
    index: int | None = None
    outcome: str | None = None
    pid: int | None = None
    records: list[dict[str, Any]] | None = None
    count: int | None = None
    serial_left: int | None = None
    findings: list[dict[str, Any]] | None = None
    leaked: list[dict[str, Any]] | None = None  # on a `finish` line: the test's leaked state, as data
    duration_s: float | None = None  # on a short `finish` line, which stands for its record
    thread: str | None = None  # on `session`: the process's main thread, where tests normally run
    thread_id: int | None = None


class ProgressLog:
    """Appends events for one worker; each line reaches the OS in one write as it is made."""

    def __init__(self, out_dir: Path, worker: str, outbox: list[str] | None = None) -> None:
        state.private_dir(out_dir)
        self.worker = worker
        self.outbox = outbox
        self._worker_json = json.dumps(worker)
        # A raw descriptor, no Python buffer: a line written is the kernel's, so it outlives the
        # process, and it costs one write() call rather than a trip through two buffering layers.
        self._fd: int | None = os.open(progress_path(out_dir, worker), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        main = threading.main_thread()
        self._write({"event": "session", "pid": os.getpid(), "thread": main.name, "thread_id": main.ident})

    def _emit(self, line: str) -> None:
        if self.outbox is not None:
            # A fleet's worker: the line also travels to the controller with the next report it sends.
            self.outbox.append(line)
        if self._fd is None:
            return
        data = line.encode()  # JSON escapes everything outside ASCII
        while data:
            data = data[os.write(self._fd, data) :]

    def _write(self, fields: dict[str, Any]) -> None:
        line = {"worker": self.worker, "t": round(time.time(), 6), **fields}
        self._emit(json.dumps(line, separators=(",", ":")) + "\n")

    def collected(self, count: int, *, serial_left: int | None = None) -> None:
        """How many tests this process will run, and how many serial ones it left to another process."""
        line: dict[str, Any] = {"event": "collected", "count": count}
        if serial_left is not None:
            line["serial_left"] = serial_left
        self._write(line)

    def start(self, nodeid: str, index: int) -> None:
        """A test's protocol (setup, call, teardown) begins."""
        # Written once per test in every worker: formatted by hand, the same line `_write` would make.
        self._emit(
            f'{{"worker":{self._worker_json},"t":{time.time():.6f},"event":"start",'
            f'"nodeid":{json.dumps(nodeid)},"index":{int(index)}}}\n'
        )

    def finish_passed(self, nodeid: str, index: int, duration_s: float) -> None:
        """A test passed on the main thread with nothing more to say: the line alone rebuilds its record."""
        # The usual case, once per test in every worker: formatted by hand, without a copy of the record.
        self._emit(
            f'{{"worker":{self._worker_json},"t":{time.time():.6f},"event":"finish",'
            f'"nodeid":{json.dumps(nodeid)},"index":{int(index)},"outcome":"passed",'
            f'"duration_s":{float(duration_s)!r}}}\n'
        )

    def finish(
        self,
        nodeid: str,
        index: int,
        outcome: str,
        records: list[dict[str, Any]] | None = None,
        findings: list[dict[str, Any]] | None = None,
        leaked: list[dict[str, Any]] | None = None,
    ) -> None:
        """A test's protocol ended with `outcome`; its records, new findings and leaks survive a later crash."""
        line: dict[str, Any] = {"event": "finish", "nodeid": nodeid, "index": index, "outcome": outcome}
        # A failure's text or a finding may quote a secret: redacted (promote.core.redact) before it is written.
        if records:
            line["records"] = current_redactor().data(records)
        if findings:
            line["findings"] = current_redactor().data(findings)
        if leaked:
            line["leaked"] = current_redactor().data(leaked)
        self._write(line)

    def detach(self) -> None:
        """Close the file without a clean-exit line: a forked child leaves its parent's log to the parent."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def close(self) -> None:
        """Write the clean-exit line and close the file."""
        if self._fd is not None:
            self._write({"event": "end"})
            os.close(self._fd)
            self._fd = None


# Each field's type, as the log writes it: a line whose fields are not (a station's damaged relay, a last
# line cut short by a dying process) is skipped, never half-read.
_STR, _INT, _LIST = (str,), (int,), (list,)
_TYPES: dict[str, tuple[type, ...]] = {
    "event": _STR, "worker": _STR, "t": (int, float), "nodeid": _STR, "index": _INT, "outcome": _STR,
    "pid": _INT, "records": _LIST, "count": _INT, "serial_left": _INT, "findings": _LIST, "leaked": _LIST,
    "duration_s": (int, float), "thread": _STR, "thread_id": _INT,
}  # fmt: skip


def event_of(d: object) -> ProgressEvent | None:
    """One progress line's event, or None when it is not one (wrong types, a missing field)."""
    if not isinstance(d, dict) or any(d.get(k) is None for k in ("event", "worker", "t")):
        return None
    known = {k: d[k] for k in _TYPES if d.get(k) is not None}
    for k, v in known.items():
        if not isinstance(v, _TYPES[k]) or isinstance(v, bool):
            return None
        if isinstance(v, float) and not math.isfinite(v):
            return None  # a NaN start time would never reach a timeout
        if isinstance(v, list) and not all(isinstance(item, dict) for item in v):
            return None
    return ProgressEvent(**known)


def read_progress(path: Path) -> list[ProgressEvent]:
    """Read a progress log, skipping a last line cut short by a dying process, and any line not the log's own."""
    events = []
    with path.open(encoding="utf-8", errors="replace") as f:
        for line in f:
            try:
                d = json.loads(line)
            except (ValueError, RecursionError):
                continue
            if (event := event_of(d)) is not None:
                events.append(event)
    return events


class LogTail:
    """What one progress log has said so far; only the lines added since the last look are read.

    The runner follows each worker's log with one while the tests run; read once to the end, it
    says which tests a dead process left unfinished.
    """

    def __init__(self) -> None:
        self.offset = 0
        self.partial = b""
        self.finished = 0
        self.collected = 0
        self.pid: int | None = None
        self.running: tuple[str, float] | None = None  # (test id, start time) while a test runs
        self.lost: list[str] = []  # tests that were running when their process died
        self.serial_left: list[int | None] = []  # what each `collected` line said was left for the serial part

    def read(self, path: Path) -> None:
        with path.open("rb") as f:
            f.seek(self.offset)
            chunk = f.read()
        self.offset += len(chunk)
        *lines, self.partial = (self.partial + chunk).split(b"\n")
        for line in lines:
            # Finish lines carry the test's records and are by far the longest: count them unparsed.
            if b'"event":"finish"' in line:
                self.finished += _top_level(line)
                self.running = None
                continue
            try:
                event = event_of(json.loads(line))
            except (ValueError, RecursionError):
                continue
            if event is None:
                continue
            kind = event.event
            if kind == "session":
                # A new process appending to the same log (a replaced worker): the old one died mid-test.
                if self.running is not None:
                    self.lost.append(self.running[0])
                self.pid, self.running = event.pid, None
            elif kind == "collected":
                self.collected = max(self.collected, event.count or 0)
                self.serial_left.append(event.serial_left)
            elif kind == "start":
                self.running = (str(event.nodeid), float(event.t))
            elif kind == "end":
                self.running = None

    def unfinished(self) -> list[str]:
        """Tests that started and never finished: each one was running when its process died."""
        return [*self.lost, *([self.running[0]] if self.running is not None else [])]


def _top_level(finish: bytes) -> int:
    """1 for a finished test, 0 for a collection error (written as a finish with index 0)."""
    # The first `"index":` is the line's own: the test id before it is a JSON string, whose quotes are escaped.
    at = finish.find(b'"index":')
    return 0 if at >= 0 and finish[at + 8 : at + 10] in (b"0,", b"0}") else 1


def unfinished(path: Path) -> list[str]:
    """The tests a progress log shows started and never finished (see `LogTail.unfinished`)."""
    tail = LogTail()
    tail.read(path)
    return tail.unfinished()
