"""Turn what the plugin wrote for one package (results, progress logs) into counts and findings."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from promote.findings import Finding
from promote.runners import progress as progress_mod
from promote.runners.records import TestRecord, WorkerResults, read_all_results

COUNTED = ("passed", "failed", "error", "skipped", "xfailed", "xpassed")


@dataclass(frozen=True)
class PackageResult:
    """One package's run: counts from the records of what actually ran, and what went wrong."""

    name: str
    path: Path
    station: str
    exit_status: int
    duration_s: float
    tests: tuple[TestRecord, ...]
    crashed_tests: tuple[str, ...]
    findings: tuple[Finding, ...]
    out_dir: Path
    command: tuple[str, ...] = ()
    counts: dict[str, int] = field(default_factory=dict)
    subtests: dict[str, int] = field(default_factory=dict)

    @property
    def passed(self) -> int:
        return self.counts.get("passed", 0)

    @property
    def failed(self) -> int:
        return self.counts.get("failed", 0)

    @property
    def errors(self) -> int:
        return self.counts.get("error", 0)

    @property
    def skipped(self) -> int:
        return self.counts.get("skipped", 0)

    @property
    def blocked(self) -> int:
        # Tests no station can run are classified by the requirements check; none is claimed here.
        return self.counts.get("blocked", 0)

    @property
    def crashed(self) -> int:
        return len(self.crashed_tests)

    @property
    def green(self) -> bool:
        return (
            self.failed == 0
            and self.errors == 0
            and self.crashed == 0
            and self.subtests.get("failed", 0) == 0
            and not any(f.severity == "error" for f in self.findings)
        )

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "path": str(self.path),
            "station": self.station,
            "passed": self.passed,
            "failed": self.failed,
            "errors": self.errors,
            "skipped": self.skipped,
            "xfailed": self.counts.get("xfailed", 0),
            "xpassed": self.counts.get("xpassed", 0),
            "blocked": self.blocked,
            "crashed": self.crashed,
            "subtests": dict(self.subtests),
            "duration_s": round(self.duration_s, 3),
            "exit_status": self.exit_status,
            "results": str(self.out_dir),
        }


def crashed_tests(out_dir: Path) -> list[tuple[str, str]]:
    """(test id, worker) of every test that was running when its worker process died."""
    lost = []
    for path in sorted(out_dir.glob("progress-*.jsonl")):
        worker = path.stem.removeprefix("progress-")
        lost += [(nodeid, worker) for nodeid in progress_mod.unfinished(progress_mod.read_progress(path))]
    return lost


def crash_findings(lost: list[tuple[str, str]]) -> list[Finding]:
    return [
        Finding(
            "worker-crash",
            "error",
            nodeid,
            f"worker {worker} died while running {nodeid} (segfault, os._exit or a kill); "
            "the rest of the package ran in a replacement worker",
            cause=nodeid,
        )
        for nodeid, worker in lost
    ]


def process_findings(name: str, status: int, workers: list[WorkerResults], log: Path) -> list[Finding]:
    """A pytest that could not run the package at all (collection or usage error) says why."""
    if status in (0, 1) or (status == 5 and not workers):
        return []
    lines = [ln.strip() for ln in log.read_text(encoding="utf-8", errors="replace").splitlines() if ln.strip()]
    # The telling line is the last exception or error pytest printed, not its traceback frames.
    telling = [ln for ln in lines if "Error" in ln or ln.startswith(("E ", "ERROR", "error:"))]
    why = (telling or lines or ["no output"])[-1][:300]
    return [Finding("package-error", "error", name, f"pytest exited with status {status}: {why} (log: {log})")]


def summarize(
    name: str, path: Path, out_dir: Path, *, station: str, status: int, duration_s: float, log: Path,
    command: tuple[str, ...] = (),
) -> PackageResult:  # fmt: skip
    """Read every worker's records for one package and count what ran."""
    workers = read_all_results(out_dir)
    finished = {t.nodeid for w in workers for t in w.tests}
    lost = [(n, w) for n, w in crashed_tests(out_dir) if n not in finished]
    tests = tuple(t for w in workers for t in w.tests)
    # The crashed test is counted once, as crashed, whatever pytest-xdist reported for it.
    counted = [t for t in tests if t.nodeid not in {n for n, _ in lost}]
    findings = [f for w in workers for f in w.findings]
    findings += crash_findings(lost) + process_findings(name, status, workers, log)
    return PackageResult(
        name=name,
        path=path,
        station=station,
        exit_status=status,
        duration_s=duration_s,
        tests=tests,
        crashed_tests=tuple(n for n, _ in lost),
        findings=tuple(_unique(findings)),
        out_dir=out_dir,
        command=command,
        counts=dict(Counter(t.outcome for t in counted if t.parent is None)),
        subtests=dict(Counter(t.outcome for t in counted if t.parent is not None)),
    )


def _unique(findings: list[Finding]) -> list[Finding]:
    # Each worker reports session-wide notes (e.g. MLX probes off) once; keep one of each.
    seen: set[Finding] = set()
    return [f for f in findings if not (f in seen or seen.add(f))]  # type: ignore[func-returns-value]
