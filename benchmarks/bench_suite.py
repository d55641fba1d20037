"""Benchmark `promote test` against plain `python -m pytest -n WORKERS` on a real project checked out here.

The project is a git work tree with its own promote.toml (one package, its `python` and `env`); plain pytest
runs in the package's directory with that interpreter and environment, as its CI would. Arms alternate and
rotate each round after one uncounted warm-up of each; each round's ratio is promote's time over plain
pytest's in that round, and the verdict is the median ratio with its distribution-free interval against
`--target`. The load (one-minute average) is printed before and after every arm.

    python benchmarks/bench_suite.py --root /path/to/mlx-engine --rounds 7 --target 1.5
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import time
from pathlib import Path

from promote.config import load_config
from promote.core.stats import median_interval


def load() -> float:
    return os.getloadavg()[0]


def timed(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, int, str]:
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    lines = (done.stdout or done.stderr).strip().splitlines()
    return time.perf_counter() - started, done.returncode, lines[-1] if lines else ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--target", type=float, default=1.5)
    args = parser.parse_args()
    root = args.root.resolve()
    package = load_config(root).packages[0]  # as promote reads it: its path resolved, its python and env
    env = {**os.environ, **dict(package.env)}
    python, workers = package.interpreter, str(package.workers)
    plain = [python, "-m", "pytest", "-n", workers, "-q", "-p", "no:cacheprovider"]
    promote = [shutil.which("promote") or "promote", "test"]
    arms = {"pytest": (plain, package.path), "promote": (promote, root)}
    for argv, cwd in arms.values():  # warm-up: the disk cache, not a figure
        timed(argv, cwd, env)
    ratios = []
    for r in range(args.rounds):
        order = list(arms) if r % 2 == 0 else list(reversed(arms))
        took = {}
        for name in order:
            before = load()
            seconds, status, last = timed(*arms[name], env)
            took[name] = seconds
            print(f"round {r + 1} {name:7} {seconds:6.1f} s  exit {status}  load {before:.2f} -> {load():.2f}  {last}")
        ratios.append(took["promote"] / took["pytest"])
        print(f"round {r + 1} promote/pytest {ratios[-1]:.3f}", flush=True)
    iv = median_interval(ratios, 0.9)
    median = sorted(ratios)[len(ratios) // 2]
    if iv.coverage < 0.9:
        verdict = "inconclusive (too few rounds for a 90% interval)"
    elif iv.high <= args.target:
        verdict = "met"
    elif iv.low > args.target:
        verdict = "missed"
    else:
        verdict = "inconclusive"
    print(
        f"median promote/pytest {median:.3f} ({iv.low:.3f}-{iv.high:.3f}, {iv.coverage:.0%}) "
        f"target {args.target}: {verdict}"
    )


if __name__ == "__main__":
    main()
