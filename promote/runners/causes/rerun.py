"""Rerun chosen tests of a package, in a given order, in a fresh pytest process (for bisecting)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from promote.config import PackageConfig
from promote.core import state
from promote.core.errors import PromoteError
from promote.core.policies import OFF
from promote.core.process import telling_line
from promote.core.vocab import is_red
from promote.runners.package import PLUGIN, POLL_S, Watch, environment, serial_options
from promote.runners.plugin.forked import read_marker
from promote.runners.plugin.progress import unfinished
from promote.runners.plugin.records import TestRecord, progress_path, read_all_results, read_results, results_path

# Start-up and collection of a rerun, on top of `timeout_s` for each test it runs.
START_SLACK_S = 60.0
_COLLECTING = re.compile(r"^_+ ERROR collecting (.+?) _+$")
_FRAME = re.compile(r'^\s*File "(.+)", line (\d+) in (.+)$')
# Frames of a fatal-error dump shown with a crash (the innermost first).
FRAMES = 3


class RerunError(PromoteError):
    """A rerun could not say whether the test failed (pytest could not run it at all)."""


class RerunTimeout(RerunError):
    """The test itself ran past the package's timeout in a rerun, and was killed."""


@dataclass(frozen=True)
class Ran:
    """How one rerun process ended: its exit status, and the tests killed for running too long."""

    status: int
    log: Path
    timed_out: tuple[str, ...] = ()
    # The whole process ran past its bound (e.g. stuck while importing, before any test started).
    overran: bool = False


@dataclass(frozen=True)
class Seen:
    """What one selection of a request showed about its victim."""

    failed: bool
    signal: str | None = None  # the process died of this signal (e.g. SIGSEGV) while the victim ran
    frames: tuple[str, ...] = ()  # the innermost frames of its fatal-error dump, `file:line in function`
    timed_out: bool = False  # the victim itself ran past the package's timeout and was killed


def fatal_frames(log: Path, root: Path) -> tuple[str, ...]:
    """The innermost frames of the current thread in a faulthandler dump (paths relative to `root` inside it)."""
    try:
        text = log.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ()
    current = text[text.find("Current thread") :] if "Current thread" in text else text
    frames = []
    for line in current.splitlines():
        match = _FRAME.match(line)
        if match:
            path = Path(match.group(1))
            # Outside the package, the library's own folder and file (`ctypes/__init__.py`) tell where.
            shown = path.relative_to(root).as_posix() if path.is_relative_to(root) else "/".join(path.parts[-2:])
            frames.append(f"{shown}:{match.group(2)} in {match.group(3).strip()}")
        elif frames:
            break
    return tuple(frames[:FRAMES])


def signal_name(number: int | None) -> str | None:
    if number is None or number <= 0:
        return None
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def why_not_run(log: Path, status: int) -> str:
    """The one line of a pytest log that says why tests did not run (a collection error, an internal error)."""
    try:
        text = log.read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        match = _COLLECTING.match(line.strip())
        if match:
            # The exception pytest shows for the module is its first `E   ` line.
            cause = next((x[1:].strip() for x in lines[i + 1 :] if x.startswith("E   ")), "")
            return f"ERROR collecting {match.group(1)}" + (f": {cause}" if cause else "")
    internal = telling_line(text, starts=("INTERNALERROR>",), marked=True)
    if internal:
        return f"exit {status}: INTERNALERROR {internal.removeprefix('INTERNALERROR>').strip()}"
    error = telling_line(text, starts=("ERROR:", "ERROR "), first=True, marked=True)
    # pytest's summary lines are framed in "=" signs; the words inside them are what it said.
    last = telling_line("\n".join(x.strip(" =") for x in lines))
    return f"exit {status}: {error or last or 'no output'}"


def judged_failed(records: Sequence[TestRecord], test: str) -> bool | None:
    """Whether `test` failed as the first run judges it (itself or one of its subtests); None: it did not run."""
    mine = [t for t in records if (t.parent is None and t.nodeid == test) or t.parent == test]
    if not any(t.parent is None for t in mine):
        return None
    return any(is_red(t.outcome) for t in mine)


class Rerunner:
    """Runs `prefix + [victim]` in a new process each time; every rerun keeps its own directory.

    Safe to use from several threads at once: each rerun gets its own numbered directory.
    """

    def __init__(self, pkg: PackageConfig, python: str, base: Path, station: Path | None = None) -> None:
        self.pkg = pkg
        self.python = python
        self.base = base
        # The same station inventory as the run: a test it cannot run is skipped in reruns too.
        self.station = station
        self.invocations = 0
        self._lock = threading.Lock()
        self._stopped = threading.Event()

    def stop(self) -> None:
        """Kill the reruns under way and refuse new ones (the caller is being interrupted)."""
        self._stopped.set()

    def next_dir(self, name: str | None = None) -> Path:
        if self._stopped.is_set():
            raise RerunError(f"the reruns of {self.pkg.name} were stopped")
        with self._lock:
            self.invocations += 1
            out_dir = self.base / (name or f"rerun-{self.invocations:03d}")
        with own_files():
            state.private_dir(out_dir)
        return out_dir

    def pytest(self, out_dir: Path, *options: str, tests: int | None = None) -> Ran:
        """One rerun: the whole package collected as the run collected it, only the chosen tests selected.

        Collection is part of the order: every module is imported, as in the run (pytest imports all of
        them before the first test), so state a module sets when imported is set in the rerun too.
        Options are `--name=value` words and no path is given, so pytest reads the package's own
        configuration from the same rootdir (promote.runners.package).
        """
        cmd, env = self.command(out_dir, options)
        log = out_dir / "pytest.log"
        with own_files():
            sink = state.open_private_log(log)
        with sink:
            # Its own session: a test killed for its time takes the processes it started with it.
            proc = subprocess.Popen(
                cmd,
                cwd=self.pkg.path,
                env=env,
                stdout=sink,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        try:
            return self._follow(proc, out_dir, log, tests)
        finally:
            if proc.poll() is None:
                _kill_group(proc)

    def command(self, out_dir: Path, options: Sequence[str]) -> tuple[list[str], dict[str, str]]:
        """The pytest command of one rerun here, and its environment."""
        cmd = [
            self.python, "-m", "pytest", "-p", "no:promote", "-p", PLUGIN,
            # One process, serial, and leaks left in place: otherwise the polluter could not pollute.
            *serial_options(self.pkg, self.python), "-p", "no:cacheprovider", "-q",
            # A module elsewhere that fails to import must not stop the tests asked for.
            "--continue-on-collection-errors",
            *options, *self.pkg.args,
        ]  # fmt: skip
        if self.station is not None:
            cmd.append(f"--promote-station={self.station}")
        return cmd, environment(self.pkg, self.python)

    def _follow(self, proc: subprocess.Popen[bytes], out_dir: Path, log: Path, tests: int | None) -> Ran:
        """Wait for the rerun, killing it (and its process group) once a test or the whole run overruns."""
        timeout = self.pkg.timeout_s
        watch = Watch(out_dir, timeout)
        bound = None if timeout is None or tests is None else time.monotonic() + timeout * (tests + 1) + START_SLACK_S
        overran = False
        while proc.poll() is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=POLL_S)
            watch.poll()
            overran = bound is not None and time.monotonic() > bound
            if watch.timed_out or overran or self._stopped.is_set():
                _kill_group(proc)
        watch.poll()
        return Ran(int(proc.returncode), log, tuple(watch.timed_out), overran)

    def run_through(self, victim: str) -> tuple[list[str], bool] | None:
        """Run the package in collection order up to `victim`: (the tests before it, whether it failed).

        One process both learns the order and sees whether the whole prefix makes the victim fail;
        None when the package has no such test.
        """
        out_dir = self.next_dir("through")
        self.pytest(out_dir, *rerun_options(out_dir, f"--promote-until={victim}"))
        records = [t for r in read_all_results(out_dir) for t in r.tests]
        order = [t.nodeid for t in sorted(records, key=lambda t: t.index) if t.parent is None and t.index > 0]
        if victim not in order:
            return None
        return order[: order.index(victim)], bool(judged_failed(records, victim))

    def run_in_order(self, tests: Sequence[str], name: str) -> list[TestRecord]:
        """Run `tests` in this order in one fresh process, nothing restored; what each did."""
        out_dir = self.next_dir(name)
        select = out_dir / "select.txt"
        with own_files():
            state.write_private(select, "".join(f"{t}\n" for t in tests))
        self.pytest(
            out_dir,
            *rerun_options(out_dir, f"--promote-select={select}"),
            tests=len(tests),
        )
        return [t for r in read_all_results(out_dir) for t in r.tests]

    def observe(
        self, selections: Sequence[Sequence[str]], victim: str, *, ignore: Sequence[str] = (), only: str | None = None
    ) -> tuple[list[Seen], int]:
        """Each selection then `victim`, each in a fresh process; what each showed, and the pytest calls it took.
        `only`: collect that module alone (as `pytest MODULE` does), not the whole package.

        One call when the plugin may fork the selections from one collected session (one after another); where it
        may not, the first runs in that call and each other one in a call of its own.
        """
        out_dir = self.next_dir()
        chosen = [[*s, victim] for s in selections]
        with own_files():
            path = state.write_private(out_dir / "selections.json", json.dumps(chosen))
        options = [f"--promote-selections={path}"]
        if ignore:
            with own_files():
                ignored = state.write_private(out_dir / "ignore.txt", "".join(f"{m}\n" for m in ignore))
            options.append(f"--promote-ignore={ignored}")
        if only is not None:
            options.append(f"--promote-only={only}")
        done = self.pytest(out_dir, *rerun_options(out_dir, *options), tests=sum(map(len, chosen)))
        marker = read_marker(out_dir)
        if marker is None:
            raise RerunError(f"{victim} did not run in a rerun of {self.pkg.name}: {self._why(done)} (log: {done.log})")
        forked = marker.get("forked") is True
        ended = marker.get("ended")
        ended = ended if isinstance(ended, dict) else {}
        seen, calls = [self.seen(out_dir, "s0", victim, done, _signal_of(ended, 0, done, forked))], 1
        for i in range(1, len(chosen)):
            if not forked:
                more, n = self.observe([selections[i]], victim, ignore=ignore, only=only)
                seen, calls = seen + more, calls + n
            else:
                seen.append(self.seen(out_dir, f"s{i}", victim, done, _signal_of(ended, i, done, forked)))
        return seen, calls

    def seen(self, out_dir: Path, worker: str, victim: str, done: Ran, died_of: str | None) -> Seen:
        path = results_path(out_dir, worker)
        records = list(read_results(path).tests) if path.is_file() else []
        failed = judged_failed(records, victim)
        if failed is not None:
            return Seen(failed)
        lost = unfinished(progress_path(out_dir, worker))
        if victim in done.timed_out or (done.overran and victim in lost):
            return Seen(True, timed_out=True)
        if victim in lost:
            # The process died while running it: a failure too, with what killed it.
            return Seen(True, died_of, fatal_frames(out_dir / f"fatal-{worker}.log", self.pkg.path))
        raise RerunError(f"{victim} did not run in a rerun of {self.pkg.name}: {self._why(done)} (log: {done.log})")

    def _why(self, done: Ran) -> str:
        if done.timed_out:
            return f"{done.timed_out[0]} ran longer than the timeout ({self.pkg.timeout_s:g} s) before it"
        if done.overran:
            return f"the rerun ran longer than its bound and was killed ({why_not_run(done.log, done.status)})"
        return why_not_run(done.log, done.status)

    def fails(self, prefix: Sequence[str], victim: str, *, ignore: Sequence[str] = (), only: str | None = None) -> bool:
        """Run `prefix` then `victim` in one fresh process; True when the victim failed (or died).

        `ignore`: modules (ids relative to the rootdir) left out of collection, so never imported.
        Raises RerunTimeout when the victim itself ran past the timeout, RerunError when it did not run.
        """
        [seen], _ = self.observe([prefix], victim, ignore=ignore, only=only)
        if seen.timed_out:
            raise RerunTimeout(
                f"{victim} ran longer than the package's timeout ({self.pkg.timeout_s:g} s) and was killed"
            )
        return seen.failed


@contextlib.contextmanager
def own_files() -> Iterator[None]:
    """A rerun whose own files cannot be written (a full disk) cannot tell: the run's results still stand."""
    try:
        yield
    except state.StateError as e:
        raise RerunError(f"the rerun could not write its files: {e}") from None


def rerun_options(out_dir: Path, *more: str) -> tuple[str, ...]:
    """promote's options for a rerun into `out_dir`, nothing restored (each a single `--name=value` word)."""
    return (f"--promote-out={out_dir}", f"--promote-leaks={OFF}", *more)


def _signal_of(ended: dict[str, object], i: int, done: Ran, forked: bool) -> str | None:
    """The signal that ended selection `i`'s process: a forked child's from the marker, else the rerun's own."""
    if not forked:
        return signal_name(-done.status) if done.status < 0 else None
    child = ended.get(str(i))
    number = child.get("signal") if isinstance(child, dict) else None
    return signal_name(number) if isinstance(number, int) else None


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
