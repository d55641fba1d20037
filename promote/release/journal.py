"""An append-only record of every operation promote performed on a mirror.

Three kinds of entry, each a frozen dataclass with one writer (`append`) and one reader (`read`): a push's
intent (on disk before git runs), its completion (what the mirror was read back holding), and the merge's
verdict. The file is JSON lines; a line cut short by a crash, or of a kind this version does not know, is
skipped when read, never fatal.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, ClassVar, get_args

from promote.core.redact import redact
from promote.core.state import StateError, private_file, read_state, state_dir, state_path
from promote.core.vocab import ADVANCED, MERGED, MergeMirrorState, MergeVerdict

JOURNAL = "journal.jsonl"


@dataclass(frozen=True)
class PushIntent:
    """A push about to start: a merge killed mid-push leaves this open for the next run to settle."""

    op: ClassVar[str] = "push-intent"
    id: str  # the merge's run id and the mirror: the completion carries the same id
    mirror: str
    url: str
    trunk: str
    before: str | None  # the mirror's trunk before the push (None: it had no trunk)
    candidate: str
    time: str = ""  # stamped by `append`

    def done(self, status: MergeMirrorState, after: str | None, reason: str | None) -> PushDone:
        """This push's completion: what the mirror holds now, read back."""
        return PushDone(replace(self, time=""), status, after, reason)

    def to_json(self) -> dict[str, object]:
        return asdict(self)


@dataclass(frozen=True)
class PushDone:
    """A push finished (or an interrupted one settled), with what the mirror was read back holding."""

    op: ClassVar[str] = "push"
    intent: PushIntent  # its own time is not kept: the completion's is
    status: MergeMirrorState
    after: str | None
    reason: str | None
    time: str = ""

    @property
    def id(self) -> str:
        return self.intent.id

    def to_json(self) -> dict[str, object]:
        # Flat, as the journal has always been written: the intent's fields beside the outcome's.
        return {
            **self.intent.to_json(),
            "status": self.status,
            "after": self.after,
            "reason": self.reason,
            "time": self.time,
        }


@dataclass(frozen=True)
class MergeDone:
    """The verdict of one `promote merge` that pushed (its pushes precede it in the journal)."""

    op: ClassVar[str] = "merge"
    trunk: str
    candidate: str
    verdict: MergeVerdict
    time: str = ""

    def to_json(self) -> dict[str, object]:
        return asdict(self)


Entry = PushIntent | PushDone | MergeDone


@dataclass(frozen=True)
class MergeRecord:
    """The journal's account of the merge that put the candidate on the mirrors."""

    trunk: str
    candidate: str
    time: str
    pushed: tuple[tuple[str, str | None], ...]  # (mirror, its trunk before), for each mirror advanced

    @property
    def headline(self) -> str:
        return f"{self.trunk} fast-forwarded to `{self.candidate[:7]}` at {self.time}, no force"


def append(root: Path, entry: Entry) -> Entry:
    """Append `entry`, stamped with the time, to `.promote/journal.jsonl`, on disk before returning.

    Raises StateError when it cannot be written (state dir a file, the journal a directory, disk full).
    """
    stamped = replace(entry, time=datetime.now(timezone.utc).isoformat(timespec="seconds"))
    line = (redact(json.dumps({"op": stamped.op, **stamped.to_json()}, sort_keys=True)) + "\n").encode("utf-8")
    path = state_dir(root) / JOURNAL
    try:
        fd = private_file(path, os.O_RDWR | os.O_APPEND)
        try:
            size = os.fstat(fd).st_size
            # A line cut short (a full disk, a kill mid-write) must not swallow the next one.
            if size and os.pread(fd, 1, size - 1) != b"\n":
                line = b"\n" + line
            # One write on an O_APPEND descriptor: a line is never interleaved with another writer's.
            if os.write(fd, line) != len(line):
                raise OSError(28, "short write (disk full?)")
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as e:
        raise StateError(f"cannot write the journal {path}: {e.strerror or e}") from None
    return stamped


def writable(root: Path) -> Path:
    """The journal's path, after making sure an entry could be appended to it (creating it if need be)."""
    path = state_dir(root) / JOURNAL
    try:
        os.close(private_file(path))
    except OSError as e:
        raise StateError(f"cannot write the journal {path}: {e.strerror or e}") from None
    return path


def read(root: Path) -> list[Entry]:
    """Every journal entry, oldest first; a line cut short by a crash, or not an entry, is skipped."""
    path = state_path(root) / JOURNAL
    try:
        data = read_state(path)
    except OSError as e:
        raise StateError(f"cannot read the journal {path}: {e.strerror or e}") from None
    entries = []
    # Decoded line by line: a line of bytes that are not UTF-8 (a disk fault, another tool) is one bad line,
    # skipped like a line cut short, not the whole journal (UnicodeDecodeError is a ValueError).
    for line in data.splitlines():
        try:
            entry = _entry(json.loads(line.decode("utf-8")))
        except (ValueError, TypeError, KeyError):
            continue
        if entry is not None:
            entries.append(entry)
    return entries


def _entry(d: object) -> Entry | None:
    """The entry a journal line holds; None for a kind this version does not write."""
    if not isinstance(d, dict):
        raise ValueError("not an object")
    time = _text(d, "time")
    if d.get("op") == MergeDone.op:
        verdict = _member(d, "verdict", get_args(MergeVerdict))
        return MergeDone(_text(d, "trunk"), _text(d, "candidate"), verdict, time)
    if d.get("op") not in (PushIntent.op, PushDone.op):
        return None
    intent = PushIntent(
        _text(d, "id"), _text(d, "mirror"), _text(d, "url"), _text(d, "trunk"), _maybe(d, "before"),
        _text(d, "candidate"), time,
    )  # fmt: skip
    if d["op"] == PushIntent.op:
        return intent
    status = _member(d, "status", get_args(MergeMirrorState))
    return PushDone(replace(intent, time=""), status, _maybe(d, "after"), _maybe(d, "reason"), time)


def _text(d: dict[str, object], key: str) -> str:
    value = d[key]
    if not isinstance(value, str):
        raise TypeError(key)
    return value


def _maybe(d: dict[str, object], key: str) -> str | None:
    return None if d.get(key) is None else _text(d, key)


def _member(d: dict[str, object], key: str, allowed: tuple[str, ...]) -> Any:
    value = _text(d, key)
    if value not in allowed:
        raise ValueError(f"{key} {value!r}")
    return value


def last_merge(root: Path, candidate: str) -> MergeRecord | None:
    """The journal's record of the merge that put `candidate` on every mirror, if promote did it."""
    entries = read(root)
    for i in range(len(entries) - 1, -1, -1):
        e = entries[i]
        if isinstance(e, MergeDone) and e.candidate == candidate and e.verdict == MERGED:
            start = max((j for j in range(i) if isinstance(entries[j], MergeDone)), default=-1) + 1
            pushed = {
                p.intent.mirror: p.intent.before
                for p in entries[start:i]
                if isinstance(p, PushDone) and p.intent.candidate == candidate and p.status == ADVANCED
            }
            return MergeRecord(e.trunk, candidate, e.time, tuple(pushed.items()))
    return None
