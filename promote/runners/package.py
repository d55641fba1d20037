"""Run one test package as `python -m pytest` processes with the promote plugin loaded.

A package with `workers > 1` runs as two processes side by side: its serial tests on one
worker, the rest over `workers` pytest-xdist workers. (xdist's own `loadgroup` stalls when a
worker dies, so the split is ours.) Workers are spawned by execnet, never forked, and a dead
worker is replaced so the rest of the package still runs.

A package with `workers = 1`, or whose own options disable xdist (`-p no:xdist`), runs as plain
pytest processes, as `cd PACKAGE && python -m pytest` runs it: in-process, on the main thread,
its options as they are. When one dies under a test, the next starts without the tests already
finished or died in, so the rest still runs and the dead one is named, as under xdist.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import promote
from promote.config import PackageConfig
from promote.core import state
from promote.core.process import run_bounded
from promote.core.redact import PACKAGE_ENV_NAMES
from promote.runners.configuration import OwnOptions, own_options
from promote.runners.plugin import progress
from promote.runners.plugin.records import progress_path

# Loaded by module path, so the plugin works in a package's own virtualenv without promote installed.
PLUGIN = "promote.runners.plugin.hooks"
POLL_S = 0.25
# Plain pytest processes one package may start, each after the last died under a test (xdist's own bound).
MAX_RESTARTS = 1000

# (package, tests finished, tests collected, whether the package has ended)
ProgressCallback = Callable[[str, int, int, bool], None]


@dataclass(frozen=True)
class ProcessOutcome:
    """How one pytest process of a package ended, and which tests it had to kill for running too long."""

    part: str
    out_dir: Path
    command: tuple[str, ...]
    status: int
    duration_s: float
    log: Path
    timed_out: tuple[str, ...] = ()
    # (test id, worker) of tests whose worker died under them, as the watcher saw it; None: not watched.
    crashed: tuple[tuple[str, str], ...] | None = None
    workers: int = 1  # the pytest-xdist workers it ran on (1: serially, in one process)
    asked: int = 1  # the workers configured for the package
    xdist_blocked: str | None = None  # where the package's own options say `-p no:xdist`, when they do


def command(
    pkg: PackageConfig,
    out_dir: Path,
    *,
    python: str,
    leaks: str,
    part: str,
    workers: int,
    extra: tuple[str, ...] = (),
    station: Path | None = None,
    xdist: bool = True,
    resume: tuple[str, Path] | None = None,
) -> list[str]:
    """The pytest command line for one part ("all", "serial" or "parallel") of a package.

    `xdist=False`: one plain pytest process (workers = 1 where pytest-xdist is not installed);
    `resume`: (its worker name, a file of the test ids to leave out) for the one after a death.
    """
    # `no:promote` first: where promote is installed, its entry point would load the plugin a second time.
    cmd = [python, "-m", "pytest", "-p", "no:promote", "-p", PLUGIN]
    # Every option of ours as one `--name=value` word and no positional path: pytest picks its rootdir and
    # ini file from the command line's paths before plugin options are known, so a separate value (a
    # directory under .promote/) would be taken for a test path and move the search to the repository's
    # root. Run from the package's directory like this, pytest finds what `cd PACKAGE && pytest` finds.
    cmd += [
        f"--promote-out={out_dir}",
        f"--promote-leaks={leaks}",
        f"--promote-part={part}",
        "-p", "no:cacheprovider",
        # A module that cannot be imported must not stop the others (xdist's workers go on; pytest alone would not).
        "--continue-on-collection-errors",
        "-q",
    ]  # fmt: skip
    if xdist:
        cmd += [f"--numprocesses={workers}", "--dist=load", f"--max-worker-restart={MAX_RESTARTS}"]
    if resume is not None:
        cmd += [f"--promote-worker={resume[0]}", f"--promote-skip={resume[1]}"]
    cmd += [f"--promote-serial={pattern}" for pattern in pkg.serial]
    if station is not None:
        cmd.append(f"--promote-station={station}")
    return cmd + list(pkg.args) + list(extra)


@functools.cache
def has_xdist(python: str) -> bool:
    """Whether `python` can import pytest-xdist (asked once per interpreter and run of promote)."""
    if python == sys.executable:
        return importlib.util.find_spec("xdist") is not None
    try:
        return run_bounded([python, "-c", "import xdist"], timeout=60).ok
    except OSError:
        return False  # it cannot even start: pytest's own run says why


def on_xdist(pkg: PackageConfig, own: OwnOptions) -> bool:
    """Whether promote runs `pkg` over xdist workers: more than one configured, and its options leave xdist on."""
    return pkg.workers > 1 and own.blocks("xdist") is None


def serial_options(pkg: PackageConfig, python: str) -> tuple[str, ...]:
    """The option that keeps one rerun in one process, whatever `-n` the package's own addopts give."""
    # `-n 0` rather than `-p no:xdist`, which would make a `-n` in its addopts an error; none where xdist is absent
    # or disabled by the package itself, where `-n` is no option at all.
    if not has_xdist(python) or own_options(pkg.path, pkg.args, environment(pkg, python)).blocks("xdist"):
        return ()
    return ("--numprocesses=0",)


def environment(pkg: PackageConfig, python: str) -> dict[str, str]:
    env = {**os.environ, **dict(pkg.env)}
    # The plugin redacts the values of these wherever they would be written (promote.core.redact).
    env[PACKAGE_ENV_NAMES] = ",".join(name for name, _ in pkg.env)
    if python != sys.executable:
        # A foreign interpreter finds the plugin (and only promote) on its path.
        src = str(Path(promote.__file__).resolve().parent.parent)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH", "")) if p)
    return env


class Watch:
    """Follows one process's progress logs: counts finished tests, kills a worker stuck past the timeout."""

    def __init__(self, out_dir: Path, timeout_s: float | None) -> None:
        self.out_dir = out_dir
        self.timeout_s = timeout_s
        self.tails: dict[Path, progress.LogTail] = {}
        self.timed_out: list[str] = []

    @property
    def finished(self) -> int:
        return sum(t.finished for t in self.tails.values())

    @property
    def total(self) -> int:
        # Every xdist worker collects the whole part, so any one count is the part's total.
        return max((t.collected for t in self.tails.values()), default=0)

    def crashed(self) -> tuple[tuple[str, str], ...]:
        """(test id, worker) of every test that was running when its process died; call after the process ends."""
        return tuple(
            (nodeid, path.stem.removeprefix("progress-"))
            for path, tail in sorted(self.tails.items())
            for nodeid in tail.unfinished()
        )

    def died(self, worker: str) -> bool:
        """Whether `worker`'s process died under a test (call after it ended)."""
        tail = self.tails.get(progress_path(self.out_dir, worker))
        return tail is not None and bool(tail.unfinished())

    def serial_left(self) -> bool:
        """Whether the parallel part left serial tests to run (True when it cannot tell: better run them)."""
        counts = [c for tail in self.tails.values() for c in tail.serial_left]
        return not counts or any(c is None or c > 0 for c in counts)

    def poll(self) -> None:
        for path in self.out_dir.glob("progress-*.jsonl"):
            tail = self.tails.setdefault(path, progress.LogTail())
            try:
                tail.read(path)
            except OSError:
                continue
            self._enforce_timeout(tail)

    def _enforce_timeout(self, tail: progress.LogTail) -> None:
        if self.timeout_s is None or tail.running is None or tail.pid is None:
            return
        nodeid, started = tail.running
        if nodeid not in self.timed_out and time.time() - started > self.timeout_s:
            self.timed_out.append(nodeid)
            # The worker dies mid-test; xdist replaces it and the test is named as unfinished.
            with contextlib.suppress(ProcessLookupError):
                os.kill(tail.pid, signal.SIGKILL)


class PackageRun:
    """One package's pytest processes: the first is started on construction, `finish` follows them to the end.

    Starting is split from following so that a caller can start a package and detect this station
    while its pytest starts up (the plugin waits for the station file only when a test needs it).
    """

    def __init__(
        self,
        pkg: PackageConfig,
        out_dir: Path,
        *,
        python: str,
        leaks: str,
        extra: tuple[str, ...] = (),
        station: Path | None = None,
        env: Mapping[str, str] | None = None,
        parts: Mapping[str, tuple[str, ...]] | None = None,
    ) -> None:
        self.pkg, self.out_dir, self.python, self.leaks, self.extra, self.station = (
            pkg, out_dir, python, leaks, extra, station
        )  # fmt: skip
        # `parts`: each part's own extra arguments, in order (a fleet's controller: its workers per part).
        self.part_extra = dict(parts or {})
        # `env`: set over the package's environment (a fleet's controller takes the package's args this way).
        self.env = {**environment(pkg, python), **(env or {})}
        self.started = time.monotonic()
        self.own = own_options(pkg.path, pkg.args, self.env)
        # More than one worker needs xdist: promote test refuses that before anything starts (runners.suite).
        self.xdist = on_xdist(pkg, self.own)
        self.phases = [("parallel", pkg.workers), ("serial", 1)] if self.xdist else [("all", 1)]
        if self.part_extra:
            self.phases = [(part, 1) for part in self.part_extra]
        self.stopped = False
        self.first = self._launch(*self.phases[0])
        self.current = self.first[0]

    def _launch(
        self, part: str, workers: int, resume: tuple[str, Path] | None = None
    ) -> tuple[subprocess.Popen[bytes], list[str], Path]:
        part_dir = self.out_dir / part
        state.private_dir(part_dir)
        cmd = command(
            self.pkg,
            part_dir,
            python=self.python,
            leaks=self.leaks,
            part=part,
            workers=workers,
            extra=self.extra,
            station=self.station,
            xdist=self.xdist,
            resume=resume,
        )
        cmd += self.part_extra.get(part, ())
        log = "pytest.log" if resume is None else f"pytest-{resume[0]}.log"
        with state.open_private_log(part_dir / log) as sink:
            proc = subprocess.Popen(
                cmd, cwd=self.pkg.path, env=self.env, stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        return proc, cmd, part_dir

    def stop(self) -> None:
        """End the running process and start no other, when the run is being given up (or cannot be followed)."""
        self.stopped = True
        proc = self.current
        if proc.poll() is None:
            proc.kill()
            proc.wait()

    def finish(self, on_progress: ProgressCallback | None = None) -> list[ProcessOutcome]:
        """Follow the processes to their end, reporting progress; never raises on test failures.

        With `workers > 1` the parallel part runs first; the serial part follows only when the
        parallel part's collection says it left serial tests (one more pytest process is not free).
        """
        done: list[ProcessOutcome] = []
        watches: list[Watch] = []
        for i, (part, workers) in enumerate(self.phases):
            # The watcher has read the parallel part's logs to their end: no need to read them again.
            if i > 0 and (self.stopped or not watches[-1].serial_left()):
                break
            proc, cmd, part_dir = self.first if i == 0 else self._launch(part, workers)
            watch = Watch(part_dir, self.pkg.timeout_s)
            watches.append(watch)
            status = self._follow(proc, watch, watches, on_progress)
            # Without xdist nothing replaces a process that died under a test: start the next one here.
            restarts, worker, log = 0, "main", part_dir / "pytest.log"
            while not self.xdist and not self.stopped and restarts < MAX_RESTARTS and watch.died(worker):
                restarts += 1
                worker = f"main.{restarts}"
                proc, _, _ = self._launch(part, workers, (worker, _write_started(part_dir, restarts)))
                status = self._follow(proc, watch, watches, on_progress)
                log = part_dir / f"pytest-{worker}.log"
            elapsed = time.monotonic() - self.started
            outcome = ProcessOutcome(
                part,
                part_dir,
                tuple(cmd),
                status,
                elapsed,
                log,
                tuple(watch.timed_out),
                watch.crashed(),
                workers,
                self.pkg.workers,
                self.own.blocks("xdist"),
            )
            done.append(outcome)
        if on_progress is not None:
            on_progress(self.pkg.name, *counts(watches), True)
        return done

    def _follow(
        self, proc: subprocess.Popen[bytes], watch: Watch, watches: list[Watch], on_progress: ProgressCallback | None
    ) -> int:
        """Follow one pytest process to its end; its exit status."""
        self.current = proc
        if self.stopped:  # given up while this process was starting
            self.stop()
        last = -1
        while proc.poll() is None:
            # Waiting on the process (not sleeping) notices its end at once, not up to POLL_S later.
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=POLL_S)
            watch.poll()
            finished, total = counts(watches)
            if on_progress is not None and finished != last:
                on_progress(self.pkg.name, finished, total, False)
                last = finished
        watch.poll()
        return int(proc.returncode)


def _write_started(part_dir: Path, n: int) -> Path:
    """A file of every test a process of this part started (finished, or died in): the next leaves them out."""
    started = dict.fromkeys(
        str(e.nodeid)
        for path in sorted(part_dir.glob("progress-*.jsonl"))
        for e in progress.read_progress(path)
        if e.event == "start"
    )
    return state.write_private(part_dir / f"started-{n}.txt", "".join(f"{t}\n" for t in started))


def counts(watches: list[Watch]) -> tuple[int, int]:
    """(tests finished, tests collected) over a package's parts, never more finished than collected."""
    finished = sum(w.finished for w in watches)
    # A test run more often than collected (a rerun plugin, a replaced worker) makes the total grow with it.
    return finished, max(finished, sum(w.total for w in watches))
