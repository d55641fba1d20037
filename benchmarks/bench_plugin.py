"""Benchmark the pytest plugin's CPU cost per test: plain pytest, the plugin of another tree, this tree's plugin.

One pytest process (no xdist) on one module of trivial parametrised tests, so the plugin's per-test
work is all there is to see. The plugin arms start pytest with the command promote builds for a
package (promote.runners.package.command, workers = 1); the arm of another tree (e.g. a worktree of
main) runs the same command with that tree first on PYTHONPATH. The arms rotate (each round starts
with the next one), after one uncounted warm-up each. Two figures per run, both CPU time, which the
other load on a shared machine moves far less than wall time:

- in the loop: the process's own CPU from the first test's start to the last test's finish
  (benchmarks/tick_plugin.py), per test: the cost of the hooks, probes, records and progress lines;
- the whole process (RUSAGE_CHILDREN), per test: start-up, MLX's import and the results file included.

    python benchmarks/bench_plugin.py --base /tmp/t27main      # plain, the plugin at /tmp/t27main, this one
    python benchmarks/bench_plugin.py --tests 1000 --rounds 1  # a smoke run: plain and this tree
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Run as a script (`python benchmarks/bench_plugin.py`), so the helpers are imported by path.
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (
    BENCH_DIR,
    REPO_ROOT,
    WORK_DIR,
    Arm,
    BenchError,
    bench_env,
    cached_fixture,
    exclusive,
    format_table,
    machine_info,
    measure_arm,
    pycache_env,
    write_results,
)
from bench_test import PYTEST_INI, load, mlx_version, verify_pytest

from promote.config import PackageConfig
from promote.core.policies import LEAK_POLICIES, REPORT
from promote.core.stats import median_interval
from promote.runners.package import command
from promote.runners.plugin.records import read_results

GENERATOR_VERSION = 1
MODULE = '''"""Generated: trivial parametrised tests."""

import pytest


@pytest.mark.parametrize("i", range({tests}))
def test_trivial(i: int) -> None:
    assert i >= 0
'''
PLAIN = "plain pytest"


@dataclass(frozen=True)
class Run:
    """One run of an arm: CPU seconds of the whole process and of its test loop, and its wall time."""

    cpu_s: float
    loop_cpu_s: float
    wall_s: float


def build(root: Path, tests: int) -> None:
    suite = root / "suite"
    suite.mkdir()
    (suite / "pytest.ini").write_text(PYTEST_INI)
    (suite / "test_plugin_000.py").write_text(MODULE.format(tests=tests))


def tree_env(tree: Path | None) -> dict[str, str]:
    """The environment of an arm: `tree`'s promote (None: no plugin's) first on the path, and the tick plugin."""
    paths = [str(tree)] if tree is not None else []
    return {**pycache_env(), "PYTHONPATH": ":".join([*paths, str(BENCH_DIR)]), "PROMOTE_PACKAGE_ENV_NAMES": ""}


def check_tree(name: str, tree: Path, suite: Path) -> None:
    """Fail unless the arm's pytest would import the plugin from `tree` (not from the installed promote)."""
    code = "import promote.runners.plugin.hooks as h; print(h.__file__)"
    env = {**bench_env(), **tree_env(tree)}
    out = subprocess.run([sys.executable, "-c", code], cwd=suite, env=env, capture_output=True, text=True, check=False)
    found = Path(out.stdout.strip() or "?").resolve()
    if not found.is_relative_to(tree.resolve()):
        raise BenchError(f"arm {name!r} imports the plugin from {found}, not from {tree}: {out.stderr.strip()}")


def arms(suite: Path, out: Path, tests: int, leaks: str, base: Path | None) -> list[Arm]:
    """Plain pytest, the plugin of `base` (when given), and this tree's plugin, each verified by its summary."""
    tick = ("-p", "no:xdist", "-p", "tick_plugin")
    plain = (sys.executable, "-m", "pytest", "-p", "no:promote", "-p", "no:cacheprovider", "-q", *tick)
    pkg = PackageConfig("bench", suite)
    plugin = command(pkg, out, python=sys.executable, leaks=leaks, part="all", workers=1, xdist=False, extra=tick)
    trees = {PLAIN: None, **({f"plugin at {base}": base} if base is not None else {}), "plugin now": REPO_ROOT}
    for name, tree in trees.items():
        if tree is not None:
            check_tree(name, tree, suite)
    return [
        Arm(
            name=name,
            argv=plain if tree is None else tuple(plugin),
            cwd=suite,
            ok_exit=frozenset({0}),
            verify=verify_pytest(tests),
            env={**tree_env(tree), "TICKS": str(out / "ticks.txt"), "TICK_EVERY": str(tests)},
        )
        for name, tree in trees.items()
    ]


def run_once(arm: Arm, out: Path, tests: int) -> Run:
    """Run `arm` on a fresh output directory; check that a plugin arm recorded every test as passed."""
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    m = measure_arm(arm)
    marks = dict(line.split() for line in (out / "ticks.txt").read_text().splitlines())
    if "0" not in marks or str(tests) not in marks:
        raise BenchError(f"arm {arm.name!r}: the tick plugin saw no first or no last test: {sorted(marks)}")
    if arm.name != PLAIN:
        results = read_results(out / "results-main.json")
        passed = sum(1 for t in results.tests if t.outcome == "passed")
        if passed != tests or len(results.tests) != tests:
            raise BenchError(f"arm {arm.name!r} recorded {passed} passed of {len(results.tests)}, not {tests}")
    return Run(m.cpu_s, float(marks[str(tests)]) - float(marks["0"]), m.wall_s)


def rounds_of(all_arms: list[Arm], out: Path, tests: int, rounds: int) -> dict[str, list[Run]]:
    """One warm-up per arm, then `rounds` rounds, each starting with the next arm."""
    for arm in all_arms:
        run_once(arm, out, tests)
    runs: dict[str, list[Run]] = {arm.name: [] for arm in all_arms}
    for i in range(rounds):
        order = all_arms[i % len(all_arms) :] + all_arms[: i % len(all_arms)]
        for arm in order:
            runs[arm.name].append(run_once(arm, out, tests))
        shown = ", ".join(f"{a.name} {runs[a.name][-1].loop_cpu_s / tests * 1e6:.1f}" for a in order)
        print(f"  round {i + 1}/{rounds} (loop CPU us per test): {shown}", flush=True)
    return runs


def figures(runs: dict[str, list[Run]], tests: int) -> dict[str, Any]:
    """Per arm: median µs per test (loop and whole); per pair of arms: the median per-round ratio and its interval."""
    per_arm = {
        name: {
            "loop_cpu_us_per_test": statistics.median(r.loop_cpu_s for r in rs) / tests * 1e6,
            "cpu_us_per_test": statistics.median(r.cpu_s for r in rs) / tests * 1e6,
            "wall_s": statistics.median(r.wall_s for r in rs),
            "runs": [vars(r) for r in rs],
        }
        for name, rs in runs.items()
    }
    names = list(runs)
    pairs = [(a, b) for i, a in enumerate(names) for b in names[:i]]
    ratios = {}
    for a, b in pairs:
        for what in ("loop_cpu_s", "cpu_s"):
            values = [getattr(x, what) / getattr(y, what) for x, y in zip(runs[a], runs[b], strict=True)]
            iv = median_interval(values)
            ratios[f"{a} / {b} ({what})"] = {
                "median": statistics.median(values),
                "interval": [iv.low, iv.high, iv.coverage],
                "per_round": values,
            }
    return {"arms": per_arm, "ratios": ratios}


def tables(result: dict[str, Any]) -> str:
    arm_rows = [
        [name, f"{a['loop_cpu_us_per_test']:.1f}", f"{a['cpu_us_per_test']:.1f}", f"{a['wall_s']:.2f}"]
        for name, a in result["arms"].items()
    ]
    ratio_rows = [
        [name, f"{r['median']:.3f}", f"{r['interval'][0]:.3f}-{r['interval'][1]:.3f} ({r['interval'][2]:.0%})"]
        for name, r in result["ratios"].items()
    ]
    return "\n\n".join(
        [
            format_table(["arm", "loop CPU µs/test", "whole CPU µs/test", "wall s"], arm_rows),
            format_table(["ratio", "median", "interval"], ratio_rows),
        ]
    )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--tests", type=int, default=5000, help="trivial tests in the module (default 5000)")
    p.add_argument("--rounds", type=int, default=5, help="timed rounds (default 5)")
    p.add_argument("--leaks", choices=LEAK_POLICIES, default=REPORT, help="the plugin's leak policy (default report)")
    p.add_argument("--base", type=Path, default=None, help="a tree whose plugin is the third arm (e.g. main's)")
    args = p.parse_args(argv)
    if args.rounds < 1 or args.tests < 1:
        p.error("--rounds and --tests must be at least 1")
    if args.base is not None and not (args.base / "promote" / "runners" / "plugin" / "hooks.py").is_file():
        p.error(f"--base {args.base}: no promote/runners/plugin/hooks.py there")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    root = cached_fixture(
        WORK_DIR / "plugin", {"generator": GENERATOR_VERSION, "tests": args.tests}, lambda d: build(d, args.tests)
    )
    out = root / "out"
    all_arms = arms(root / "suite", out, args.tests, args.leaks, args.base)
    commit = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=REPO_ROOT, capture_output=True, text=True)
    results: dict[str, Any] = {
        "benchmark": "plugin",
        "command": "python benchmarks/bench_plugin.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "machine": {**machine_info(), "mlx": mlx_version()},
        "checkout": commit.stdout.strip() or None,
        "tests": args.tests,
        "leaks": args.leaks,
        "argv": {arm.name: list(arm.argv) for arm in all_arms},
        "load_before": load(),
    }
    print(f"bench_plugin: {args.tests} trivial tests, {args.rounds} rounds, load {results['load_before']}", flush=True)
    with exclusive("test"):  # the same CPUs as bench_test and bench_scale: one at a time
        runs = rounds_of(all_arms, out, args.tests, args.rounds)
    results.update(figures(runs, args.tests), load_after=load())
    print()
    print(tables(results))
    print(f"results: {write_results('plugin', results)}")
    return 0


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except BenchError as e:
        print(f"bench_plugin: error: {e}", file=sys.stderr)
        raise SystemExit(1) from None
