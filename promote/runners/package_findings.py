"""The findings a package's run gives about its pytest processes: a worker that died, a test past its timeout,
a pytest that could not run or stopped early, a package run without the xdist its configuration asked for."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from promote.core.findings import Finding, Location
from promote.core.process import internal_error, telling_line
from promote.core.vocab import COUNT_KEYS
from promote.runners.package import ProcessOutcome
from promote.runners.plugin.stops import Stop

# The keys of a package in run.json that count tests, as to_json writes them.
STORED_COUNTS = tuple(COUNT_KEYS.values())  # the --json contract's keys


def crash_finding(nodeid: str, worker: str, location: Location | None = None) -> Finding:
    return Finding(
        "worker-crash",
        "error",
        nodeid,
        f"worker {worker} died while running {nodeid} (segfault, os._exit or a kill); "
        "the rest of the package ran in a replacement worker",
        cause=nodeid,
        location=location,
    )


def timeout_finding(nodeid: str, limit: float | None, location: Location | None = None) -> Finding:
    return Finding(
        "timeout",
        "error",
        nodeid,
        f"{nodeid} ran past timeout_s = {limit:g} s; its worker was killed and the test counted as failed",
        cause=nodeid,
        location=location,
    )


def process_finding(name: str, done: ProcessOutcome, ran_tests: bool, failures: bool = True) -> Finding | None:
    """A pytest that could not run its part of the package, or ended as its records do not explain, says why.

    `failures`: whether the part recorded a failure, an error or a crash (what a status 1 means).
    """
    if (
        done.status == 0
        or (done.status == 1 and failures)
        or (done.status == 5 and (done.part == "serial" or ran_tests))
    ):
        return None
    if done.status == 5:
        return Finding("package-error", "error", name, f"no tests ran: pytest collected no tests (log: {done.log})")
    why = log_complaint(done.log)
    if done.status == 1:
        ran = "" if ran_tests else " and ran no test"
        message = f"pytest exited with status 1 but recorded no failure{ran}: {why} (log: {done.log})"
        return Finding("package-error", "error", name, message)
    return Finding("package-error", "error", name, f"pytest exited with status {done.status}: {why} (log: {done.log})")


def log_complaint(log: Path) -> str:
    """The line of a pytest log that says what went wrong: the last exception or error it printed."""
    text = log.read_text(encoding="utf-8", errors="replace") if log.exists() else ""
    internal = internal_error(text)
    if internal:
        return f"INTERNALERROR {internal}"
    # Not its traceback frames: an interpreter without pytest says only "No module named pytest".
    return telling_line(text, starts=("E ", "ERROR", "error:"), contains=("Error",)) or "no output"


def unseen_finding(name: str, out_dir: Path, findings: list[Finding], status: int) -> list[Finding]:
    """`findings` with a package-error saying that no test ran (and how many the previous run ran)."""
    before = previous_total(out_dir)
    note = f"; the previous run ({before[0]}) ran {before[1]} test(s)" if before else ""
    mine = next((f for f in findings if f.check == "package-error" and f.subject == name), None)
    if mine is None:
        message = f"no test ran: pytest exited with status {status} and recorded nothing{note}"
        return [*findings, Finding("package-error", "error", name, message)]
    if not note or status not in range(6):
        # Beyond pytest's own statuses, the station's report (promote.runners.remote.faults) replaces this one.
        return findings
    return [replace(f, message=f.message + note) if f is mine else f for f in findings]


def previous_total(out_dir: Path, look_back: int = 50) -> tuple[str, int] | None:
    """(run id, tests counted) of the newest earlier run of this package that ran any test."""
    run = out_dir.parent
    try:
        earlier = sorted((d for d in run.parent.iterdir() if d.name < run.name), reverse=True)[:look_back]
    except OSError:
        return None
    for d in earlier:
        try:
            stored = json.loads((d / "run.json").read_text(encoding="utf-8"))
            pkg = next(p for p in stored["packages"] if p["name"] == out_dir.name)
            total = sum(int(pkg.get(k, 0)) for k in STORED_COUNTS)
        except (OSError, ValueError, KeyError, TypeError, StopIteration):
            continue
        if total:
            return d.name, total
    return None


def without_xdist_finding(name: str, first: ProcessOutcome) -> Finding | None:
    """A package configured for several workers whose own options disable xdist: it ran in plain pytest, said so."""
    if first.xdist_blocked is None or first.asked <= 1:
        return None
    return Finding(
        "runs-without-xdist",
        "info",
        name,
        f"its own pytest options disable pytest-xdist (-p no:xdist, in {first.xdist_blocked}): it ran serially in "
        f"plain pytest processes, not on the {first.asked} workers configured",
    )


def stopped_finding(name: str, unrun: int, collected: int, stops: list[Stop], parts: list[ProcessOutcome]) -> Finding:
    """Collected tests that never started, said as what happened: pytest stopped, not tests gone from the package."""
    left = f"{unrun} of {collected} collected tests did not run (counted as not-run, still collected)"
    stop = stops[0] if stops else None
    if stop is not None and stop.maxfail:
        why = f"pytest stopped ({stop.reason}): the package's own --maxfail={stop.maxfail} (or -x) in its options"
    elif stop is not None:
        why = f"pytest stopped: {stop.reason}"
    else:
        status = max(done.status for done in parts)
        why = f"pytest ended (status {status}) before running them (log: {parts[-1].log})"
    return Finding("pytest-stopped", "warning", name, f"{why}; {left}")
