"""The active half of the plugin: records every test, watches for leaks and stream misuse."""

from __future__ import annotations

import functools
import os
import platform
import threading
import time
from collections.abc import Generator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from promote.core.findings import Finding, Location
from promote.core.policies import OFF, RESTORE
from promote.runners.plugin import outcomes
from promote.runners.plugin.items import (
    OWN_DESELECTED,
    RAISED_AT,
    REQUIREMENTS,
    SERIAL_LEFT,
    chosen_configuration,
    failing_fixture,
    note_raised_at,
)
from promote.runners.plugin.leaks import LeakWatch, leak_finding
from promote.runners.plugin.mlx_probes import RANDOM_PROBE, MlxProbes, import_mlx
from promote.runners.plugin.probes import Probe, entry_point_probes
from promote.runners.plugin.process_probes import note_pytest_paths, process_probes
from promote.runners.plugin.progress import ProgressLog
from promote.runners.plugin.records import LeakRecord, TestRecord, WorkerResults, plain_pass, write_results
from promote.runners.plugin.requirement_rules import excerpt
from promote.runners.plugin.seed_probes import NumpyRandom, SeedTracker, python_random
from promote.runners.plugin.shown_ids import shown_id
from promote.runners.plugin.sites import Sites, ThreadStarts, failure_site
from promote.runners.plugin.streams import StreamTracker

# A skip or an xfail raises too; neither is a failure with a cause.
_NOT_FAILURES = (pytest.skip.Exception, pytest.xfail.Exception)


@dataclass  # no slots=True: the plugin loads on Python 3.9 too
class _Running:
    """What is known so far about the test being run."""

    nodeid: str
    index: int
    thread: threading.Thread
    outcome: str | None = None
    reported: bool = False
    duration_s: float = 0.0
    failure: list[str] = field(default_factory=list)
    skip_reason: str | None = None
    subtests: list[TestRecord] = field(default_factory=list)
    subtest_ids: dict[str, int] = field(default_factory=dict)
    failed_subtests: int = 0
    requirements: tuple[str, ...] = ()
    fixture: str | None = None
    # What raised in the first phase that failed, and where (`sites.failure_site`): failures are grouped by it.
    site: tuple[str, str, bool] | None = None


class Recorder:
    """Registered as a plugin only when `--promote-out` is given, in each process that runs tests."""

    def __init__(
        self, config: pytest.Config, out_dir: Path, worker: str, leaks: str, outbox: list[str] | None = None
    ) -> None:
        self.config, self.out_dir, self.worker, self.leaks = config, out_dir, worker, leaks
        self.started_at = time.time()
        self.records: list[TestRecord] = []
        self.deselected: list[str] = []  # the package's own selection left these out (-k, -m, --deselect)
        self.flushed = 0
        self.findings: list[Finding] = []
        self.leaked: list[LeakRecord] = []
        self.leaks_flushed = 0  # how many of `leaked` the progress log has
        self.index = 0
        self.running: _Running | None = None
        self.where: str | None = None
        self.phase = "session"
        self.fixtures: list[str] = []
        self.before: dict[str, object] | None = None
        self.pending: dict[int, dict[str, object]] = {}
        self.progress = ProgressLog(out_dir, worker, outbox)
        self.main_thread_id = threading.main_thread().ident or 0
        self.mx, why_not = import_mlx()
        self.streams = StreamTracker(self.mx, self._whereabouts) if self.mx else None
        self.watch: LeakWatch | None = None
        self.mlx_probes: MlxProbes | None = None
        self.seeded: list[NumpyRandom | SeedTracker] = []
        self.sites: Sites | None = None
        self.thread_starts: ThreadStarts | None = None
        if leaks != OFF:
            # Where a setter was called, so that a change library code or a fixture made is put down to it.
            sites = self.sites = Sites(config.rootpath)
            self.thread_starts = ThreadStarts(sites)
            self.seeded = [python_random(sites), NumpyRandom(sites)]
            probes: list[Probe] = process_probes() + [s.probe() for s in self.seeded]
            if self.mx is not None:
                self.mlx_probes = MlxProbes(self.mx, sites)
                probes += self.mlx_probes.probes()
                if self.mlx_probes.missing:
                    version = getattr(self.mx, "__version__", "(unknown version)")
                    message = f"mlx {version}: {', '.join(self.mlx_probes.missing)} not probed"
                    self.findings.append(Finding("leaked-state", "info", "mlx", message))
            elif why_not is not None:
                message = f"MLX probes are off: {why_not}; the other probes still run"
                self.findings.append(Finding("leaked-state", "info", "mlx", message))
            extra, problems = entry_point_probes()
            self.findings += problems
            self.watch = LeakWatch(probes + extra, restore=leaks == RESTORE, sites=sites)

    def become(self, worker: str) -> None:
        """Record from here on as `worker`, from no test yet: a child forked to run one selection of its own."""
        self.progress.detach()  # the parent's log stays the parent's
        self.worker, self.progress = worker, ProgressLog(self.out_dir, worker)
        self.records, self.findings, self.leaked, self.flushed, self.index = [], [], [], 0, 0
        self.leaks_flushed = 0

    def _whereabouts(self) -> tuple[str | None, str, str | None]:
        phase = self.phase
        run = self.running
        if run is not None:
            # pytest names the phase it is in ("<test id> (call)"). Read here, when a stream is made,
            # rather than followed through three more hooks on every test.
            current = os.environ.get("PYTEST_CURRENT_TEST", "")
            if current.startswith(run.nodeid + " (") and current.endswith(")"):
                phase = current[len(run.nodeid) + 2 : -1]
        return self.where, phase, self.fixtures[-1] if self.fixtures else None

    def pytest_deselected(self, items: list[pytest.Item]) -> None:
        # A test its own options leave out of every run never does its job: the history tells it, so it is kept.
        own = self.config.stash.get(OWN_DESELECTED, set())
        self.deselected += [item.nodeid for item in items if item.nodeid not in own]

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        note_pytest_paths(session.config.rootpath, {item.path for item in session.items})
        self.progress.collected(len(session.items), serial_left=session.config.stash.get(SERIAL_LEFT, None))

    def pytest_exception_interact(
        self, node: pytest.Item | pytest.Collector, call: pytest.CallInfo[Any], report: object
    ) -> None:
        # pytest calls this with the exception itself (its report has only text), before pytest_collectreport.
        if isinstance(report, pytest.CollectReport) and isinstance(node, pytest.Collector) and call.excinfo is not None:
            note_raised_at(node, call.excinfo.value)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        # A module that cannot even be imported ran no test: it must show up as an error, not as nothing.
        if not report.failed:
            return
        thread = threading.current_thread()
        record = TestRecord(
            nodeid=report.nodeid or "<collection>",
            outcome="error",
            duration_s=0.0,
            worker=self.worker,
            index=0,
            thread_name=thread.name,
            thread_id=thread.ident or 0,
            longrepr=outcomes.truncate(text := str(report.longrepr)),
            # Whole where longrepr is cut: a module needing a hub model at import names it in its frames.
            excerpt=excerpt(text),
            output=outcomes.last_lines(report.sections),
            line=self.config.stash.get(RAISED_AT, {}).pop(report.nodeid, None),
        )
        self.records.append(record)
        self.progress.finish(record.nodeid, 0, "error", records=[record.to_json()])

    def pytest_collectstart(self, collector: pytest.Collector) -> None:
        self.where, self.phase = collector.nodeid, "collection"

    @pytest.hookimpl(wrapper=True)
    def pytest_make_collect_report(
        self, collector: pytest.Collector
    ) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
        # Importing a test module is where it runs its module-level code: state it sets there is a leak
        # whose cause is the module, and it happens before any test, whatever the order.
        before = self.watch.snapshot() if self.watch is not None and isinstance(collector, pytest.Module) else None
        try:
            return (yield)
        finally:
            if before is not None and self.watch is not None:
                leak = self.watch.imported(collector.nodeid, before)
                if leak is not None:
                    self.leaked.append(leak)
                    self.findings.append(leak_finding(leak, Location(collector.nodeid, None)))

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Generator[None, object, object]:
        self.index += 1
        nodeid = item.nodeid
        run = self.running = _Running(nodeid, self.index, threading.current_thread())
        self.where, self.phase = nodeid, "setup"
        self.progress.start(shown_id(self.config, nodeid), run.index)
        # A fleet's worker compares as the teardown report is logged, inside pytest's own warnings context: it takes
        # its snapshot inside that context too (pytest_runtest_logstart), or pytest's filters would read as a leak.
        self.before = self.watch.before_test() if self.watch and self.progress.outbox is None else None
        try:
            return (yield)
        finally:
            self.conclude(run, item)

    def pytest_runtest_logstart(self, nodeid: str) -> None:
        if self.watch is not None and self.progress.outbox is not None and self.running is not None:
            self.before = self.watch.before_test()

    def conclude(self, run: _Running, item: pytest.Item) -> None:
        """After teardown: compare, name this test as the cause, restore if asked; then write its finish line.

        Called once per test, at the end of its protocol or (in a fleet's worker) as its teardown report is
        logged, so that the line can travel with that report.
        """
        if self.running is not run:
            return
        if self.watch is not None and self.before is not None:
            path = getattr(item, "path", None)
            for leak in self.watch.check(item.nodeid, self.before, str(path) if path is not None else None):
                self.leaked.append(leak)
                self.findings.append(leak_finding(leak, outcomes.place(item.location)))
        self.before, self.running, self.phase = None, None, "between"
        run.requirements = item.stash.get(REQUIREMENTS, ())
        self._finish(run)

    @pytest.hookimpl(wrapper=True)
    def pytest_fixture_setup(self, fixturedef: pytest.FixtureDef[Any]) -> Generator[None, object, object]:
        self.fixtures.append(fixturedef.argname)
        if self.sites is not None:
            self.sites.fixture(fixturedef.argname, fixturedef.func)
        # A wider-scoped fixture's state is meant to outlast the test that first set it up.
        wide = self.watch is not None and self.before is not None and fixturedef.scope != "function"
        pre = self.watch.snapshot() if wide and self.watch else None
        try:
            return (yield)
        finally:
            self.fixtures.pop()
            if pre is not None and self.watch is not None and self.before is not None:
                self.watch.rebase(self.before, pre)
                fixturedef.addfinalizer(functools.partial(self._teardown_starts, fixturedef))

    def _teardown_starts(self, fixturedef: pytest.FixtureDef[Any]) -> None:
        # Registered after the fixture's own finalizers, so it runs before them (LIFO).
        if self.watch is not None and self.before is not None:
            self.pending[id(fixturedef)] = self.watch.snapshot()

    def pytest_fixture_post_finalizer(self, fixturedef: pytest.FixtureDef[Any]) -> None:
        pre = self.pending.pop(id(fixturedef), None)
        if pre is not None and self.watch is not None and self.before is not None:
            self.watch.rebase(self.before, pre)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> None:
        # Returns nothing, so pytest's own implementation still makes the report. A plain hook, not a
        # wrapper: it runs three times per test.
        run = self.running
        if run is None:
            return
        if call.when == "call":
            # The report is made on the thread that ran the test's call phase.
            run.thread = threading.current_thread()
        elif call.when == "setup" and call.excinfo is not None and run.fixture is None:
            run.fixture = failing_fixture(item, call.excinfo)
        excinfo = call.excinfo
        if excinfo is None and call.when == "call":
            # A unittest.TestCase's failure is caught by unittest and handed to `call` by pytest's own
            # makereport hook, which runs after this one: it is still waiting on the item.
            pending = getattr(item, "_excinfo", None)
            excinfo = pending[0] if isinstance(pending, list) and pending else None
        if excinfo is not None and run.site is None and not excinfo.errisinstance(_NOT_FAILURES):
            run.site = failure_site(excinfo.value, self.config.rootpath)

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        run = self.running
        if run is None or report.nodeid != run.nodeid:
            return
        context = outcomes.subtest_context(report)
        if context is not None:
            self._subtest(run, report, context)
            return
        run.reported = True
        run.duration_s += report.duration
        run.outcome = outcomes.combine(run.outcome, report)
        if report.failed:
            self._failure(report.nodeid, report.longreprtext, run.failure, outcomes.place(report.location))
        elif report.skipped:
            run.skip_reason = outcomes.skip_reason(report)

    def _subtest(self, run: _Running, report: pytest.TestReport, context: Any) -> None:
        nodeid = f"{run.nodeid} {outcomes.subtest_description(report, context)}"
        # The same subTest context can repeat (a loop without parameters): number the repeats.
        seen = run.subtest_ids[nodeid] = run.subtest_ids.get(nodeid, 0) + 1
        nodeid += f" #{seen}" if seen > 1 else ""
        outcome = outcomes.phase_outcome(report)
        failure: list[str] = []
        if report.failed:
            run.failed_subtests += 1
            self._failure(nodeid, report.longreprtext, failure, outcomes.place(report.location))
        skipped = outcomes.skip_reason(report) if outcome in ("skipped", "xfailed") else None
        run.subtests.append(self._record(run, nodeid, outcome, report.duration, failure, skipped))

    def _failure(self, subject: str, text: str, into: list[str], location: Location | None) -> None:
        into.append(text)
        if self.streams is not None:
            self.findings += self.streams.findings(subject, text, location)

    def _record(
        self,
        run: _Running,
        nodeid: str,
        outcome: str,
        duration_s: float,
        failure: list[str],
        skip_reason: str | None,
    ) -> TestRecord:
        top = nodeid == run.nodeid
        # Only a red test's own record says what raised (a subtest's failure is its own report's).
        site = run.site if top and failure else None
        return TestRecord(
            nodeid=shown_id(self.config, nodeid, run.nodeid),
            outcome=outcome,
            duration_s=round(duration_s, 6),
            worker=self.worker,
            index=run.index,
            thread_name=run.thread.name,
            thread_id=run.thread.ident or 0,
            parent=shown_id(self.config, run.nodeid) if nodeid != run.nodeid else None,
            longrepr=outcomes.truncate("\n\n".join(failure)) if failure else None,
            skip_reason=skip_reason,
            requirements=run.requirements if top else (),
            fixture=run.fixture if top else None,
            excerpt=excerpt("\n\n".join(failure)) if failure else None,
            raised=site[0] if site else None,
            raised_at=site[1] if site else None,
            raised_own=site[2] if site else False,
        )

    def _finish(self, run: _Running) -> None:
        if not run.reported:
            self.progress.finish(shown_id(self.config, run.nodeid), run.index, "unreported")
            return
        outcome = run.outcome or "passed"
        if outcomes.failed_by_subtests(outcome, run.failed_subtests):
            outcome = "failed"
            plural = "s" if run.failed_subtests > 1 else ""
            run.failure.append(f"contains {run.failed_subtests} failed subtest{plural}")
        skipped = run.skip_reason if outcome in ("skipped", "xfailed") else None
        record = self._record(run, run.nodeid, outcome, run.duration_s, run.failure, skipped)
        self.records += [record, *run.subtests]
        # The same records and findings go to the progress log, which outlives a worker that dies later.
        if self.flushed == len(self.findings) and not run.subtests and plain_pass(record, self.main_thread_id):
            self.progress.finish_passed(record.nodeid, run.index, record.duration_s)
            return
        fresh, self.flushed = self.findings[self.flushed :], len(self.findings)
        # Its leaks as data too: a worker that dies later still has them grouped with the other workers'.
        leaked, self.leaks_flushed = self.leaked[self.leaks_flushed :], len(self.leaked)
        self.progress.finish(
            record.nodeid,
            run.index,
            outcome,
            records=[r.to_json() for r in (record, *run.subtests)],
            findings=[f.to_json() for f in fresh],
            leaked=[leak.to_json() for leak in leaked],
        )

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, exitstatus: int) -> None:
        if self.mlx_probes is not None and (untracked := self.mlx_probes.untracked()):
            message = (
                "MLX state was changed behind the functions promote follows, so no test was "
                f"named for it: {'; '.join(untracked)}"
            )
            self.findings.append(Finding("leaked-state", "warning", "mlx", message))
        results = WorkerResults(
            worker=self.worker,
            pid=os.getpid(),
            python=platform.python_version(),
            mlx=getattr(self.mx, "__version__", None) if self.mx else None,
            leaks=self.leaks,
            started_at=self.started_at,
            finished_at=time.time(),
            exitstatus=int(exitstatus),
            probe_us_per_test=self.watch.us_per_test() if self.watch else None,
            random_draws=self.watch.used.get(RANDOM_PROBE, 0) if self.watch else 0,
            tests=tuple(self.records),
            deselected=tuple(shown_id(self.config, nodeid) for nodeid in dict.fromkeys(self.deselected)),
            streams=tuple(self.streams.records.values()) if self.streams else (),
            findings=tuple(self.findings),
            leaked=tuple(self.leaked),
            random_draws_restored=self.watch.ordinary.get(RANDOM_PROBE, 0) if self.watch else 0,
            pytest=pytest.__version__,
            **chosen_configuration(self.config),
        )
        write_results(self.out_dir, results)

    def pytest_unconfigure(self) -> None:
        if self.streams is not None:
            self.streams.uninstall()
        if self.mlx_probes is not None:
            self.mlx_probes.uninstall()
        for seeded in self.seeded:
            seeded.uninstall()
        if self.thread_starts is not None:
            self.thread_starts.uninstall()
        self.progress.close()
