"""Where a fleet run's time goes: the bench's fleet arm (400 tests of 50 ms, two loopback stations with two
workers each), its phases read from the run's own records.

Phases, each from a file or line the run wrote (seconds since `promote test` was started):
- `inventory`: this machine detected (the run's station.json written);
- `stations ready`: every station synced, its plugin shipped, its inventory probed (fleet-spec.json written);
- `workers up`: the last worker's `session` line (the controller started, execnet's ssh gateways made, each
  worker's Python and pytest started there);
- `tests`: the first test's start to the last test's end, over all workers;
- `controller done`: the controller's record (fleet.json), after xdist shut its workers and gateways down;
- `reported`: the run's run.json, after promote summarized the records; `exit`: the process ended.

`python benchmarks/fleet_timeline.py --runs 3` prints one row per run. The load average is printed beside it:
a figure taken with the cores busy measures the queue.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import BenchError, format_table, promote_argv
from bench_fleet import TESTS, repository

from tests.helpers import sshd

PHASES = ("inventory", "stations ready", "workers up", "first test", "last test", "controller done", "reported", "exit")


def _events(part: Path) -> list[dict[str, object]]:
    found = []
    for path in part.glob("progress-*.jsonl"):
        found += [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return found


def one(repo: Path) -> list[float]:
    argv = (*promote_argv(), "-C", str(repo), "--config", str(repo / "fleet.toml"), "test", "--json")
    t0 = time.time()
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    end = time.time() - t0
    [pkg] = json.loads(done.stdout)["packages"]
    if pkg["passed"] != TESTS:
        raise BenchError(f"{pkg['passed']} of {TESTS} tests passed")
    out = Path(pkg["results"])
    events = _events(out / "parallel")
    times: dict[str, list[float]] = {}
    for e in events:
        times.setdefault(str(e["event"]), []).append(float(str(e["t"])))

    def at(path: Path) -> float:
        return path.stat().st_mtime - t0

    return [
        at(out.parent / "station.json"), at(out / "fleet-spec.json"), max(times["session"]) - t0,
        min(times["start"]) - t0, max(times["finish"]) - t0, at(out / "parallel" / "fleet.json"),
        at(out.parent / "run.json"), end,
    ]  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="promote-fleet-timeline-"))
    servers: list[sshd.Sshd] = []
    try:
        servers = [sshd.start(root / f"sshd-{i}") for i in (1, 2)]
        repo = repository(root, servers)
        one(repo)  # warm-up, uncounted
        rows = []
        for _ in range(args.runs):
            load = os.getloadavg()[0]
            rows.append([f"{t:.2f}" for t in one(repo)] + [f"{load:.2f}"])
    finally:
        for server in servers:
            sshd.stop(server)
        shutil.rmtree(root, ignore_errors=True)
    print(format_table([*PHASES, "load"], rows))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (BenchError, sshd.SshdUnavailable, subprocess.CalledProcessError) as e:
        print(f"fleet_timeline: {e}", file=sys.stderr)
        sys.exit(1)
