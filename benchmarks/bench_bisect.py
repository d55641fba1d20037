"""Benchmark `promote bisect` against detect-test-pollution on the same 200-test suite.

Both arms find which earlier test makes test 180 fail (test 37 pollutes a module-level global),
starting from nothing but the suite. Counted: pytest invocations (every pytest process the arm
starts appends a line to a counter file from the suite's conftest) and wall time, the two arms
interleaved over the rounds.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from _common import (
    WORK_DIR,
    Arm,
    BenchError,
    arm_rows,
    cached_fixture,
    format_table,
    interleave,
    machine_info,
    promote_argv,
    pycache_env,
    write_results,
)

N = 200
POLLUTER, VICTIM = 37, 180
COUNTER_CONFTEST = """
import os


def pytest_configure(config):
    # Counts pytest processes (not xdist workers: the arms run none) for the benchmark.
    path = os.environ.get("BENCH_PYTEST_COUNTER")
    if path and not hasattr(config, "workerinput"):
        with open(path, "a") as f:
            f.write("pytest\\n")
"""


def node_id(i: int) -> str:
    return f"test_{i // 20:02d}.py::test_{i:03d}"


def build(target: Path) -> None:
    """The suite (20 tests a file, collection order = numeric order) and a promote.toml beside it."""
    suite = target / "suite"
    suite.mkdir()
    (suite / "polluted.py").write_text("STATE = {}\n")
    (suite / "conftest.py").write_text(COUNTER_CONFTEST)
    # Its own rootdir for both arms: otherwise pytest would climb to promote's pyproject.toml.
    (suite / "pytest.ini").write_text("[pytest]\n")
    for f in range(N // 20):
        lines = ["import polluted", ""]
        for i in range(f * 20, f * 20 + 20):
            body = "pass"
            if i == POLLUTER:
                body = "polluted.STATE['mode'] = 'draft'"
            elif i == VICTIM:
                body = "assert polluted.STATE.get('mode') is None"
            lines += [f"def test_{i:03d}():", f"    {body}", ""]
        (suite / f"test_{f:02d}.py").write_text("\n".join(lines))
    (target / "promote.toml").write_text(
        '[promote]\ntrunk = "main"\n\n[[promote.packages]]\nname = "suite"\npath = "suite"\n'
    )


def counted(counter: Path) -> int:
    return len(counter.read_text().splitlines()) if counter.exists() else 0


def make_arms(root: Path) -> tuple[Arm, Arm, dict[str, Path]]:
    counters = {"promote": WORK_DIR / "bisect-counter-promote", "dtp": WORK_DIR / "bisect-counter-dtp"}

    def verify_promote(out: str) -> None:
        report = json.loads(out)
        if report["verdict"] != "order-dependent" or report["polluters"] != [node_id(POLLUTER)]:
            raise BenchError(f"promote bisect found {report['verdict']} {report['polluters']}")

    def verify_dtp(out: str) -> None:
        if f"the polluting test is: {node_id(POLLUTER)}" not in out:
            raise BenchError(f"detect-test-pollution did not name {node_id(POLLUTER)}:\n{out[-500:]}")

    dtp = shutil.which("detect-test-pollution", path=str(Path(sys.executable).parent)) or shutil.which(
        "detect-test-pollution"
    )
    if dtp is None:
        raise BenchError("detect-test-pollution is not installed (pip install detect-test-pollution)")
    # Reruns leave their records under .promote/; start each promote run without a stored order.
    promote = Arm(
        "promote",
        (*promote_argv(), "bisect", node_id(VICTIM), "--json"),
        root,
        frozenset({1}),
        verify_promote,
        {**pycache_env(), "BENCH_PYTEST_COUNTER": str(counters["promote"])},
    )
    other = Arm(
        "dtp",
        (dtp, "--failing-test", node_id(VICTIM), "--tests", "."),
        root / "suite",
        frozenset({0}),
        verify_dtp,
        {**pycache_env(), "BENCH_PYTEST_COUNTER": str(counters["dtp"])},
    )
    return promote, other, counters


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--rounds", type=int, default=5, help="timed rounds per arm (default 5)")
    args = p.parse_args(argv)
    root = cached_fixture(WORK_DIR / "bisect", {"n": N, "polluter": POLLUTER, "victim": VICTIM, "v": 2}, build)
    promote, dtp, counters = make_arms(root)
    for c in counters.values():
        c.unlink(missing_ok=True)
    print(f"bench_bisect: {args.rounds} rounds, arms interleaved, 1 warm-up each", flush=True)
    timings = interleave(promote, dtp, args.rounds)
    runs = args.rounds + 1  # the warm-up counts too
    invocations = {name: counted(path) / runs for name, path in counters.items()}
    print()
    print(format_table(["arm", "median s", "min s", "max s"], arm_rows(timings)))
    print()
    ratio = timings.median_ratio()
    print(f"pytest invocations per bisection: promote {invocations['promote']:g}, dtp {invocations['dtp']:g}")
    print(f"per-round ratio promote/dtp: {', '.join(f'{r:.3f}' for r in timings.ratios())}")
    met = ratio <= 1.0 and invocations["promote"] <= invocations["dtp"]
    print(
        f"median ratio promote/dtp: {ratio:.3f} (target <= 1.0 and no more invocations: {'MET' if met else 'MISSED'})"
    )
    data: dict[str, Any] = {
        "benchmark": "bisect",
        "command": "python benchmarks/bench_bisect.py",
        "machine": machine_info(),
        "suite": {"tests": N, "polluter": node_id(POLLUTER), "victim": node_id(VICTIM)},
        "seconds": timings.seconds,
        "first": timings.first,
        "median_s": {n: timings.median(n) for n in timings.arms},
        "ratios": timings.ratios(),
        "median_ratio": ratio,
        "median_cpu_ratio": statistics.median(timings.cpu_ratios()),
        "invocations": invocations,
        "target_met": met,
    }
    print(f"results: {write_results('bisect', data)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
