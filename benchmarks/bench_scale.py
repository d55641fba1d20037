"""Benchmark whether `promote test`'s cost per test stays flat as a suite grows: promote against `pytest -n 2`.

Trivial tests (one parametrised function, so the plugin's per-test work is all there is to see), at
several sizes, in two layouts: one module, and the same tests spread over 300 modules. For each size
and layout the two arms run interleaved; the figure is the median per-round ratio promote/pytest,
with its distribution-free interval. A ratio that grows with the size is a cost in promote that grows
faster than the suite.

    python benchmarks/bench_scale.py                       # 2,000, 10,000 and 30,000 tests, 5 rounds each
    python benchmarks/bench_scale.py --sizes 2000 --rounds 1 --layouts one   # a smoke run
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any

# Run as a script (`python benchmarks/bench_scale.py`), so the helpers are imported by path.
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (
    WORK_DIR,
    Arm,
    BenchError,
    cached_fixture,
    exclusive,
    format_table,
    interleave,
    machine_info,
    promote_argv,
    pycache_env,
    write_results,
)
from bench_test import (
    PYTEST_INI,
    PromoteRuns,
    fresh_state,
    load,
    mlx_version,
    probe_costs,
    promote_under_test,
    timing_results,
    verify_pytest,
)

# Bump when the generated suites change shape, so stale caches are rebuilt, not reused.
GENERATOR_VERSION = 1
DEFAULT_SIZES = (2000, 10000, 30000)
LAYOUTS = {"one": 1, "spread": 300}  # layout name -> test modules
WORKERS = 2
TARGET_RATIO = 1.15

# A check that can fail, and nothing else: what is left to time is the runner's and plugin's per-test work.
MODULE = '''"""Generated: trivial parametrised tests."""

import pytest


@pytest.mark.parametrize("i", range({start}, {stop}))
def test_trivial(i: int) -> None:
    assert i >= 0
'''


def package_toml() -> str:
    """A promote.toml with one package, `suite`, run by two workers."""
    return (
        '[promote]\ntrunk = "main"\n\n[[promote.packages]]\nname = "suite"\n'
        f'path = "suite"\nworkers = {WORKERS}\nleaks = "restore"\n'
    )


def build(root: Path, tests: int, modules: int) -> None:
    """`tests` trivial tests over `modules` test modules in root/suite, and the promote.toml beside it."""
    suite = root / "suite"
    suite.mkdir(parents=True)
    (suite / "pytest.ini").write_text(PYTEST_INI)
    per, extra = divmod(tests, modules)
    start = 0
    for k in range(modules):
        stop = start + per + (1 if k < extra else 0)
        (suite / f"test_scale_{k:03d}.py").write_text(MODULE.format(start=start, stop=stop))
        start = stop
    (root / "promote.toml").write_text(package_toml())


def one_size(tests: int, layout: str, rounds: int, *, settle: float, fresh: bool) -> dict[str, Any]:
    """Both arms on one suite, interleaved; the figures and the load they ran under."""
    modules = LAYOUTS[layout]
    params = {"generator": GENERATOR_VERSION, "suite": "scale", "tests": tests, "modules": modules}
    root = cached_fixture(WORK_DIR / "scale", params, lambda d: build(d, tests, modules), fresh=fresh)
    fresh_state(root)
    runs = PromoteRuns(tests)
    promote = Arm(
        name="promote",
        argv=(*promote_argv(), "test", "--json"),
        cwd=root,
        ok_exit=frozenset({0}),
        verify=runs.verify,
        env=pycache_env(),
    )
    pytest = Arm(
        name="pytest",
        argv=(sys.executable, "-m", "pytest", "-n", str(WORKERS), "-q", "-p", "no:cacheprovider"),
        cwd=root / "suite",
        ok_exit=frozenset({0}),
        verify=verify_pytest(tests),
        env=pycache_env(),
    )
    load_before = load()
    print(f"bench_scale: {tests} trivial tests in {modules} module(s), {rounds} rounds, load {load_before}", flush=True)
    timings = interleave(promote, pytest, rounds, settle_s=settle, show_noise=True)
    interval = timings.ratio_interval()
    dirs, durations = runs.timed(rounds)
    # Wall time minus the package's own duration: promote's process outside its pytest processes.
    outside = [wall - inner for wall, inner in zip(timings.seconds["promote"], durations, strict=True)]
    costs = probe_costs(dirs)
    return {
        "tests": tests,
        "layout": layout,
        "modules": modules,
        "fixture": str(root),
        "arms": {promote.name: list(promote.argv), pytest.name: list(pytest.argv)},
        **timing_results(timings),
        "median_ratio_interval": {"low": interval.low, "high": interval.high, "coverage": interval.coverage},
        "verdict": interval.verdict(TARGET_RATIO),
        "wall_us_per_test": {arm: statistics.median(timings.seconds[arm]) / tests * 1e6 for arm in timings.arms},
        "promote_outside_pytest_s": outside,
        "probe_us_per_test": statistics.median(costs) if costs else None,
        "load_before": load_before,
        "load_after": load(),
    }


def row(result: dict[str, Any]) -> list[str]:
    """One line of the summary table."""
    iv = result["median_ratio_interval"]
    med = result["median_s"]
    return [
        f"{result['tests']:,}",
        f"{result['modules']}",
        str(len(result["ratios"])),
        f"{med['promote']:.2f}",
        f"{med['pytest']:.2f}",
        f"{result['median_ratio']:.3f}",
        f"{iv['low']:.3f}-{iv['high']:.3f} ({iv['coverage']:.0%})",
        f"{result['median_cpu_ratio']:.3f}",
        f"{statistics.median(result['promote_outside_pytest_s']):.2f}",
        result["verdict"],
        " ".join(f"{x:.1f}" for x in result["load_before"] or []),
    ]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--sizes", type=int, nargs="+", default=list(DEFAULT_SIZES), help="suite sizes (tests)")
    p.add_argument("--layouts", nargs="+", choices=sorted(LAYOUTS), default=list(LAYOUTS), help="module layouts")
    p.add_argument("--rounds", type=int, default=5, help="timed rounds per size and layout (default 5)")
    p.add_argument(
        "--rounds-at",
        metavar="SIZE=N",
        action="append",
        default=[],
        help="fewer (or more) rounds at one size, e.g. 30000=3 when the machine is too slow",
    )
    p.add_argument("--settle", type=float, default=0.0, help="wait up to S s for an idle machine before each run")
    p.add_argument("--fresh", action="store_true", help="regenerate the suites even if cached")
    args = p.parse_args(argv)
    if args.rounds < 1 or any(s < 1 for s in args.sizes):
        p.error("--rounds and --sizes must be at least 1")
    try:
        args.rounds_at = {int(k): int(v) for k, v in (item.split("=", 1) for item in args.rounds_at)}
    except ValueError:
        p.error("--rounds-at takes SIZE=N, e.g. 30000=3")
    return args


def main(argv: list[str] | None = None) -> int:
    """Every size and layout, smallest first; print the table and save the figures."""
    args = parse_args(argv)
    results: dict[str, Any] = {
        "benchmark": "scale",
        "command": "python benchmarks/bench_scale.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "machine": {**machine_info(), "mlx": mlx_version(), "uptime_load": load()},
        "promote": promote_under_test(),
        "target": f"median ratio promote/pytest <= {TARGET_RATIO} at every size, both layouts",
        "runs": [],
    }
    with exclusive("test"):  # the same CPUs as bench_test: one at a time
        for tests in sorted(args.sizes):
            for layout in args.layouts:
                rounds = args.rounds_at.get(tests, args.rounds)
                results["runs"].append(one_size(tests, layout, rounds, settle=args.settle, fresh=args.fresh))
                print(format_table(HEADERS, [row(results["runs"][-1])]), flush=True)
    name = "scale" if sorted(args.sizes) == list(DEFAULT_SIZES) else "scale-" + "-".join(map(str, sorted(args.sizes)))
    print()
    print(format_table(HEADERS, [row(r) for r in results["runs"]]))
    print(f"results: {write_results(name, results)}")
    return 0


HEADERS = [
    "tests",
    "modules",
    "rounds",
    "promote s",
    "pytest s",
    "ratio",
    "interval",
    "CPU ratio",
    "outside s",
    "verdict",
    "load",
]

if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except BenchError as e:
        print(f"bench_scale: error: {e}", file=sys.stderr)
        raise SystemExit(1) from None
