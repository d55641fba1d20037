"""A year of nightly runs of a 10,000-test suite in the history: `history --tests` and the page's history part.

Writes 365 runs (plus `--extra` past `keep`, to time pruning) through the real store (`History.record` of real
`StoredRun` records), then times what reads them: `promote history --tests --json` as a user runs it (a fresh
interpreter each time), and in process the page's history part of an audit (the stories with the run as the
newest, the tallies of flipped tests, the chart's counts). States the database's size.

    python benchmarks/bench_history_year.py [--runs 365] [--tests 10000] [--rounds 5] [--extra 40]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path

from promote.config import load
from promote.core import state
from promote.evidence import pages, story_findings, story_window
from promote.evidence.deltas import compare
from promote.evidence.history import History, StoredRun, TestOutcome

PACKAGES = ("sanctum-mlx", "sanctum-proxy", "sanctum-train", "sanctum-eval")
START = datetime(2025, 12, 1, 2, 30, tzinfo=timezone.utc)


def outcome(n: int, night: int) -> tuple[str, str | None, str | None]:
    """(outcome, reason, blocker) of test `n` on `night`: mostly green, with a few of every story."""
    if n % 1000 == 7:  # ten flaky tests: red about one night in five
        return ("failed" if (night * 7 + n) % 5 == 0 else "passed"), None, None
    if n % 500 == 11:  # twenty quarantined for good
        return "skipped", "quarantined: flaky on the station", None
    if n % 2500 == 13:  # four that need a checkpoint no station has
        return "blocked", "checkpoint:qwen3-27b-4bit", "impossible-requirement"
    if n % 5000 == 17 and night % 60 > 50:  # two red for a week every two months
        return "failed", None, None
    return "passed", None, None


FILTERED = '-m "not gpu" in job `tests` of .github/workflows/ci.yml'


def night(i: int, tests: int) -> StoredRun:
    started = (START + timedelta(days=i)).isoformat(timespec="microseconds")
    commit = f"{i // 3:040x}"  # a new commit every third night: flaky tests pass and fail on one commit
    audit = bool(i % 2)  # an audit reads CI: a hundred tests (1%) no CI job runs
    outcomes = []
    for n in range(tests):
        word, reason, blocker = outcome(n, i)
        package = PACKAGES[n % len(PACKAGES)]
        nodeid = f"tests/test_m{n // 40:04d}.py::test_case_{n:05d}"
        if n % 1000 == 99:  # ten tests whose id changes every night (a parameter drawn at random)
            nodeid += f"[seed={i}]"
        verdict = "flaky" if word == "failed" else None
        ci = FILTERED if audit and n % 100 == 23 else None
        outcomes.append(TestOutcome(package, nodeid, word, 0.01, "local", reason, blocker, verdict, ci))
    return StoredRun(
        run_id=f"{started[:10].replace('-', '')}T023000Z-{i:04x}", kind="audit" if i % 2 else "test",
        started=started, finished=started, commit=commit, command="promote audit",
        stations={p: "local" for p in PACKAGES}, gates={"tested": "fail" if i % 60 > 50 else "pass"} if i % 2 else {},
        tests=tuple(outcomes), ci_read=audit,
    )  # fmt: skip


def timed(fn: Callable[[], object], rounds: int) -> list[float]:
    out = []
    for _ in range(rounds):
        started = time.perf_counter()
        fn()
        out.append(time.perf_counter() - started)
    return out


def size(db: Path) -> int:
    return sum(p.stat().st_size for p in db.parent.glob(db.name + "*") if p.is_file())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=365)
    parser.add_argument("--tests", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--extra", type=int, default=40, help="runs written past `keep` (400) to time pruning")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="promote-history-year-"))
    try:
        subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
        (root / "promote.toml").write_text('[promote]\ntrunk = "main"\nmirrors = []\n[promote.history]\nkeep = 400\n')
        config = load(root / "promote.toml")
        history = History(state.state_dir(config.root))
        keep = config.history.keep
        writes = []
        for i in range(args.runs):
            run = night(i, args.tests)
            writes += timed(lambda run=run: history.record(run, keep=keep), 1)  # type: ignore[misc]
        history.read("PRAGMA wal_checkpoint(TRUNCATE)")
        db = history.path
        year_size = size(db)
        pending = night(args.runs, args.tests)

        def page_part() -> object:
            deltas = compare(pending, history.previous(pending), story_window.tally(history, pending))
            report = story_findings.read(config, history, pending)
            return deltas, pages.history_points(story_window.run_counts(history, 20), report.marks), report

        in_process = timed(lambda: story_findings.read(config, history), args.rounds)
        page = timed(page_part, args.rounds)
        command = [sys.executable, "-m", "promote", "-C", str(root), "history", "--tests", "--json"]
        cli = timed(lambda: subprocess.run(command, check=True, capture_output=True), args.rounds)
        told = json.loads(subprocess.run(command, check=True, capture_output=True, text=True).stdout)
        prune = []
        for i in range(args.runs + 1, args.runs + 1 + args.extra):
            run = night(i, args.tests)
            prune += timed(lambda run=run: history.record(run, keep=keep), 1)  # type: ignore[misc]
        history.read("PRAGMA wal_checkpoint(TRUNCATE)")
        kept = len(history.run_ids())
        ids = history.read("SELECT COUNT(*) FROM test_ids")[0][0]
        history.close()
        print(f"load: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f} (1, 5, 15 min)")
        print(f"{args.runs} runs x {args.tests} tests: {year_size / 2**20:.0f} MiB")
        print(f"  write one run: median {statistics.median(writes) * 1000:.0f} ms")
        print(f"  stories told: {len(told['tests'])} tests, {len(told['dropped'])} drops, {len(told['gates'])} gates")
        for name, times in (("history --tests --json (a fresh promote)", cli), ("stories, in process", in_process),
                            ("the page's history part, in process", page)):  # fmt: skip
            print(f"  {name}: median {statistics.median(times):.3f} s, max {max(times):.3f} s ({args.rounds} rounds)")
        print(f"after {args.extra} more runs with keep = {keep}: {kept} runs, {ids} test ids,"
              f" {size(db) / 2**20:.0f} MiB; one run written with pruning: median"
              f" {statistics.median(prune[-5:]) * 1000:.0f} ms")  # fmt: skip
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
