"""How many workers one fleet controller keeps busy: its own CPU time per test, at 2 to 16 local workers.

`promote test` of 800 tests that each wait 20 ms over a fleet of one station, `local`, with N workers (execnet
popen workers, records in xdist's channel, as on any station). The controller writes its own CPU time in the
run's fleet.json; per test, it bounds the fleet: one controller keeps about (test time + worker overhead) /
(controller CPU per test) workers busy, and beyond that the tests wait on it, not on the workers.
Sizes run in turn each round (the order rotates); the figure is the median over the rounds.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import BenchError, bench_env, exclusive, format_table, machine_info, promote_argv, write_results

TESTS = 800
WAIT_S = 0.02
SIZES = (2, 4, 8, 16)


def repository(root: Path, workers: int) -> Path:
    repo = root / f"repo-{workers}"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pkg" / "test_waits.py").write_text(
        f"import time\nimport pytest\n\n\n@pytest.mark.parametrize('i', range({TESTS}))\n"
        f"def test_waits(i):\n    time.sleep({WAIT_S})\n"
    )
    (repo / "promote.toml").write_text(
        '[promote]\ntrunk = "main"\nmirrors = []\nmax_reruns = 0\n\n'
        f'[[promote.packages]]\nname = "pkg"\npath = "pkg"\nstations = ["local"]\nworkers = {workers}\n'
    )
    for args in (
        ["init", "-q", "-b", "main"],
        ["add", "-A"],
        ["-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "s"],
    ):
        subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)
    return repo


def once(repo: Path) -> tuple[float, float]:
    """(wall s, controller CPU s) of one `promote test`."""
    started = time.perf_counter()
    done = subprocess.run([*promote_argv(), "-C", str(repo), "test", "--json"], capture_output=True, env=bench_env())
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise BenchError(f"promote test exited {done.returncode}: {done.stderr.decode()[-500:]}")
    [pkg] = json.loads(done.stdout)["packages"]
    if pkg["passed"] != TESTS:
        raise BenchError(f"{pkg['passed']} of {TESTS} passed")
    fleet = json.loads((Path(pkg["results"]) / "parallel" / "fleet.json").read_text())
    return wall, float(fleet["cpu_s"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="promote-bench-controller-"))
    runs: dict[int, list[tuple[float, float]]] = {n: [] for n in SIZES}
    try:
        with exclusive("bench_controller"):
            repos = {n: repository(root, n) for n in SIZES}
            for n in SIZES:
                once(repos[n])  # warm-up
            for r in range(args.rounds):
                order = SIZES[r % len(SIZES) :] + SIZES[: r % len(SIZES)]
                for n in order:
                    runs[n].append(once(repos[n]))
                print(
                    f"  round {r + 1}/{args.rounds}: " + ", ".join(f"{n} workers {runs[n][-1][0]:.1f}s" for n in order)
                )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    rows, data = [], {}
    for n in SIZES:
        wall = statistics.median(w for w, _ in runs[n])
        cpu_ms = statistics.median(c for _, c in runs[n]) / TESTS * 1000
        ideal = TESTS * WAIT_S / n
        rows.append([str(n), f"{wall:.1f}", f"{ideal:.1f}", f"{TESTS / wall:.0f}", f"{cpu_ms:.2f}"])
        data[n] = {"wall_s": wall, "ideal_s": ideal, "controller_cpu_ms_per_test": cpu_ms}
    print(format_table(["workers", "wall s", "sleep alone s", "tests/s", "controller CPU ms/test"], rows))
    command = f"python benchmarks/bench_controller.py --rounds {args.rounds}"
    path = write_results("bench_controller", {"machine": machine_info(), "sizes": data, "command": command})
    print(f"\nresults: {path}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (BenchError, subprocess.CalledProcessError) as e:
        print(f"bench_controller: {e}", file=sys.stderr)
        sys.exit(1)
