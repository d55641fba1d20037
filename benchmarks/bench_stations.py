"""Benchmark reading the Hugging Face cache for station detection: promote's reader against huggingface_hub's.

`promote test` detects the local station before its first test can start, and that includes
which hub models are cached. Both arms list the cached repos of the same generated cache
(20 models with symlinked blobs, as huggingface_hub lays them out) in a fresh interpreter, the
import included: the import is what a user waits for. The arms are interleaved over the rounds.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (
    WORK_DIR,
    Arm,
    BenchError,
    arm_rows,
    cached_fixture,
    exclusive,
    format_table,
    interleave,
    machine_info,
    pycache_env,
    write_results,
)

REPOS = 20
FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")
PROMOTE = (
    "from pathlib import Path; from promote.runners.stations import cached_hub_models; "
    "print(len(cached_hub_models(Path('hub'))[0]))"
)
HUB = (
    "from huggingface_hub import scan_cache_dir; "
    "print(len([r for r in scan_cache_dir('hub').repos if r.nb_files and r.revisions]))"
)


def build_cache(root: Path) -> None:
    """`REPOS` model repos, each a snapshot of symlinks into its blobs, with a `main` ref."""
    for i in range(REPOS):
        repo = root / "hub" / f"models--mlx-community--Model-{i:02d}-4bit"
        revision = f"{i:040x}"
        (repo / "refs").mkdir(parents=True)
        (repo / "refs" / "main").write_text(revision)
        (repo / "blobs").mkdir()
        snapshot = repo / "snapshots" / revision
        snapshot.mkdir(parents=True)
        for n, name in enumerate(FILES):
            blob = repo / "blobs" / f"{i:02d}{n:038x}"
            blob.write_text("x" * 64)
            os.symlink(os.path.relpath(blob, snapshot), snapshot / name)


def counts_repos(stdout: str) -> None:
    if stdout.strip() != str(REPOS):
        raise BenchError(f"expected {REPOS} cached repos, the arm printed {stdout.strip()!r}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15, help="timed rounds per arm (default 15)")
    args = parser.parse_args(argv)
    with exclusive("stations"):
        root = cached_fixture(WORK_DIR / "stations", {"repos": REPOS, "files": FILES}, build_cache)
        arms = [
            Arm("promote", (sys.executable, "-c", PROMOTE), root, frozenset({0}), counts_repos, pycache_env()),
            Arm("huggingface_hub", (sys.executable, "-c", HUB), root, frozenset({0}), counts_repos, pycache_env()),
        ]
        print(f"bench_stations: listing {REPOS} cached hub models in a fresh interpreter, {args.rounds} rounds")
        timings = interleave(arms[0], arms[1], args.rounds)
        print()
        print(format_table(["arm", "median s", "min s", "max s"], arm_rows(timings)))
        ratio = timings.median_ratio()
        print(f"\nper-round ratio promote/huggingface_hub: {', '.join(f'{r:.3f}' for r in timings.ratios())}")
        print(f"median ratio promote/huggingface_hub: {ratio:.3f}")
        results: dict[str, Any] = {
            "benchmark": "stations",
            "command": "python benchmarks/bench_stations.py " + " ".join(argv or sys.argv[1:]),
            "machine": machine_info(),
            "repos": REPOS,
            "seconds": timings.seconds,
            "median_s": {n: statistics.median(v) for n, v in timings.seconds.items()},
            "ratios": timings.ratios(),
            "median_ratio": ratio,
        }
        print(f"results: {write_results('stations', results)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
