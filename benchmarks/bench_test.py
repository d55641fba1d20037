"""Benchmark `promote test` against plain `pytest -n 2` (the plugin's cost), and serial against parallel promote."""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Run as a script (`python benchmarks/bench_test.py`), so the helpers are imported by path.
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (
    BENCH_DIR,
    REPO_ROOT,
    WORK_DIR,
    Arm,
    BenchError,
    Timings,
    arm_rows,
    bench_env,
    cached_fixture,
    exclusive,
    format_table,
    interleave,
    machine_info,
    promote_argv,
    pycache_env,
    write_results,
)

# Bump when the generated suites change shape, so stale caches are rebuilt, not reused.
GENERATOR_VERSION = 1
DEFAULT_TESTS = 2000
QUICK_FILES = 20
DEFAULT_CPU_TESTS = 24
# One 512x512 matmul is ~50 ms on one core of the reference VM: 6 of them make a ~0.3 s test.
CPU_SIZE = 512
CPU_REPS = 6
WORKERS = 2
TARGET_RATIO = 1.10
# A run during which other processes used under this share of the machine's CPUs counts as quiet.
QUIET = 0.05

# A config file of its own in each suite: pytest stops looking here, so the settings of
# whatever project encloses benchmarks/.work/ (this repository's pyproject.toml) reach neither arm.
PYTEST_INI = "[pytest]\n"

QUICK_HEADER = '"""Generated: quick tests, each evaluating a small MLX computation."""\n\nimport mlx.core as mx\n'
# Softmax rows sum to 1, so the sum is 8 whatever the offset: a real answer to check, cheaply.
QUICK_TEST = """

def test_{i:04d}() -> None:
    with mx.stream(mx.cpu):
        x = mx.arange(64, dtype=mx.float32).reshape(8, 8) / 64 + {offset}
        y = mx.softmax(x @ x.T, axis=-1).sum()
        mx.eval(y)
    assert abs(y.item() - 8.0) < 1e-3
"""

CPU_HEADER = '"""Generated: CPU-bound tests, each a chain of MLX matmuls on the CPU."""\n\nimport mlx.core as mx\n'
# An explicit key leaves MLX's global random state alone: the tests leak nothing.
CPU_TEST = """

def test_{i:03d}() -> None:
    n = {size}
    with mx.stream(mx.cpu):
        a = mx.random.normal((n, n), key=mx.random.key({i}))
        for _ in range({reps}):
            a = mx.tanh(a @ a / n**0.5)
            mx.eval(a)
        bounded = mx.all(mx.abs(a) <= 1).item()
    assert a.shape == (n, n) and bounded
"""

SUMMARY = re.compile(r"^=*\s*(?P<counts>\d+ \w+(?:, \d+ \w+)*) in [\d.]+s\b.*$")


def package_toml(path: str, workers: int) -> str:
    """A promote.toml with one package, `suite`, at `path` (relative to the file)."""
    return (
        '[promote]\ntrunk = "main"\n\n[[promote.packages]]\nname = "suite"\n'
        f'path = "{path}"\nworkers = {workers}\nleaks = "restore"\n'
    )


def write_suite(suite: Path, header: str, tests: list[str], files: int) -> None:
    """Spread `tests` (function sources) over `files` test modules in `suite`."""
    suite.mkdir(parents=True)
    (suite / "pytest.ini").write_text(PYTEST_INI)
    per_file, extra = divmod(len(tests), files)
    start = 0
    for k in range(files):
        count = per_file + (1 if k < extra else 0)
        (suite / f"test_gen_{k:02d}.py").write_text(header + "".join(tests[start : start + count]))
        start += count


def build_quick(root: Path, tests: int) -> None:
    """The per-test-overhead suite: `tests` quick tests over QUICK_FILES modules, and its promote.toml."""
    sources = [QUICK_TEST.format(i=i, offset=i % 7) for i in range(tests)]
    write_suite(root / "suite", QUICK_HEADER, sources, min(QUICK_FILES, tests))
    (root / "promote.toml").write_text(package_toml("suite", WORKERS))


def build_cpu(root: Path, tests: int) -> None:
    """The CPU-bound suite, with one promote.toml per worker count (w1/ and w2/) pointing at it."""
    sources = [CPU_TEST.format(i=i, size=CPU_SIZE, reps=CPU_REPS) for i in range(tests)]
    write_suite(root / "suite", CPU_HEADER, sources, max(1, tests // 4))
    for workers in (1, WORKERS):
        conf = root / f"w{workers}"
        conf.mkdir()
        (conf / "promote.toml").write_text(package_toml("../suite", workers))


@dataclass
class PromoteRuns:
    """What each verified `promote test --json` run reported, in the order the runs happened."""

    expected: int
    results_dirs: list[Path] = field(default_factory=list)
    durations_s: list[float] = field(default_factory=list)  # the package's own duration (its pytest processes)

    def verify(self, stdout: str) -> None:
        """Fail unless promote ran every test of the one package and all of them passed."""
        try:
            report: dict[str, Any] = json.loads(stdout)
            (pkg,) = report["packages"]
            counts = {k: pkg[k] for k in ("passed", "failed", "errors", "skipped", "crashed", "xpassed", "xfailed")}
            errors = [f for f in report["findings"] if f.get("severity") == "error"]
            results, duration = Path(pkg["results"]), float(pkg["duration_s"])
        except (ValueError, KeyError, TypeError) as e:
            raise BenchError(f"promote test --json gave unusable output ({e!r}):\n{stdout[:2000]}") from e
        want = {"passed": self.expected, **dict.fromkeys(("failed", "errors", "skipped", "crashed"), 0)}
        want |= {"xpassed": 0, "xfailed": 0}
        if counts != want or errors:
            raise BenchError(f"promote test did not pass all {self.expected} tests: {counts}, findings {errors}")
        self.results_dirs.append(results)
        self.durations_s.append(duration)

    def timed(self, rounds: int) -> tuple[list[Path], list[float]]:
        """The timed runs only: the warm-up came first."""
        return self.results_dirs[-rounds:], self.durations_s[-rounds:]


def verify_pytest(expected: int) -> Callable[[str], None]:
    """A check that plain pytest's summary line says exactly `expected` passed and nothing else went wrong."""

    def verify(stdout: str) -> None:
        lines = [ln.strip() for ln in stdout.splitlines() if ln.strip()]
        m = SUMMARY.match(lines[-1]) if lines else None
        if m is None:
            raise BenchError(f"pytest printed no summary line:\n{stdout[-2000:]}")
        counts = {word: int(n) for n, word in (part.split(" ", 1) for part in m["counts"].split(", "))}
        # Warnings (e.g. from other installed plugins) do not make a run wrong; anything else does.
        counts.pop("warning", None)
        counts.pop("warnings", None)
        if counts != {"passed": expected}:
            raise BenchError(f"plain pytest did not pass all {expected} tests: {lines[-1]}")

    return verify


def probe_costs(results_dirs: list[Path]) -> list[float]:
    """`probe_us_per_test` from every results file of these runs that ran tests."""
    costs = []
    for run in results_dirs:
        for path in sorted(run.glob("*/results-*.json")):
            value = json.loads(path.read_text()).get("probe_us_per_test")
            # The serial part of a suite with no serial tests runs nothing: it has no figure.
            if value is not None:
                costs.append(float(value))
    return costs


def fresh_state(*dirs: Path) -> None:
    """Forget earlier benchmark runs' stored results, so every run starts as in a clean project."""
    for d in dirs:
        shutil.rmtree(d / ".promote", ignore_errors=True)


def describe(timings: Timings, numerator: str) -> None:
    """Print per-arm wall and CPU times and the per-round ratios of `numerator` over the other arm."""
    other = next(a for a in timings.arms if a != numerator)
    rows = []
    for row in arm_rows(timings):
        name = row[0]
        cpu = statistics.median(timings.cpu_seconds[name])
        rows.append([*row, f"{cpu:.3f}", _median_text(timings.others_cpu_seconds[name])])
    print()
    print(format_table(["arm", "median s", "min s", "max s", "median CPU s", "others' CPU s"], rows))
    print()
    print(f"per-round ratio {numerator}/{other}: " + ", ".join(f"{r:.3f}" for r in timings.ratios()))
    print(f"per-round CPU-time ratio {numerator}/{other}: " + ", ".join(f"{r:.3f}" for r in timings.cpu_ratios()))
    clean = quiet_rounds(timings)
    found = "none"
    if clean:
        found = f"{len(clean)}, median ratio {statistics.median(timings.ratios()[i] for i in clean):.3f}"
    print(f"quiet rounds (others under {QUIET:.0%} of the CPUs in both runs): {found}")
    if 2 * len(clean) <= len(timings.first):
        # The median then rests on rounds where another job's burst landed on one arm: it can say anything.
        print("WARNING: most rounds were not quiet; the median ratio may say more about the other load than the arms")


def _median_text(values: list[float | None]) -> str:
    known = [v for v in values if v is not None]
    return f"{statistics.median(known):.3f}" if known else "?"


def quiet_rounds(timings: Timings) -> list[int]:
    """Indexes of the rounds in which other processes used under QUIET of the machine during both runs."""
    cpus = os.cpu_count() or 1
    quiet = []
    for i in range(len(timings.first)):
        shares = []
        for arm in timings.arms:
            others = timings.others_cpu_seconds[arm][i]
            shares.append(None if others is None else others / (timings.seconds[arm][i] * cpus))
        if all(share is not None and share < QUIET for share in shares):
            quiet.append(i)
    return quiet


def timing_results(timings: Timings) -> dict[str, Any]:
    """The figures of one interleaved comparison, for the results JSON."""
    quiet = quiet_rounds(timings)
    return {
        "first": timings.first,
        "seconds": timings.seconds,
        "cpu_seconds": timings.cpu_seconds,
        # CPU the rest of the machine used during each run: a round where this is large is noise.
        "others_cpu_seconds": timings.others_cpu_seconds,
        "median_s": {name: timings.median(name) for name in timings.arms},
        "median_cpu_s": {name: statistics.median(timings.cpu_seconds[name]) for name in timings.arms},
        "ratios": timings.ratios(),
        "median_ratio": timings.median_ratio(),
        "cpu_ratios": timings.cpu_ratios(),
        "median_cpu_ratio": statistics.median(timings.cpu_ratios()),
        "quiet_rounds": quiet,
        "mostly_quiet": 2 * len(quiet) > len(timings.first),
    }


def load() -> list[float] | None:
    """The 1, 5 and 15 minute load averages: other work on the machine shows here."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (AttributeError, OSError):
        return None


def overhead_bench(args: argparse.Namespace) -> dict[str, Any]:
    """`promote test` (workers = 2) against plain `pytest -n 2` on the quick suite."""
    params = {"generator": GENERATOR_VERSION, "suite": "quick", "tests": args.tests, "files": QUICK_FILES}
    root = cached_fixture(WORK_DIR / "test", params, lambda d: build_quick(d, args.tests), fresh=args.fresh)
    fresh_state(root)
    runs = PromoteRuns(args.tests)
    promote = Arm(
        name="promote",
        argv=(*promote_argv(), "test", "--json"),
        cwd=root,
        ok_exit=frozenset({0}),  # all green is the only success
        verify=runs.verify,
        env=pycache_env(),
    )
    # Plain pytest as a user runs it. promote's pytest11 entry point loads here too, but without
    # --promote-out it only registers its options and markers: that is the plain baseline.
    pytest = Arm(
        name="pytest",
        argv=(sys.executable, "-m", "pytest", "-n", str(WORKERS), "-q", "-p", "no:cacheprovider"),
        cwd=root / "suite",
        ok_exit=frozenset({0}),
        verify=verify_pytest(args.tests),
        env=pycache_env(),
    )
    print(f"bench_test overhead: {args.tests} quick MLX tests, workers = {WORKERS}, {args.rounds} rounds", flush=True)
    timings = interleave(promote, pytest, args.rounds, settle_s=args.settle, show_noise=True)
    ratio = timings.median_ratio()
    dirs, durations = runs.timed(args.rounds)
    costs = probe_costs(dirs)
    probe_us = round(statistics.median(costs), 1) if costs else None
    # Wall time minus the package's own duration: promote's start-up, config and aggregation.
    outside = [wall - inner for wall, inner in zip(timings.seconds["promote"], durations, strict=True)]
    describe(timings, "promote")
    interval = timings.ratio_interval()
    verdict = interval.verdict(TARGET_RATIO)
    side = "under" if ratio <= TARGET_RATIO else "over"
    print(
        f"median ratio promote/pytest: {ratio:.3f} ({side} the target {TARGET_RATIO:.2f}; the median lies in "
        f"{interval.low:.3f}-{interval.high:.3f} with {interval.coverage:.1%} confidence: {verdict})"
    )
    print(f"median CPU-time ratio promote/pytest: {statistics.median(timings.cpu_ratios()):.3f}")
    print(f"probe cost: median {probe_us} us per test over {len(costs)} results files")
    print(f"promote outside its pytest processes: median {statistics.median(outside):.3f} s per run")
    return {
        "fixture": {**params, "path": str(root)},
        "arms": {promote.name: list(promote.argv), pytest.name: list(pytest.argv)},
        **timing_results(timings),
        "target": f"median ratio promote/pytest <= {TARGET_RATIO}",
        "target_met": ratio <= TARGET_RATIO,
        # Whether these rounds decide it: met / missed only when the whole interval is on one side.
        "median_ratio_interval": {"low": interval.low, "high": interval.high, "coverage": interval.coverage},
        "verdict": verdict,
        "probe_us_per_test": {"median": probe_us, "all": costs},
        "promote_package_duration_s": durations,
        "promote_outside_pytest_s": outside,
    }


def parallel_bench(args: argparse.Namespace) -> dict[str, Any]:
    """`promote test` with workers = 1 against workers = 2 on the CPU-bound suite."""
    params = {
        "generator": GENERATOR_VERSION,
        "suite": "cpu",
        "tests": args.cpu_tests,
        "size": CPU_SIZE,
        "reps": CPU_REPS,
    }
    root = cached_fixture(WORK_DIR / "test", params, lambda d: build_cpu(d, args.cpu_tests), fresh=args.fresh)
    fresh_state(root / "w1", root / f"w{WORKERS}")
    arms = []
    for name, workers in (("serial", 1), ("parallel", WORKERS)):
        runs = PromoteRuns(args.cpu_tests)
        arms.append(
            Arm(
                name=name,
                argv=(*promote_argv(), "test", "--json"),
                cwd=root / f"w{workers}",
                ok_exit=frozenset({0}),
                verify=runs.verify,
                env=pycache_env(),
            )
        )
    serial, parallel = arms
    print(
        f"bench_test parallel: {args.cpu_tests} CPU-bound MLX tests ({CPU_REPS} matmuls of {CPU_SIZE}x{CPU_SIZE}), "
        f"workers = 1 vs {WORKERS}, {args.rounds} rounds",
        flush=True,
    )
    timings = interleave(serial, parallel, args.rounds, settle_s=args.settle, show_noise=True)
    ratio = timings.median_ratio()
    describe(timings, "serial")
    print(f"median ratio serial/parallel: {ratio:.3f} (ideal on {WORKERS} free cores: {WORKERS})")
    return {
        "fixture": {**params, "path": str(root)},
        "arms": {serial.name: list(serial.argv), parallel.name: list(parallel.argv)},
        "cwd": {serial.name: str(serial.cwd), parallel.name: str(parallel.cwd)},
        **timing_results(timings),
    }


def mlx_version() -> str | None:
    """The installed MLX, read from its metadata (importing it would cost a second)."""
    try:
        return importlib.metadata.version("mlx")
    except importlib.metadata.PackageNotFoundError:
        return None


def promote_under_test() -> dict[str, Any]:
    """Which promote the arms ran: where its package is imported from, and this checkout's commit."""
    found = subprocess.run(
        [sys.executable, "-c", "import promote; print(promote.__file__)"],
        cwd=BENCH_DIR,  # as in the arms: not the checkout, whose promote/ would shadow PYTHONPATH
        capture_output=True,
        text=True,
        env=bench_env(),
        check=False,
    )
    commit = subprocess.run(
        ["git", "describe", "--always", "--dirty"], cwd=REPO_ROOT, capture_output=True, text=True, check=False
    )
    return {"module": found.stdout.strip() or None, "checkout": commit.stdout.strip() or None}


def results_name(args: argparse.Namespace) -> str:
    """`test` for the headline run; other sizes get their own file rather than overwrite it."""
    name = "test"
    if args.tests != DEFAULT_TESTS:
        name += f"-tests{args.tests}"
    if args.cpu_tests != DEFAULT_CPU_TESTS:
        name += f"-cpu{args.cpu_tests}"
    if args.rounds != 5:
        name += f"-rounds{args.rounds}"
    return name


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--rounds", type=int, default=5, help="timed rounds per arm (default 5)")
    p.add_argument(
        "--tests", type=int, default=DEFAULT_TESTS, help=f"quick tests in the overhead suite (default {DEFAULT_TESTS})"
    )
    p.add_argument(
        "--cpu-tests",
        type=int,
        default=DEFAULT_CPU_TESTS,
        help=f"tests in the CPU-bound suite, ~0.3 s each (default {DEFAULT_CPU_TESTS}; 0 skips that benchmark)",
    )
    p.add_argument(
        "--settle",
        type=float,
        default=60.0,
        help="before each timed run, wait up to S seconds for the machine to go idle (default 60; 0: never wait)",
    )
    p.add_argument("--fresh", action="store_true", help="regenerate the suites even if cached")
    args = p.parse_args(argv)
    if args.rounds < 1:
        p.error("--rounds must be at least 1")
    if args.tests < 1:
        p.error("--tests must be at least 1")
    if args.settle < 0:
        p.error("--settle must not be negative")
    if args.cpu_tests < 0:
        p.error("--cpu-tests must not be negative")
    return args


def main(argv: list[str] | None = None) -> int:
    """Generate (or reuse) the suites, time each pair of arms interleaved, print and save the figures."""
    args = parse_args(argv)
    with exclusive("test"):
        results = run_benchmarks(args, argv)
    print(f"results: {write_results(results_name(args), results)}")
    return 0


def run_benchmarks(args: argparse.Namespace, argv: list[str] | None) -> dict[str, Any]:
    """Both benchmarks, one after the other, and everything the results file records."""
    results: dict[str, Any] = {
        "benchmark": "test",
        "command": "python benchmarks/bench_test.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "machine": {**machine_info(), "mlx": mlx_version()},
        "promote": promote_under_test(),
        "rounds": args.rounds,
        "settle_s": args.settle,
        "load_before": load(),
        "overhead": overhead_bench(args),
    }
    if args.cpu_tests:
        print()
        results["parallel"] = parallel_bench(args)
    results["load_after"] = load()
    return results


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except BenchError as e:
        print(f"bench_test: error: {e}", file=sys.stderr)
        raise SystemExit(1) from None
