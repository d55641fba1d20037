"""A pytest plugin for bench_scale's linearity check: this process's CPU time at the first test and every 1,000th.

Does a test late in a run cost more than an early one? A list scanned per result or a file rewritten
per test would make it so. Load it with `-p tick_plugin` (benchmarks/ on PYTHONPATH); it writes
`N cpu_seconds` lines to $TICKS at the end of the session, `0` for the first test's start, then one
every $TICK_EVERY tests (default 1,000). See BENCHMARKS.md (issue 27).
"""

from __future__ import annotations

import os
import time

import pytest

EVERY = int(os.environ.get("TICK_EVERY", "1000"))
_seen = 0
_marks: list[str] = []


def pytest_runtest_logstart(nodeid: str, location: tuple[str, int | None, str]) -> None:
    if not _marks:
        _marks.append(f"0 {time.process_time():.4f}\n")


def pytest_runtest_logfinish(nodeid: str, location: tuple[str, int | None, str]) -> None:
    global _seen
    _seen += 1
    if _seen % EVERY == 0:
        _marks.append(f"{_seen} {time.process_time():.4f}\n")


def pytest_unconfigure(config: pytest.Config) -> None:
    with open(os.environ["TICKS"], "w", encoding="utf-8") as f:
        f.writelines(_marks)
