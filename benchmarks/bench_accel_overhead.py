"""Benchmark the bench's own overhead per round: promote's `measure` vs the same command run directly, interleaved.

Each round runs one command three ways, rotating which goes first: directly (`subprocess.run`, timed
around it), through `promote.accel.bench.measure` (timed around the call: its bounded runner, the load
sampler thread, the load and rusage reads), and through `measure` with a metric (`{out}` substituted,
the JSON read back and checked). The figure is the median per-round difference, as a share of the direct
run's wall time; the target is under 1%. It also reports what `measure` itself timed (its `wall_s`)
against the direct run: the sampler thread runs beside the command, so it could bias the figure too.

    python benchmarks/bench_accel_overhead.py --rounds 21 --sleep 0.2
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from promote.accel.bench import Metric, measure
from promote.accel.commands import Arm
from promote.core.stats import median_interval

TARGET = 0.01
COMMAND = (
    "import json, sys, time; time.sleep({s}); "
    "sys.argv[1:] and json.dump({{'tokens_per_s': 50.0}}, open(sys.argv[1], 'w'))"
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--sleep", type=float, default=0.2, help="seconds the command sleeps (its own time)")
    args = parser.parse_args()
    if args.rounds < 9:
        parser.error("--rounds: at least 9")
    code = COMMAND.format(s=args.sleep)
    tmp = Path(tempfile.mkdtemp(prefix="promote-bench-overhead-"))
    plain = Arm("plain", (sys.executable, "-c", code), tmp, {})
    with_out = Arm("metric", (sys.executable, "-c", code, "{out}"), tmp, {})
    metric = Metric("tokens_per_s", tmp / "out.json", round=1)

    def direct() -> float:
        started = time.perf_counter()
        subprocess.run(plain.argv, cwd=tmp, env={**os.environ}, capture_output=True, check=True)
        return time.perf_counter() - started

    def via_measure(m: Metric | None) -> tuple[float, float]:
        """(seconds around the call, the wall time measure itself recorded)."""
        started = time.perf_counter()
        run = measure(with_out if m else plain, None, m)
        return time.perf_counter() - started, run.wall_s

    arms = {
        "direct": lambda: (direct(), 0.0),
        "measure": lambda: via_measure(None),
        "metric": lambda: via_measure(metric),
    }
    names = list(arms)
    for name in names:  # warm-up: the interpreter's files in the page cache
        arms[name]()
    load_before = os.getloadavg()[0]
    times: dict[str, list[float]] = {n: [] for n in names}
    inner: dict[str, list[float]] = {n: [] for n in names}
    for i in range(args.rounds):
        # Rotated: each arm goes first, second and third equally often.
        for name in names[i % 3 :] + names[: i % 3]:
            outer, timed = arms[name]()
            times[name].append(outer)
            inner[name].append(timed)
    load_after = os.getloadavg()[0]
    base = times["direct"]
    print(f"rounds {args.rounds}, 3 arms rotated; command: python -c 'time.sleep({args.sleep})' (+ a JSON write)")
    print(f"median direct {statistics.median(base) * 1000:.2f} ms per run")
    for name in ("measure", "metric"):
        extra = [t - b for t, b in zip(times[name], base, strict=True)]
        share = [e / b for e, b in zip(extra, base, strict=True)]
        iv = median_interval(share, 0.9)
        bias = [t - b for t, b in zip(inner[name], base, strict=True)]
        verdict = "met" if iv.high < TARGET else "missed" if iv.low >= TARGET else "undecided"
        print(
            f"{name}: overhead per round median {statistics.median(extra) * 1000:+.2f} ms = "
            f"{statistics.median(share):+.3%} of the command (90% interval {iv.low:+.3%} to {iv.high:+.3%}; "
            f"target < {TARGET:.0%}: {verdict}); its own wall_s vs direct {statistics.median(bias) * 1000:+.2f} ms"
        )
    print(f"load average before/after: {load_before:.1f} / {load_after:.1f} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
