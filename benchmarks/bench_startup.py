"""Benchmark `promote test`'s start-up on a real suite: two promote trees, arms interleaved.

Each arm runs `promote test --json` in SUITE with PYTHONPATH at its tree (a git worktree of the
commit to measure), through a driver that notes when the first pytest process is started. With
`--full 0` (the default) the driver exits at that moment, so a round costs a fraction of a second
and measures exec -> first pytest Popen alone. With `--full N`, N more rounds run the whole suite
and also time the run from exec to exit (the figure a user sees; on a shared machine, noisy).

    git worktree add /tmp/before <commit>; git worktree add /tmp/after <commit>
    python benchmarks/bench_startup.py /tmp/before /tmp/after SUITE --rounds 30 --full 4
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import WORK_DIR, exclusive, machine_info, pycache_env

# Notes the time of the first `... pytest ...` Popen in MARK; exits there when told to (start-up only).
DRIVER = """
import os, runpy, subprocess, sys, time
init = subprocess.Popen.__init__
def noting(self, args, *rest, **kwargs):
    if "pytest" in [str(a) for a in args] and not os.path.exists(os.environ["MARK"]):
        with open(os.environ["MARK"], "w") as f:
            f.write(repr(time.time()))
        if os.environ.get("EXIT_AT_POPEN"):
            os._exit(0)
    init(self, args, *rest, **kwargs)
subprocess.Popen.__init__ = noting
sys.argv = ["promote", *sys.argv[1:]]
runpy.run_module("promote", run_name="__main__", alter_sys=True)
"""


def run_arm(tree: Path, suite: Path, *, full: bool) -> tuple[float, float]:
    """(exec -> first pytest Popen, exec -> exit) in seconds, for one `promote test` from `tree`."""
    mark = WORK_DIR / "startup.mark"
    mark.unlink(missing_ok=True)
    env = {**os.environ, **pycache_env(), "PYTHONPATH": str(tree), "MARK": str(mark)}
    if not full:
        env["EXIT_AT_POPEN"] = "1"
    t0 = time.time()
    done = subprocess.run([sys.executable, "-c", DRIVER, "test", "--json"], cwd=suite, env=env, capture_output=True)
    wall = time.time() - t0
    if not mark.exists() or (full and done.returncode not in (0, 1)):
        raise SystemExit(f"{tree}: promote test exited {done.returncode}: {done.stderr.decode(errors='replace')}")
    if full:
        json.loads(done.stdout)  # a whole report, or this round measured nothing
    return float(mark.read_text()) - t0, wall


def rounds(trees: dict[str, Path], suite: Path, n: int, *, full: bool) -> dict[str, list[tuple[float, float]]]:
    """`n` rounds, the first arm alternating, after one uncounted warm-up of each (bytecode, page cache)."""
    for tree in trees.values():
        run_arm(tree, suite, full=False)
    seen: dict[str, list[tuple[float, float]]] = {name: [] for name in trees}
    for i in range(n):
        for name in list(trees) if i % 2 == 0 else list(reversed(trees)):
            seen[name].append(run_arm(trees[name], suite, full=full))
            if full:
                print(f"  round {i + 1}/{n} {name}: start {seen[name][-1][0]:.3f} s, run {seen[name][-1][1]:.1f} s")
    return seen


def report(seen: dict[str, list[tuple[float, float]]], which: int, unit: str) -> None:
    scale = 1000 if unit == "ms" else 1
    for name, values in seen.items():
        v = [x[which] * scale for x in values]
        print(f"  {name}: median {statistics.median(v):.1f} {unit} (min {min(v):.1f}, max {max(v):.1f}, n={len(v)})")
    before, after = (seen[n] for n in seen)
    diffs = [(a[which] - b[which]) * scale for a, b in zip(after, before, strict=True)]
    print(f"  after - before, per round: median {statistics.median(diffs):+.1f} {unit}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("suite", type=Path, help="a directory with a promote.toml (the real suite)")
    parser.add_argument("--rounds", type=int, default=30, help="start-up-only rounds")
    parser.add_argument("--full", type=int, default=0, help="whole-suite rounds")
    args = parser.parse_args()
    trees = {"before": args.before.resolve(), "after": args.after.resolve()}
    with exclusive("startup"):
        print(json.dumps(machine_info()))
        print("exec -> first pytest Popen (start-up only):")
        report(rounds(trees, args.suite, args.rounds, full=False), 0, "ms")
        if args.full:
            seen = rounds(trees, args.suite, args.full, full=True)
            print("whole runs, exec -> first pytest Popen:")
            report(seen, 0, "ms")
            print("whole runs, exec -> exit:")
            report(seen, 1, "s")


if __name__ == "__main__":
    main()
