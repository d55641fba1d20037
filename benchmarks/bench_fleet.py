"""A package over a fleet against one local worker, and promote's cost per test over pytest-xdist's own.

400 tests that each wait 50 ms. Three arms, run in turn each round (the order rotates) after an uncounted
warm-up of each:
- `single`: `promote test` of the package on one local worker (`workers = 1`, no stations);
- `fleet`: `promote test` of the same package with `stations = ["s1", "s2"]`, two workers on each, each station
  a real sshd on loopback (its own port, key and workdir), the commit pushed there by promote;
- `xdist`: plain `pytest --dist=load` with the same four ssh workers (`--tx 2*ssh=...//chdir=...`), on clones
  of the same commit, no promote: xdist's own cost (it also copies pytest's own package into each workdir, as
  it does for every ssh worker).

The fleet and xdist arms also run a suite twice as long (800 tests, `fleet-800`, `xdist-800`): what each
added test costs is the difference between the two sizes, so promote's cost per test over xdist's own is
((fleet-800 - fleet) - (xdist-800 - xdist)) / 400, apart from the fixed cost of a run (stations readied,
workers started, records summarized), which is (fleet - xdist) less 400 times that.

Targets: fleet/single at most 0.30 (median per-round ratio; four workers make 0.25 the limit), and promote's
cost per test over xdist's own at most 2 ms (median per-round figure).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import (
    Arm,
    BenchError,
    exclusive,
    format_table,
    machine_info,
    measure_arm,
    promote_argv,
    write_results,
)

from promote.core.stats import median_interval
from tests.helpers import sshd

TESTS = 400
WAIT_S = 0.05
RATIO_TARGET = 0.30
PER_TEST_TARGET_MS = 2.0
SUITE = """\
import time

import pytest


@pytest.mark.parametrize("i", range({tests}))
def test_waits(i):
    time.sleep({wait})
"""


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def repository(root: Path, stations: list[sshd.Sshd], tests: int = TESTS) -> Path:
    repo = root / f"repo-{tests}"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pkg" / "test_waits.py").write_text(SUITE.format(tests=tests, wait=WAIT_S))
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "suite")
    common = '[promote]\ntrunk = "main"\nmirrors = []\nmax_reruns = 0\n\n'
    (repo / "single.toml").write_text(common + '[[promote.packages]]\nname = "pkg"\npath = "pkg"\nworkers = 1\n')
    fleet = common + '[[promote.packages]]\nname = "pkg"\npath = "pkg"\nstations = ["s1", "s2"]\n\n'
    for i, server in enumerate(stations, 1):
        where = str(root / f"at-s{i}-{tests}")
        fleet += server.station_toml(f"s{i}", python=sys.executable, workdir=where, workers=2)
    (repo / "fleet.toml").write_text(fleet)
    return repo


def xdist_argv(root: Path, repo: Path, stations: list[sshd.Sshd]) -> tuple[str, ...]:
    tx = []
    for i, server in enumerate(stations, 1):
        clone = root / f"xdist-s{i}-{repo.name}"
        subprocess.run(["git", "clone", "-q", str(repo), str(clone)], check=True)
        ssh = " ".join(
            ["-o", "BatchMode=yes", "-p", str(server.port), "-i", str(server.client_key), *server.ssh_options]
        )
        tx += ["--tx", f"2*ssh={ssh} {server.destination}//python={sys.executable}//chdir={clone / 'pkg'}"]
    return (sys.executable, "-m", "pytest", "-p", "no:promote", "-p", "no:cacheprovider", "-q", "--dist=load", *tx)


def _passed(count: int) -> Any:
    def verify(stdout: str) -> None:
        if stdout.lstrip().startswith("{"):
            [pkg] = json.loads(stdout)["packages"]
            if pkg["passed"] != count:
                raise BenchError(f"{pkg['passed']} of {count} tests passed: {pkg}")
        elif f"{count} passed" not in stdout:
            raise BenchError(f"pytest did not pass {count} tests: {stdout[-500:]}")

    return verify


def arms(root: Path, repo: Path, longer: Path, stations: list[sshd.Sshd]) -> list[Arm]:
    def promote(name: str, at: Path, tests: int) -> Arm:
        argv = (*promote_argv(), "-C", str(at), "--config", str(at / f"{name.split('-')[0]}.toml"), "test", "--json")
        return Arm(name, argv, at, frozenset({0}), _passed(tests))

    def xdist(name: str, at: Path, tests: int) -> Arm:
        return Arm(name, xdist_argv(root, at, stations), at / "pkg", frozenset({0}), _passed(tests))

    return [
        promote("single", repo, TESTS), promote("fleet", repo, TESTS), xdist("xdist", repo, TESTS),
        promote("fleet-800", longer, 2 * TESTS), xdist("xdist-800", longer, 2 * TESTS),
    ]  # fmt: skip


def rotate(made: list[Arm], rounds: int, warmup: int) -> dict[str, list[float]]:
    for arm in made * warmup:
        measure_arm(arm)
    seconds: dict[str, list[float]] = {a.name: [] for a in made}
    for r in range(rounds):
        order = made[r % len(made) :] + made[: r % len(made)]
        for arm in order:
            seconds[arm.name].append(measure_arm(arm).wall_s)
        print(f"  round {r + 1}/{rounds}: " + ", ".join(f"{a.name} {seconds[a.name][-1]:.2f}s" for a in order))
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--warmup", type=int, default=1)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="promote-bench-fleet-"))
    servers: list[sshd.Sshd] = []
    try:
        with exclusive("bench_fleet"):
            servers = [sshd.start(root / f"sshd-{i}") for i in (1, 2)]
            repo, longer = repository(root, servers), repository(root, servers, 2 * TESTS)
            seconds = rotate(arms(root, repo, longer, servers), args.rounds, args.warmup)
    finally:
        for server in servers:
            sshd.stop(server)
        shutil.rmtree(root, ignore_errors=True)
    ratios = [f / s for f, s in zip(seconds["fleet"], seconds["single"], strict=True)]
    per_test = [
        ((f2 - f) - (x2 - x)) / TESTS * 1000
        for f, f2, x, x2 in zip(
            seconds["fleet"], seconds["fleet-800"], seconds["xdist"], seconds["xdist-800"], strict=True
        )
    ]
    fixed = [f - x - TESTS * c / 1000 for f, x, c in zip(seconds["fleet"], seconds["xdist"], per_test, strict=True)]
    ratio, cost = median_interval(ratios), median_interval(per_test)
    rows = [[n, f"{statistics.median(s):.2f}", f"{min(s):.2f}", f"{max(s):.2f}"] for n, s in seconds.items()]
    print(format_table(["arm", "median s", "min s", "max s"], rows))
    print()
    print(format_table(["figure", "median", "interval", "target", "verdict"], [
        ["fleet/single", f"{statistics.median(ratios):.3f}", f"{ratio.low:.3f}-{ratio.high:.3f}",
         f"{RATIO_TARGET}", ratio.verdict(RATIO_TARGET)],
        ["promote ms/test over xdist", f"{statistics.median(per_test):.2f}", f"{cost.low:.2f}-{cost.high:.2f}",
         f"{PER_TEST_TARGET_MS}", cost.verdict(PER_TEST_TARGET_MS)],
        ["promote's fixed s over xdist", f"{statistics.median(fixed):.2f}", "", "", ""],
    ]))  # fmt: skip
    data = {
        "machine": machine_info(), "seconds": seconds, "ratios": [round(r, 3) for r in ratios],
        "per_test_ms": [round(c, 2) for c in per_test], "ratio_interval": [ratio.low, ratio.high],
        "fixed_s": [round(f, 2) for f in fixed],
        "per_test_interval": [cost.low, cost.high],
        "command": f"python benchmarks/bench_fleet.py --rounds {args.rounds}",
    }  # fmt: skip
    print(f"\nresults: {write_results('bench_fleet', data)}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (BenchError, sshd.SshdUnavailable, subprocess.CalledProcessError) as e:
        print(f"bench_fleet: {e}", file=sys.stderr)
        sys.exit(1)
