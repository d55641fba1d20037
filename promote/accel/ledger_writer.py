"""Append one line to the path's own counter (PROMOTE_LEDGER): stdlib only, so a tested package can copy it.

The contract: while promote runs anything for an acceleration, PROMOTE_LEDGER names a file, and the
accelerated code appends one JSON object per request, one per line:
{"accel": NAME, "outcome": "served" | "declined" | "failed", "reason": STR | None, "seconds": S, "request": {...}},
and, from a path that drafts tokens (speculative decoding), "drafted": N and "accepted": M (0 <= M <= N).
Without PROMOTE_LEDGER nothing is written and nothing is opened.
"""

from __future__ import annotations

import json
import os

LEDGER_ENV = "PROMOTE_LEDGER"
OUTCOMES = ("served", "declined", "failed")


def record(
    accel: str, outcome: str, *, reason: str | None = None, seconds: float, request: dict[str, object],
    drafted: int | None = None, accepted: int | None = None,
) -> None:  # fmt: skip
    """Append the request's outcome when promote asked for a ledger; never raises for want of one."""
    path = os.environ.get(LEDGER_ENV)
    if not path:
        return
    if outcome not in OUTCOMES:
        raise ValueError(f"outcome must be one of {OUTCOMES}, not {outcome!r}")
    if accepted is not None and (drafted is None or not 0 <= accepted <= drafted):
        raise ValueError(f"accepted must be between 0 and drafted ({drafted}), not {accepted!r}")
    if drafted is not None and drafted < 0:
        raise ValueError(f"drafted must be >= 0, not {drafted!r}")
    line: dict[str, object] = {
        "accel": accel, "outcome": outcome, "reason": reason, "seconds": round(seconds, 6), "request": request,
    }  # fmt: skip
    if drafted is not None:
        line["drafted"] = drafted
    if accepted is not None:
        line["accepted"] = accepted
    data = (json.dumps(line, default=str) + "\n").encode("utf-8")
    # One write to a file opened for appending: concurrent writers (threads, workers) never interleave a line.
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
