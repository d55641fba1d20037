"""Benchmark the quality yardstick's cost in promote: pairing, reading and judging 10,000 items.

The evaluation itself is the team's and takes what it takes; this measures what promote adds to it: one
arm's JSON lines read, the two arms paired item by item, and the statistics (an exact interval per arm,
McNemar's exact p, Newcombe's interval, and the items that would decide an inconclusive verdict). Each
figure is the median of `--rounds` rounds with a distribution-free interval.

    python benchmarks/bench_paired.py --items 10000 --rounds 21
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from promote.accel.quality import judge, pair, read_items
from promote.config.settings import QualityConfig
from promote.core.stats import median_interval


def timed(work: Callable[[], object], rounds: int) -> str:
    """`812 us (790-840)`: the median of `rounds` timings and its interval."""
    seconds = []
    for _ in range(rounds):
        started = time.perf_counter()
        work()
        seconds.append(time.perf_counter() - started)
    iv = median_interval(seconds, 0.9)
    median = sorted(seconds)[len(seconds) // 2]
    return f"{median * 1e6:,.0f} us ({iv.low * 1e6:,.0f}-{iv.high * 1e6:,.0f}, {iv.coverage:.0%})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=21)
    args = parser.parse_args()
    if args.rounds < 5:
        parser.error("--rounds: at least 5")
    rng = random.Random(0)
    # About 90% solved, about 2% of the items discordant each way: a path no worse, on a yardstick near its ceiling.
    off = {f"item-{i}": rng.random() < 0.9 for i in range(args.items)}
    on = {k: (not v) if rng.random() < (0.02 if v else 0.18) else v for k, v in off.items()}
    spec = QualityConfig(("evaluate", "{out}"))
    # A margin the interval straddles, so the search for the items that would decide it runs too.
    straddling = QualityConfig(("evaluate", "{out}"), margin=0.001)
    with tempfile.TemporaryDirectory(prefix="promote-bench-paired-") as tmp:
        path = Path(tmp) / "items.jsonl"
        path.write_text("".join(json.dumps({"item": k, "passed": v}) + "\n" for k, v in on.items()))
        t, _ = pair(off, on)
        print(f"{args.items:,} items: {t.on_only} on only, {t.off_only} off only; {judge(t, spec).verdict}")
        print(f"read one arm's lines    {timed(lambda: read_items(path), args.rounds)}")
        print(f"pair the two arms       {timed(lambda: pair(off, on), args.rounds)}")
        print(f"judge (the statistics)  {timed(lambda: judge(t, spec), args.rounds)}")
        print(f"judge, inconclusive     {timed(lambda: judge(t, straddling), args.rounds)}")


if __name__ == "__main__":
    main()
