"""What a rerun pays for collecting the whole package: mlx-lm's suite, one test rerun, two arms interleaved.

A rerun that judges "flaky" must collect what the failing run collected (import-time side effects
happen as they did), so each rerun imports every test module of the package and selects the tests it
needs. Arms, alternating which goes first each round, after one uncounted warm-up each:
- `whole`: promote's rerun as it is made (`Rerunner.fails`), the whole package collected;
- `needed`: the same rerun with every other module left out of collection (`ignore=`), what a rerun
  collecting only the victim's module costs.

    python benchmarks/bench_rerun_collection.py --rounds 7
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import BenchError, exclusive, format_table, machine_info, median_interval, write_results
from bench_mlxlm import CORPUS_DIR, unpack

from promote.config import load as load_config
from promote.runners.causes.rerun import Rerunner

VICTIM = "tests/test_sample_utils.py::TestSampleUtils::test_apply_top_p"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    with exclusive("bench_rerun_collection"):
        root = CORPUS_DIR / "mlx-lm-reruns"
        repo, _ = unpack(root)
        config = load_config(root / "promote" / "promote.toml")
        [pkg] = config.packages
        modules = sorted(p.relative_to(repo).as_posix() for p in (repo / "tests").glob("test_*.py"))
        others = [m for m in modules if m != VICTIM.split("::")[0]]
        rerunner = Rerunner(pkg, pkg.interpreter, Path(tempfile.mkdtemp(prefix="bench-reruns-")))
        arms = {
            "whole": lambda: rerunner.fails([], VICTIM),
            "needed": lambda: rerunner.fails([], VICTIM, ignore=others),
        }
        for name, rerun in arms.items():  # warm-up: page cache, .pyc files
            if rerun():
                raise BenchError(f"{VICTIM} failed in the {name} arm's warm-up: nothing to time")
        seconds: dict[str, list[float]] = {name: [] for name in arms}
        for i in range(args.rounds):
            order = list(arms) if i % 2 == 0 else list(reversed(arms))
            for name in order:
                started = time.perf_counter()
                arms[name]()
                seconds[name].append(time.perf_counter() - started)
            print(
                f"  round {i + 1}/{args.rounds}: " + ", ".join(f"{n} {seconds[n][-1]:.2f}s" for n in order), flush=True
            )
    ratios = [w / n for w, n in zip(seconds["whole"], seconds["needed"], strict=True)]
    extra = [w - n for w, n in zip(seconds["whole"], seconds["needed"], strict=True)]
    iv, ev = median_interval(ratios), median_interval(extra)
    print(format_table(["arm", "median s", "min s", "max s"], [
        [n, f"{statistics.median(s):.2f}", f"{min(s):.2f}", f"{max(s):.2f}"] for n, s in seconds.items()
    ]))  # fmt: skip
    print(f"\nwhole/needed {statistics.median(ratios):.3f} [{iv.low:.3f}-{iv.high:.3f}] ({iv.coverage:.0%}); "
          f"whole - needed {statistics.median(extra):.2f} s [{ev.low:.2f}-{ev.high:.2f}] per rerun")  # fmt: skip
    command = f"python benchmarks/bench_rerun_collection.py --rounds {args.rounds}"
    data: dict[str, Any] = {"machine": machine_info(), "seconds": seconds, "victim": VICTIM, "command": command}
    print(f"\nresults: {write_results('bench_rerun_collection', data)}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchError as e:
        print(f"bench_rerun_collection: {e}", file=sys.stderr)
        sys.exit(1)
