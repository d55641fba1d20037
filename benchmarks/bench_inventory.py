"""`promote audit` on mlx-lm's snapshot with and without the repository's test inventory, arms interleaved.

Arms, alternated each round (which goes first swaps) after an uncounted warm-up of each:
- `inventory`: `promote audit` as shipped: every test root collected (`pytest --collect-only`) beside the
  package's own run, the CI audit and the Tested gate judged against the whole repository;
- `without`: the same audit with PROMOTE_INVENTORY=0, which collects no root (the audit as it was before).

Both arms' configurations sit at the snapshot's top, untracked (an audit needs its configuration inside the
repository, where it keeps its history and reads its merges). The package runs as bench_mlxlm.py's does
(`workers = 2`, offline, no Hugging Face cache); `max_reruns = 0` by default, so the audit is as short as it
gets and the inventory's share as large: `--max-reruns 50` times the default audit.

Target: inventory/without within 1.10 (median per-round ratio). The snapshot lives in shared/corpora beside this
repository; nothing is downloaded.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (
    Arm,
    BenchError,
    arm_rows,
    exclusive,
    format_table,
    interleave,
    machine_info,
    promote_argv,
    write_results,
)
from bench_mlxlm import unpack

TARGET = 1.10
CORPUS_DIR = Path(tempfile.gettempdir()) / "promote-bench-inventory"
CONFIG = """\
[promote]
trunk = "main"
mirrors = []
max_reruns = {max_reruns}

[[promote.packages]]
name = "mlx-lm"
path = "."
workers = 2
env = {{ HF_HUB_OFFLINE = "1", HF_HOME = "{hf_home}" }}
"""


def _verify(inventory: bool) -> Any:
    def verify(stdout: str) -> None:
        report = json.loads(stdout)
        found = report.get("inventory")
        if inventory and (found is None or found["total"] < 50):
            raise BenchError(f"the audit collected too little of mlx-lm to time: {found}")
        if not inventory and found is not None:
            raise BenchError("PROMOTE_INVENTORY=0 still collected test roots")

    return verify


def arms(repo: Path, hf_home: Path, max_reruns: int) -> tuple[Arm, Arm]:
    made = []
    for name, switch in (("inventory", "1"), ("without", "0")):
        conf = repo / f"promote-{name}.toml"
        conf.write_text(CONFIG.format(max_reruns=max_reruns, hf_home=hf_home), encoding="utf-8")
        argv = (*promote_argv(), "-C", str(repo), "--config", str(conf), "audit", "--json")
        env = {"HF_HUB_OFFLINE": "1", "HF_HOME": str(hf_home), "PROMOTE_INVENTORY": switch}
        # An audit exits 1 or 3 when a gate fails or is undecided (mlx-lm has red tests here, no mirrors).
        made.append(Arm(name, argv, repo, frozenset({0, 1, 3}), _verify(switch == "1"), env))
    return made[0], made[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--max-reruns", type=int, default=0, help="the audit's rerun budget (default 0)")
    parser.add_argument("--warmup", type=int, default=1, help="uncounted runs of each arm first (default 1)")
    args = parser.parse_args()
    root = CORPUS_DIR / "mlx-lm"
    with exclusive("bench_inventory"):
        repo, hf_home = unpack(root)
        with_arm, without_arm = arms(repo, hf_home, args.max_reruns)
        timings = interleave(with_arm, without_arm, args.rounds, warmup=args.warmup, show_noise=True)
    ratios = timings.ratios()
    interval = timings.ratio_interval()
    verdict = interval.verdict(TARGET)
    print(format_table(["arm", "median s", "min s", "max s"], arm_rows(timings)))
    print()
    low, high = interval.low, interval.high
    print(format_table(["ratio", "median", "interval", "target", "verdict"], [
        ["inventory/without", f"{statistics.median(ratios):.3f}", f"{low:.3f}-{high:.3f}", f"{TARGET}", str(verdict)]
    ]))  # fmt: skip
    command = f"python benchmarks/bench_inventory.py --rounds {args.rounds} --max-reruns {args.max_reruns}"
    data: dict[str, Any] = {
        "machine": machine_info(), "seconds": timings.seconds, "first": timings.first,
        "others_cpu_s": timings.others_cpu_seconds, "ratios": [round(r, 3) for r in ratios],
        "median": round(statistics.median(ratios), 3), "interval": [round(low, 3), round(high, 3)],
        "target": TARGET, "verdict": verdict, "command": command,
    }  # fmt: skip
    path = write_results("bench_inventory", data)
    print(f"\nresults: {path}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (BenchError, subprocess.CalledProcessError) as e:
        print(f"bench_inventory: {e}", file=sys.stderr)
        sys.exit(1)
