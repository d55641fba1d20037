"""What each command costs to import: `python -X importtime -m promote CMD --help`, median of N runs per command.

The commands take turns (one run of each, N times over), so a burst of other load is spread over all
of them. The figure per run is the sum of the top-level imports after `site` (what `-m promote` itself
imports; the interpreter's own start-up and `site` are reported beside it). `--check-in DIR` also
times a real `promote check --json` run in DIR (by default bench_check's fixture), imports only;
`--tree` measures other trees (a directory holding a `promote/` package), interleaved.

    python benchmarks/bench_imports.py                  # every command's --help, 20 runs each
    git archive main promote | tar -x -C /tmp/main-tree
    python benchmarks/bench_imports.py --tree /tmp/main-tree --tree .
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

# Run as a script (`python benchmarks/bench_imports.py`), so the helpers are imported by path.
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import WORK_DIR, BenchError, bench_env, format_table, machine_info, pycache_env, write_results
from bench_test import load

LINE = re.compile(r"^import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)$", re.M)
# Modules `promote check` must not load (tests/cli/test_lazy.py fails on them too).
NOT_FOR_CHECK = ("promote.evidence", "promote.runners", "promote.accel", "promote.checks", "promote.demo")


def env_for(tree: Path | None) -> dict[str, str]:
    """The environment of one run: bytecode cached as an installed package's is; `tree` first on the path."""
    env = {**bench_env(), **pycache_env()}
    if tree is not None:
        env["PYTHONPATH"] = str(tree)
    return env


def commands() -> list[str]:
    """Every subcommand, as `promote --help` lists them (so this also measures trees from before the lazy group)."""
    env = env_for(None)
    shown = subprocess.run(
        [sys.executable, "-m", "promote", "--help"], cwd=WORK_DIR, capture_output=True, text=True, env=env
    )
    names = re.findall(r"^  (\w+) {2,}", shown.stdout.split("Commands:", 1)[-1], flags=re.M)
    if shown.returncode != 0 or not names:
        raise BenchError(f"promote --help listed no commands (exit {shown.returncode}): {shown.stderr[-2000:]}")
    return sorted(names)


def one_run(args: list[str], cwd: Path, tree: Path | None) -> dict[str, Any]:
    """One `python -X importtime -m promote ARGS`: imports after site, site itself, and every module's self time."""
    env = env_for(tree)
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "promote", *args], cwd=cwd, capture_output=True, text=True, env=env
    )
    if done.returncode not in (0, 1, 3):
        raise BenchError(f"promote {' '.join(args)} exited {done.returncode}: {done.stderr[-2000:]}")
    after_site, site_us, seen_site = 0, 0, False
    own: dict[str, int] = {}
    for self_us, cumulative_us, indent, name in LINE.findall(done.stderr):
        own[name] = int(self_us)
        if len(indent) == 1:  # a top-level import: the indent is one space
            if seen_site:
                after_site += int(cumulative_us)
            if name == "site":
                seen_site, site_us = True, int(cumulative_us)
    if not seen_site:
        raise BenchError(f"no `site` line in -X importtime output of promote {' '.join(args)}")
    return {"imports_ms": after_site / 1000, "site_ms": site_us / 1000, "self_us": own}


def summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians over the runs of one command, the modules it loaded, and the ten dearest of them."""
    by_module: dict[str, list[int]] = defaultdict(list)
    for r in runs:
        for name, us in r["self_us"].items():
            by_module[name].append(us)
    dearest = sorted(((statistics.median(v), k) for k, v in by_module.items()), reverse=True)[:10]
    modules = sorted(by_module)
    return {
        "imports_ms": [r["imports_ms"] for r in runs],
        "median_imports_ms": statistics.median(r["imports_ms"] for r in runs),
        "median_site_ms": statistics.median(r["site_ms"] for r in runs),
        "promote_modules": [m for m in modules if m.startswith("promote")],
        "forbidden_for_check": [m for m in modules if m.startswith(NOT_FOR_CHECK)],
        "dearest_self_ms": {k: round(us / 1000, 2) for us, k in dearest},
    }


def fixture() -> Path | None:
    """The working repository of bench_check's newest complete fixture, if one was built."""
    built = sorted((WORK_DIR / "check").glob("*/READY.json"), key=lambda p: p.stat().st_mtime)
    return built[-1].parent / "work" if built else None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--runs", type=int, default=20, help="runs per command (default 20)")
    p.add_argument(
        "--check-in",
        type=Path,
        default=fixture(),
        help="also time a real `promote check --json` in DIR (default: bench_check's fixture, once it is built)",
    )
    p.add_argument(
        "--tree",
        type=Path,
        action="append",
        default=[],
        help="a directory holding a promote/ package to measure instead of the installed one (repeat to compare "
        "trees, interleaved)",
    )
    args = p.parse_args(argv)
    trees: list[Path | None] = [t.resolve() for t in args.tree] or [None]
    base = {name: [name, "--help"] for name in commands()}
    base["(group) --help"] = ["--help"]
    if args.check_in is not None:
        base["check (real run)"] = ["check", "--json"]
    cases = {
        (f"{tree.parent.name}/{tree.name}: " if tree else "") + name: (argv_, tree)
        for tree in trees
        for name, argv_ in base.items()
    }
    # Not the checkout: `-m` puts the working directory first on sys.path, and its promote/ would shadow `--tree`.
    cwd = {name: args.check_in if name.endswith("check (real run)") else WORK_DIR for name in cases}
    seen: dict[str, list[dict[str, Any]]] = {name: [] for name in cases}
    load_before = load()
    for name, (cmd, tree) in cases.items():  # warm-up: bytecode written, page cache filled
        one_run(cmd, cwd[name], tree)
    for i in range(args.runs):
        order = list(cases) if i % 2 == 0 else list(reversed(cases))
        for name in order:
            seen[name].append(one_run(cases[name][0], cwd[name], cases[name][1]))
    results = {name: summary(runs) for name, runs in seen.items()}
    rows = [
        [
            name,
            f"{r['median_imports_ms']:.1f}",
            f"{min(r['imports_ms']):.1f}-{max(r['imports_ms']):.1f}",
            f"{r['median_site_ms']:.1f}",
            str(len(r["promote_modules"])),
            ", ".join(r["forbidden_for_check"]) or "-",
        ]
        for name, r in results.items()
    ]
    print(format_table(["command", "imports ms", "range ms", "site ms", "promote modules", "not for check"], rows))
    print(f"load before {load_before}, after {load()}")
    data = {
        "benchmark": "imports",
        "command": "python benchmarks/bench_imports.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "machine": machine_info(),
        "load_before": load_before,
        "load_after": load(),
        "runs": args.runs,
        "commands": results,
    }
    print(f"results: {write_results('imports', data)}")
    return 0


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except BenchError as e:
        print(f"bench_imports: error: {e}", file=sys.stderr)
        raise SystemExit(1) from None
