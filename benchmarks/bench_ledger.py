"""Benchmark the ledger's cost: the demo's decode bench with PROMOTE_LEDGER set vs unset, arms interleaved.

Builds the demo workspace, then in one process runs the work of `python -m sanctum_mlx.bench` (four
DFlash2 requests of 64 tokens) once per arm per round, the arms alternating which goes first. The
figure is the median per-round ratio ledger-on / ledger-off with a distribution-free interval; the
target is at most 1.01. Each ledger-on round appends to a fresh file. It also times the append alone.

    python benchmarks/bench_ledger.py --rounds 21
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from promote.core.stats import median_interval
from promote.demo.build import build

TARGET = 1.01


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=21)
    args = parser.parse_args()
    if args.rounds < 9:
        parser.error("--rounds: at least 9")
    tmp = Path(tempfile.mkdtemp(prefix="promote-bench-ledger-"))
    example = build(tmp / "demo")
    sys.path.insert(0, str(example.repo / "packages" / "sanctum-mlx"))
    os.environ["SANCTUM_MLX_DFLASH2"] = "1"
    from sanctum_mlx import bench, ledger  # type: ignore[import-not-found]

    def arm(path: Path | None) -> tuple[float, float]:
        """(wall, CPU) seconds of one bench run; CPU time (all threads) is what other load disturbs least."""
        if path is None:
            os.environ.pop("PROMOTE_LEDGER", None)
        else:
            os.environ["PROMOTE_LEDGER"] = str(path)
        wall, cpu = time.perf_counter(), time.process_time()
        bench.main()
        return time.perf_counter() - wall, time.process_time() - cpu

    load_before = os.getloadavg()[0]
    arm(None)  # warm-up: models built, kernels compiled
    ratios, cpu_ratios, on_s, off_s = [], [], [], []
    for i in range(args.rounds):
        path = tmp / f"ledger-{i}.jsonl"
        if i % 2 == 0:
            off, on = arm(None), arm(path)
        else:
            on, off = arm(path), arm(None)
        assert len(path.read_text().splitlines()) == 4, "each ledger-on round writes one line per request"
        ratios.append(on[0] / off[0])
        cpu_ratios.append(on[1] / off[1])
        on_s.append(on[0])
        off_s.append(off[0])
    iv, cpu_iv = median_interval(ratios, 0.9), median_interval(cpu_ratios, 0.9)
    os.environ["PROMOTE_LEDGER"] = str(tmp / "append.jsonl")
    n = 2000
    started = time.perf_counter()
    for _ in range(n):
        ledger.record("DFlash2", "served", seconds=0.01, request={"temperature": 0.0, "max_tokens": 64})
    append_s = (time.perf_counter() - started) / n
    request_s = statistics.median(off_s) / 4
    print(f"rounds {args.rounds}, arms alternating; median ledger off {statistics.median(off_s):.4f} s, "
          f"on {statistics.median(on_s):.4f} s per bench run (4 requests)")  # fmt: skip
    print(
        f"ratio on/off: median {statistics.median(ratios):.4f}, 90% interval {iv.low:.4f}-{iv.high:.4f} "
        f"(target <= {TARGET}: {'met' if iv.high <= TARGET else 'missed' if iv.low > TARGET else 'undecided'})"
    )
    print(f"CPU-time ratio on/off: median {statistics.median(cpu_ratios):.4f}, 90% interval "
          f"{cpu_iv.low:.4f}-{cpu_iv.high:.4f}")  # fmt: skip
    print(f"load average before/after: {load_before:.1f} / {os.getloadavg()[0]:.1f}")
    print(f"one append alone: {append_s * 1e6:.1f} us = {append_s / request_s:.4%} of a request's {request_s:.4f} s")
    print(f"per-round ratios: {', '.join(f'{r:.3f}' for r in ratios)}")


if __name__ == "__main__":
    main()
