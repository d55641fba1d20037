"""Benchmark the CI audit on the real workflows of tests/checks/workflows: wall time per workflow, tools installed.

Each case is laid out once (its workflow, the files it names, one small test module per test id of its record),
then audited `--rounds` times, round-robin over the cases, so a burst of load touches every case alike. Asking
tox, hatch and make is part of the audit, so the figures include it; a tool missing beside promote makes its
jobs unread, and is said first, not timed around.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

# Run as a script (`python benchmarks/bench_ci_corpus.py`), so the helpers are imported by path.
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import REPO_ROOT, WORK_DIR, BenchError, format_table, machine_info, write_results

from promote.checks.ci.tools import installed
from tests.helpers.workflow_cases import CASES, audit, lay_out, read

# The goal the issue sets for one workflow's audit on this machine, tools installed.
GOAL_S = 2.0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--rounds", type=int, default=5, help="audits of each workflow (default 5)")
    p.add_argument("--quick", action="store_true", help="one round: a smoke run, not figures to record")
    p.add_argument("--only", nargs="*", default=None, help="case names (file stems) to run, default all")
    return p.parse_args(argv)


def lay_out_all(names: list[str] | None) -> list[tuple[str, dict[str, Any], Path, Any]]:
    """Every case, laid out afresh under benchmarks/.work/ci_corpus (name, case, root, config)."""
    base = WORK_DIR / "ci_corpus"
    subprocess.run(["rm", "-rf", str(base)], check=True)
    out = []
    for path in CASES:
        if names is not None and path.stem not in names:
            continue
        case = read(path)
        root = base / path.stem
        root.mkdir(parents=True)
        out.append((path.stem, case, root, lay_out(root, case)))
    if not out:
        raise BenchError(f"no case named {names} in {CASES[0].parent if CASES else 'tests/checks/workflows'}")
    return out


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    rounds = 1 if args.quick else args.rounds
    missing = [tool for tool in ("tox", "hatch", "make") if installed(tool) is None]
    if missing:
        raise BenchError(f"not installed beside promote: {', '.join(missing)} (their jobs would be unread, not timed)")
    cases = lay_out_all(args.only)
    print(f"bench_ci_corpus: {len(cases)} workflows, {rounds} round(s)", flush=True)
    times: dict[str, list[float]] = {name: [] for name, *_ in cases}
    for _ in range(rounds):
        for name, case, root, cfg in cases:
            start = time.perf_counter()
            audit(root, case, cfg)
            times[name].append(time.perf_counter() - start)
    per_case = {name: statistics.median(ts) for name, ts in times.items()}
    slowest = max(per_case, key=lambda n: per_case[n])
    commit = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=REPO_ROOT, capture_output=True, text=True)
    results = {
        "benchmark": "ci_corpus",
        "command": "python benchmarks/bench_ci_corpus.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "machine": machine_info(),
        "checkout": commit.stdout.strip() or None,
        "rounds": rounds,
        "per_workflow_s": per_case,
        "median_s": statistics.median(per_case.values()),
        "max_s": per_case[slowest],
        "slowest": slowest,
        "goal_s": GOAL_S,
    }
    rows = [[n, f"{t:.3f}", f"{max(times[n]):.3f}"] for n, t in sorted(per_case.items(), key=lambda x: -x[1])]
    print(format_table(["workflow", "median s", "max s"], rows))
    over = [n for n, t in per_case.items() if t > GOAL_S]
    print(
        f"\nper workflow: median {results['median_s']:.3f} s, max {results['max_s']:.3f} s ({slowest}); "
        f"{len(over)} over the {GOAL_S:g} s goal{': ' + ', '.join(over) if over else ''}"
    )
    if args.quick:
        print("(--quick: one round, not figures to record)")
    print(f"results: {write_results('ci_corpus', results)}")
    return 0


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except BenchError as e:
        print(f"bench_ci_corpus: error: {e}", file=sys.stderr)
        raise SystemExit(1) from None
