"""Benchmark `promote test` against plain `python -m pytest -n WORKERS` on a real project checked out here.

The project is a git work tree with its own promote.toml (one package, its `python` and `env`); plain pytest
runs in the package's directory with that interpreter and environment, as its CI would. Arms alternate and
rotate each round after one uncounted warm-up of each; each round's ratio is promote's time over plain
pytest's in that round, and the verdict is the median ratio with its distribution-free interval against
`--target`. Beside each run: the CPU the rest of the machine used meanwhile (the noise).

    python benchmarks/bench_suite.py --root /path/to/mlx-engine --rounds 7 --target 1.5
"""

from __future__ import annotations

import argparse
from pathlib import Path

from _common import Arm, interleave, promote_argv

from promote.config import load_config
from promote.core.stats import median_interval


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--target", type=float, default=1.5)
    args = parser.parse_args()
    root = args.root.resolve()
    package = load_config(root).packages[0]  # as promote reads it: its path resolved, its python and env
    plain = (package.interpreter, "-m", "pytest", "-n", str(package.workers), "-q", "-p", "no:cacheprovider")
    red_or_green, env = frozenset({0, 1}), dict(package.env)  # the suite may be red: its time is the figure
    pytest_arm = Arm("pytest", plain, package.path, red_or_green, lambda _: None, env)
    promote_arm = Arm("promote", (*promote_argv(), "test"), root, red_or_green, lambda _: None, env)
    timings = interleave(pytest_arm, promote_arm, args.rounds, show_noise=True)
    ratios = [p / q for p, q in zip(timings.seconds["promote"], timings.seconds["pytest"], strict=True)]
    print("per-round promote/pytest: " + ", ".join(f"{r:.3f}" for r in ratios))
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
