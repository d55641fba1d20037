"""Say what went wrong on a station during a remote run, and keep the counts to what really ran."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from promote.core.findings import Finding
from promote.core.process import telling_line
from promote.core.redact import redact
from promote.runners.package import ProcessOutcome
from promote.runners.package_findings import process_finding
from promote.runners.plugin import progress
from promote.runners.remote.sync import Workspace
from promote.runners.summary import PackageResult

CHECK = "station-error"
# What ssh prints when it loses a session that had been running.
_LOST = (
    "closed by remote host",
    "Connection reset",
    "Broken pipe",
    "not responding",
    "connect to host",
    "Connection closed",
)
_START_FAULTS = {96: "cannot enter the package directory there", 97: "cannot write the results directory there"}


def station_error(station: str, message: str) -> Finding:
    """The finding for anything that kept a package from running, or finishing, on its station."""
    return Finding(CHECK, "error", station, redact(message))


def ssh_complaint(log: Path) -> str | None:
    """ssh's own last word on a session that ended abnormally, from the end of the part's log."""
    if not log.is_file():
        return None
    tail = "\n".join(log.read_text(encoding="utf-8", errors="replace").splitlines()[-20:])
    return telling_line(tail, contains=_LOST, marked=True) or None


def running_at_end(part_dir: Path) -> list[str]:
    """Tests that had started, and not finished, when the part's processes stopped writing."""
    running = []
    for path in sorted(part_dir.glob("progress-*.jsonl")):
        current = None
        for e in progress.read_progress(path):
            if e.event == "start":
                current = e.nodeid
            elif e.event in ("finish", "session", "end"):
                current = None
        if current is not None:
            running.append(current)
    return running


def counts(part_dir: Path) -> tuple[int, int]:
    """(tests collected, tests finished) in one part, from its progress logs."""
    total = finished = 0
    for path in part_dir.glob("progress-*.jsonl"):
        events = progress.read_progress(path)
        finished += sum(1 for e in events if e.event == "finish")
        # Every xdist worker collects the whole part, so any one count is the part's total.
        total = max([total, *(e.count or 0 for e in events if e.event == "collected")])
    return total, finished


def describe(done: ProcessOutcome) -> str:
    if done.status in _START_FAULTS:
        return f"{_START_FAULTS[done.status]} (log: {done.log})"
    complaint = ssh_complaint(done.log)
    if complaint is not None:
        return f"the connection was lost during the {done.part!r} part ({complaint})"
    if done.status == 255:
        # ssh's own failure; over a shared connection whose master died, ssh says nothing more.
        return f"the connection was lost during the {done.part!r} part (ssh exit 255)"
    return f"pytest there ended without an exit status during the {done.part!r} part (ssh exit {done.status}; killed?)"


def with_faults(
    result: PackageResult, ws: Workspace, parts: list[ProcessOutcome], lost: str | None, *, dirty: bool
) -> PackageResult:
    """`result` with a station-error for every part that did not finish there, instead of local-run guesses."""
    station, label = ws.target.station, ws.target.label
    findings = list(result.findings)
    for done in parts:
        if done.status in range(6):
            continue
        running = running_at_end(done.out_dir)
        # Not "pytest exited with 255" nor "a worker died and was replaced": the station-error says what happened.
        generic = process_finding(result.name, done, True)
        findings = [f for f in findings if f != generic and not (f.check == "worker-crash" and f.subject in running)]
        message = f"station {label}: {describe(done)}"
        if running:
            message += f"; {len(running)} test(s) were running and count as crashed: {', '.join(running)}"
        total, finished = counts(done.out_dir)
        if total > finished + len(running):
            message += f"; {total - finished - len(running)} of {total} collected tests never ran"
        findings.append(station_error(station, message))
    if lost is not None:
        findings.append(
            station_error(
                station,
                f"station {label}: its results could not be fetched ({lost}); nothing that ran there is counted",
            )
        )
    if dirty:
        findings.append(
            Finding(
                "remote-uncommitted",
                "warning",
                station,
                f"station {label} ran commit {ws.sha[:12]}; uncommitted changes to tracked files here did not go there",
            )
        )
    return replace(result, findings=tuple(findings))
