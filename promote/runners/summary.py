"""Turn what the plugin wrote for one package (results, progress logs) into counts and findings."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from promote.core.findings import Finding, Location, Rootdir
from promote.core.station import Station
from promote.core.vocab import Blocker, is_red
from promote.runners.collection import collection_errors_of, uncollected
from promote.runners.configuration import Configuration, chosen, locate, rebased
from promote.runners.package import ProcessOutcome, Watch
from promote.runners.package_findings import (
    crash_finding,
    process_finding,
    stopped_finding,
    timeout_finding,
    unseen_finding,
    without_xdist_finding,
)
from promote.runners.plugin import progress as progress_mod
from promote.runners.plugin.records import LeakRecord, TestRecord, WorkerResults, read_all_results
from promote.runners.plugin.stops import Stop, read_collected, read_stop
from promote.runners.rerun_verdict import Group, Verdict


@dataclass(frozen=True)
class CIJob:
    """A CI job that runs a test, on a runner that has what it needs: a place it can run besides the stations."""

    source: str  # its workflow file, relative to the repository root
    job: str
    runs_on: str  # its runner labels, e.g. "macos-14"
    runner: Station  # what that runner has

    def to_json(self) -> dict[str, object]:
        return {"source": self.source, "job": self.job, "runs_on": self.runs_on}


@dataclass(frozen=True)
class Blocked:
    """A test that could not do its job here for want of something: which, and which stations have it."""

    test: str
    check: Blocker
    requirements: tuple[str, ...]  # what the station it ran on lacked (impossible: what nothing has)
    stations: tuple[str, ...]  # the stations that have all of them
    outcome: str  # as recorded: failed, error or skipped
    fixture: str | None = None  # the fixture (file::name) that needed it, when it was one
    parent: str | None = None  # for a subtest: its test (a test blocked only by its subtests lists them too)
    lacking: tuple[str, ...] = ()  # everything the station it ran on lacked, when more than `requirements`
    jobs: tuple[CIJob, ...] = ()  # no station has it all: the CI jobs that run it on a runner that does

    @property
    def blocker(self) -> str:
        return " + ".join(self.requirements)

    def to_json(self) -> dict[str, object]:
        return {
            "test": self.test,
            "check": self.check,
            "requirements": list(self.requirements),
            "stations": list(self.stations),
            "outcome": self.outcome,
            "fixture": self.fixture,
            "parent": self.parent,
            "jobs": [j.to_json() for j in self.jobs],
        }


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
    verdicts: tuple[Verdict, ...] = ()
    groups: tuple[Group, ...] = ()  # failures of one cause whose reruns agreed: each said once, under its cause
    blocked_tests: tuple[str, ...] = ()  # ids of the tests counted as blocked
    blockers: tuple[Blocked, ...] = ()  # why each of them is blocked
    judged: tuple[Blocked, ...] = ()  # what the requirement findings tell: each test's own need, each subtest's
    random_draws_restored: int = 0  # tests that only drew from MLX's global generator: key put back, no finding
    random_draws: int = 0  # the same tests under either policy (under `report` the key is left as they drew)
    leaks: tuple[LeakRecord, ...] = ()  # every test's leaked state, as data (grouped into findings at the end)
    # Tests that passed only because promote restored state: they fail, in the same order, without restores.
    hidden: tuple[str, ...] = ()
    parts: tuple[str, ...] = ()  # the pytest processes that ran: "all", or "parallel" then "serial" when it had any
    workers: int = 1  # the pytest-xdist workers its first part ran on (1: serially, in one process)
    rootdir: Rootdir | None = None  # where its node ids are rooted in the repository (None: outside one)
    configuration: Configuration | None = None  # the rootdir and ini file pytest chose (None: not read)
    deselected: tuple[str, ...] = ()  # collected and left out by its own options (-k, -m, --deselect): never run
    unrun: tuple[str, ...] = ()  # collected to run and never started: pytest stopped first (--maxfail, -x, a death)
    # Over a fleet: each test (top level, crashed ones too) and the station it ran on; empty on one station.
    placed: tuple[tuple[str, str], ...] = ()
    stations_down: tuple[str, ...] = ()  # over a fleet: the stations that stopped answering during the run
    fleet: tuple[str, ...] = ()  # the stations it was to run over (empty: run here, as a plain pytest run)

    def ran_on(self, test: str) -> str | None:
        """The station `test` ran on, over a fleet (None for a package run on one station)."""
        return dict(self.placed).get(test)

    def locate(self, nodeid: str, line: int | None = None) -> Location | None:
        """Where the file of one of its node ids is, relative to the repository root."""
        return locate(self.rootdir, nodeid, line)

    @property
    def recorded(self) -> bool:
        """Whether its workers said which rootdir and ini file pytest chose."""
        return self.configuration is not None and self.configuration.known

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
        # Moved out of failed, errors and skipped by the requirements check (promote.runners.requirements).
        return self.counts.get("blocked", 0)

    @property
    def blocked_by(self) -> dict[str, int]:
        """How many tests each missing requirement blocks, most first."""
        return dict(Counter(b.blocker for b in self.blockers if b.parent is None).most_common())

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
            "blocked_by": self.blocked_by,
            "crashed": self.crashed,
            "not_run": len(self.unrun),
            "subtests": dict(self.subtests),
            "duration_s": round(self.duration_s, 3),
            "exit_status": self.exit_status,
            "results": str(self.out_dir),
            "reruns": [
                {
                    "test": v.test,
                    "verdict": v.kind,
                    "polluters": list(v.polluters),
                    "reruns": v.reruns,
                    "detail": v.detail,
                    "station": v.ran_on,
                    "passes_on": list(v.passes_on),
                }
                for v in self.verdicts
            ],
            # Failures of one cause, each group said once: what raised, where, and its tests.
            "groups": [{"raised": g.raised, "at": g.at, "tests": list(g.tests)} for g in self.groups],
            "blockers": [b.to_json() for b in self.blockers],
            "random_draws_restored": self.random_draws_restored,
            "random_draws": self.random_draws,
            "pass_only_restored": list(self.hidden),
            # What pytest read, relative to the repository root: None for no ini file (or not recorded).
            "inifile": self.configuration.inifile if self.configuration is not None else None,
            "rootdir": str(self.rootdir.path) if self.recorded and self.rootdir is not None else None,
            # Over a fleet: the station each test ran on (a test that crashed there too).
            "placement": dict(self.placed) if self.placed else None,
        }


def crashed_tests(out_dir: Path) -> list[tuple[str, str]]:
    """(test id, worker) of every test that was running when its worker process died."""
    # The same reading the runner's watcher does while a process runs, done once after it.
    watch = Watch(out_dir, timeout_s=None)
    watch.poll()
    return list(watch.crashed())


@dataclass(frozen=True)
class Recovered:
    """What workers that died before writing their results had said in their progress logs."""

    tests: list[TestRecord]
    findings: list[Finding]
    leaks: list[LeakRecord]


def recovered(out_dir: Path, workers_with_results: set[str]) -> Recovered:
    """Records, findings and leaks of workers that died before writing their results, from their progress logs."""
    tests: list[TestRecord] = []
    findings: list[Finding] = []
    leaks: list[LeakRecord] = []
    for path in sorted(out_dir.glob("progress-*.jsonl")):
        if path.stem.removeprefix("progress-") in workers_with_results:
            continue
        main = ("MainThread", 0)
        for event in progress_mod.read_progress(path):
            if event.event == "session":
                main = (event.thread or "MainThread", event.thread_id or 0)
            elif event.event == "finish" and event.records is None and event.duration_s is not None:
                # A short line: a test that passed on the main thread with nothing more to record.
                name, ident = main
                index = int(event.index or 0)
                record = TestRecord(str(event.nodeid), "passed", event.duration_s, event.worker, index, name, ident)
                tests.append(record)
            try:
                said = (
                    [TestRecord.from_json(r) for r in event.records or ()],
                    [Finding.from_json(f) for f in event.findings or ()],
                    [LeakRecord.from_json(leak) for leak in event.leaked or ()],
                )
            except (ValueError, KeyError, TypeError, AttributeError):
                continue  # a line the plugin did not write: its test counts as not finished, never half-read
            tests += said[0]
            findings += said[1]
            leaks += said[2]
    return Recovered(tests, findings, leaks)


@dataclass(frozen=True)
class _PartsRead:
    """What the records of every part of one package's run say, before they are counted."""

    tests: list[TestRecord]
    findings: list[Finding]
    lost: list[tuple[str, str]]  # (test id, part/worker) of each test a dead worker took with it
    timed_out: set[str]
    failing: list[bool]  # per part: whether its records explain a status 1
    workers: list[WorkerResults]
    leaks: list[LeakRecord]  # every worker's, those that died included
    configuration: Configuration
    collected: list[str]  # every id a process of any part set out to run
    stops: list[Stop]  # why a part's pytest stopped early, for each part that did


def _read_parts(parts: list[ProcessOutcome], package: Rootdir | None) -> _PartsRead:
    per_part = [read_all_results(done.out_dir) for done in parts]
    configuration = chosen(package, [w for workers in per_part for w in workers])
    read = _PartsRead([], [], [], set(), [], [], [], configuration, [], [])
    rootdir = read.configuration.rootdir
    for done, workers in zip(parts, per_part, strict=True):
        read.workers.extend(workers)
        read.collected.extend(read_collected(done.out_dir))
        read.stops.extend(stop for stop in [read_stop(done.out_dir)] if stop is not None)
        saved = recovered(done.out_dir, {w.worker for w in workers})
        part_tests = [t for w in workers for t in w.tests] + saved.tests
        read.leaks.extend([*(leak for w in workers for leak in w.leaked), *saved.leaks])
        finished = {t.nodeid for t in part_tests}
        read.timed_out.update(done.timed_out)
        died = done.crashed if done.crashed is not None else crashed_tests(done.out_dir)
        read.lost.extend((n, f"{done.part}/{w}") for n, w in died if n not in finished)
        read.tests.extend(part_tests)
        read.findings.extend(rebased(f, rootdir) for f in [*(f for w in workers for f in w.findings), *saved.findings])
        bad = any(is_red(t.outcome) for t in part_tests)
        read.failing.append(bad or bool(died) or bool(done.timed_out))
    return read


def summarize(
    name: str,
    path: Path,
    out_dir: Path,
    *,
    station: str,
    parts: list[ProcessOutcome],
    timeout_s: float | None = None,
    rootdir: Rootdir | None = None,
) -> PackageResult:
    """Read every worker's records for one package and count what ran; `rootdir`: where it is in the repository.

    Node ids are rooted where pytest chose its rootdir (a configuration above the package moves it up), as
    the workers recorded it; `rootdir` is the package's directory, where pytest was started.
    """
    read = _read_parts(parts, rootdir)
    rootdir = read.configuration.rootdir
    tests, findings, lost, timed_out, every = read.tests, read.findings, read.lost, read.timed_out, read.workers
    tests, collection_errors = collection_errors_of(tests)
    # Workers report as they finish, and which worker runs which test changes from run to run: in collection
    # order, a commit's findings list and word their tests alike on every run.
    position = {nodeid: i for i, nodeid in enumerate(read.collected)}
    tests = sorted(tests, key=lambda t: position.get(t.parent or t.nodeid, len(position)))
    findings += [uncollected(t, locate(rootdir, t.nodeid, t.line)) for t in collection_errors]
    crashed = [(n, w) for n, w in lost if n not in timed_out]
    findings += [crash_finding(n, w, locate(rootdir, n)) for n, w in crashed]
    findings += [timeout_finding(n, timeout_s, locate(rootdir, n)) for n in sorted(timed_out)]
    ran = bool(tests or lost)
    findings += _process_findings(name, parts, read.failing, ran)
    deselected = _deselected(every, tests)
    unrun, stopped = _stopped(name, parts, read, {t.nodeid for t in tests} | {n for n, _ in lost} | set(deselected))
    findings += stopped
    if not ran:
        # Nothing unseen is a pass: a package that recorded no test is not green, whatever pytest's status.
        findings = unseen_finding(name, out_dir, findings, max(done.status for done in parts))
    # A test that died or was killed is counted once, as crashed or failed, whatever xdist reported for it.
    gone = {n for n, _ in lost}
    counted = [t for t in tests if t.nodeid not in gone]
    counts = Counter(t.outcome for t in counted if t.parent is None)
    counts["failed"] += len(timed_out)
    return PackageResult(
        name=name,
        path=path,
        station=station,
        exit_status=max(done.status for done in parts),
        duration_s=max(done.duration_s for done in parts),
        tests=tuple(tests),
        crashed_tests=tuple(n for n, _ in crashed),
        findings=tuple(_unique(findings)),
        out_dir=out_dir,
        command=parts[0].command,
        counts=dict(counts),
        subtests=dict(Counter(t.outcome for t in counted if t.parent is not None)),
        random_draws_restored=sum(w.random_draws_restored for w in every),
        random_draws=sum(w.random_draws for w in every),
        leaks=tuple(read.leaks),
        parts=tuple(done.part for done in parts),
        workers=parts[0].workers,
        rootdir=rootdir,
        configuration=read.configuration,
        deselected=deselected,
        unrun=unrun,
    )


def _process_findings(name: str, parts: list[ProcessOutcome], failing: list[bool], ran: bool) -> list[Finding]:
    """What each pytest process's end says that its records do not, and a package run without its xdist."""
    found = [f for done, bad in zip(parts, failing, strict=True) if (f := process_finding(name, done, ran, bad))]
    return found + [f for f in [without_xdist_finding(name, parts[0])] if f is not None]


def _stopped(
    name: str, parts: list[ProcessOutcome], read: _PartsRead, started: set[str]
) -> tuple[tuple[str, ...], list[Finding]]:
    """The tests collected and never started (pytest stopped first: its own --maxfail or -x, a death it could not
    go past), and the finding that says so."""
    collected = list(dict.fromkeys(read.collected))
    unrun = tuple(n for n in collected if n not in started)
    return unrun, [stopped_finding(name, len(unrun), len(collected), read.stops, parts)] if unrun else []


def _deselected(workers: list[WorkerResults], tests: list[TestRecord]) -> tuple[str, ...]:
    """The ids its own options left out, once (every xdist worker and part deselects the same), none that ran."""
    ran = {t.nodeid for t in tests}
    return tuple(n for n in dict.fromkeys(n for w in workers for n in w.deselected) if n not in ran)


def _unique(findings: list[Finding]) -> list[Finding]:
    # Each worker reports session-wide notes (e.g. MLX probes off) once; keep one of each.
    seen: set[Finding] = set()
    unique = []
    for f in findings:
        if f not in seen:
            seen.add(f)
            unique.append(f)
    return unique
