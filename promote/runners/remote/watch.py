"""Runs on a station beside a remote package: prints its progress as JSON lines, kills tests past their timeout.

`python -m promote.runners.remote.watch TIMEOUT_S|none DIR...`: one DIR per part. It reads the same
progress logs, and enforces the same per-test timeout, as the runner does for a local package; it ends
when nobody reads its output any more (the ssh session that started it has closed).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from promote.runners.package import POLL_S, Watch

# The runner's own watch, so a remote package's progress and timeouts are judged exactly as a local one's.
from promote.runners.plugin.records import write_atomic

# Even without news, a line now and then: writing is how the watcher notices that ssh has gone.
HEARTBEAT_S = 2.0
TIMED_OUT = "timed-out.json"


def timed_out(part_dir: Path) -> tuple[str, ...]:
    """The tests the watcher killed for running past the timeout, from the file it left in `part_dir`."""
    path = part_dir / TIMED_OUT
    return tuple(json.loads(path.read_text(encoding="utf-8"))) if path.is_file() else ()


def state(watches: dict[str, Watch]) -> str:
    """One line: tests finished and collected per part."""
    parts = {name: {"finished": w.finished, "total": w.total} for name, w in watches.items()}
    return json.dumps(parts, separators=(",", ":"), sort_keys=True)


def main(argv: list[str]) -> int:
    timeout_s = None if argv[0] == "none" else float(argv[0])
    watches = {Path(d).name: Watch(Path(d), timeout_s) for d in argv[1:]}
    last, written = "", 0.0
    while True:
        for w in watches.values():
            killed = len(w.timed_out)
            w.poll()
            if len(w.timed_out) != killed:
                # A file, not only a line: it comes back with the results even if this output is lost.
                write_atomic(w.out_dir / TIMED_OUT, json.dumps(w.timed_out))
        line = state(watches)
        if line != last or time.monotonic() - written > HEARTBEAT_S:
            try:
                print(line, flush=True)
            except BrokenPipeError:
                # As the Python docs advise: point stdout at devnull so the exit-time flush stays quiet.
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
                return 0
            last, written = line, time.monotonic()
        time.sleep(POLL_S)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
