"""Benchmark what importing GitPython adds to a command's start, against the modules promote drives git with.

Each round starts, in random order, a fresh `PYTHON -c "import subprocess"` (what promote's git layer
imports) and `PYTHON -c "import git"` (GitPython, which also runs `git version` when imported); the figure is
the median difference of each round's pair with its distribution-free interval. PYTHON is an interpreter
that has GitPython installed (promote does not depend on it).

    python benchmarks/bench_git_import.py --python /path/to/venv-with-gitpython/bin/python --rounds 31
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import time

from promote.core.stats import median_interval

ARMS = {"subprocess": "import subprocess", "GitPython": "import git"}


def started(python: str, code: str) -> float:
    began = time.perf_counter()
    subprocess.run([python, "-c", code], check=True)
    return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", required=True)
    parser.add_argument("--rounds", type=int, default=31)
    args = parser.parse_args()
    before = os.getloadavg()[0]
    for code in ARMS.values():  # warm-up: the disk cache and the .pyc files, not a figure
        started(args.python, code)
    took: dict[str, list[float]] = {name: [] for name in ARMS}
    for _ in range(args.rounds):
        for name in random.sample(list(ARMS), len(ARMS)):
            took[name].append(started(args.python, ARMS[name]))
    added = [g - s for g, s in zip(took["GitPython"], took["subprocess"], strict=True)]
    for name, seconds in took.items():
        print(f"{name:10} median {sorted(seconds)[len(seconds) // 2] * 1e3:6.1f} ms")
    iv = median_interval(added, 0.9)
    median = sorted(added)[len(added) // 2]
    print(
        f"GitPython adds {median * 1e3:.1f} ms ({iv.low * 1e3:.1f}-{iv.high * 1e3:.1f}, {iv.coverage:.0%}) "
        f"to a start; load {before:.2f} -> {os.getloadavg()[0]:.2f}"
    )


if __name__ == "__main__":
    main()
