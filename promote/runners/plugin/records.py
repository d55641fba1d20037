"""What the pytest plugin writes per worker process, and how the runner reads it back."""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from promote.core import state
from promote.core.findings import Finding
from promote.core.redact import current as current_redactor
from promote.core.vocab import IMPORT, LeakPhase

SCHEMA = 1
_NESTED = ("tests", "streams", "findings", "leaked", "deselected")


def results_path(out_dir: Path, worker: str) -> Path:
    """Where `worker` ("main", "gw0", ...) writes its results at session end."""
    return out_dir / f"results-{worker}.json"


def progress_path(out_dir: Path, worker: str) -> Path:
    """Where `worker` appends a line as each test starts and finishes."""
    return out_dir / f"progress-{worker}.jsonl"


@dataclass(frozen=True)
class TestRecord:
    """One test (or one subtest) as it ran: outcome, where, when and on which thread."""

    __test__ = False  # a data class, not something for pytest to collect

    nodeid: str
    outcome: str
    duration_s: float
    worker: str
    index: int
    thread_name: str
    thread_id: int
    parent: str | None = None
    longrepr: str | None = None
    skip_reason: str | None = None
    # What the test declared with `@pytest.mark.requires`, e.g. ("checkpoint:x", "device:metal").
    requirements: tuple[str, ...] = ()
    # The fixture (file::name) whose setup failed or skipped the test.
    fixture: str | None = None
    # The failure's exception lines, failing lines and frame arguments, kept whole where longrepr is cut.
    excerpt: str | None = None
    # The last lines a module printed before it failed to be collected (often what it lacks).
    output: str | None = None
    # For a module that failed to be collected: the line of it that raised, when the error went through it.
    line: int | None = None
    # For a red test: the type of what raised, and the innermost line of the project's code it went through
    # (`path:line` relative to the rootdir); failures with both the same are one group of one cause.
    raised: str | None = None
    raised_at: str | None = None
    raised_own: bool = False  # `raised_at` is the project's own code (else a library's: its last two path parts)

    def to_json(self) -> dict[str, Any]:
        # The instance's own dict (json writes its tuples as lists): asdict's deep copy costs
        # more than the rest of the recording, once per test in every worker.
        return self.__dict__

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> TestRecord:
        """Parse one entry of `tests` (keys added later may be missing)."""
        if d.keys() == _TEST_RECORD_KEYS:
            # Written by this version (the usual case, once per test after every run): the dict is the
            # instance's own, as `to_json` gave it, so it is taken as is rather than set field by field
            # through the frozen __init__ (a third of the time promote spends reading results).
            record = object.__new__(cls)
            record.__dict__.update(d, requirements=tuple(d["requirements"]))
            return record
        known: dict[str, Any] = {k: d[k] for k in cls.__dataclass_fields__ if k in d}
        known["requirements"] = tuple(known.get("requirements", ()))
        return cls(**known)


_TEST_RECORD_KEYS = TestRecord.__dataclass_fields__.keys()


@dataclass(frozen=True)
class StreamRecord:
    """Who made an MLX stream: the test (or collector) running, its phase, fixture and thread."""

    device: str
    index: int
    created_by: str | None
    phase: str
    thread_name: str
    thread_id: int
    fixture: str | None = None

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> StreamRecord:
        """Parse one entry of `streams`."""
        known: dict[str, Any] = {k: d[k] for k in cls.__dataclass_fields__ if k in d}
        return cls(**known)


@dataclass(frozen=True)
class Origin:
    """Code outside a test that changed global state while it ran: a call's line, or a fixture's definition.

    `path` is relative to the rootdir when `inside`, else to the import root it was loaded from (site-packages).
    `function`: the function that made the call, or the fixture's name when `fixture`.
    `start`: the first line of that function's code (0: a fixture, or a record from before it was kept).
    """

    path: str
    line: int
    function: str
    inside: bool = False
    fixture: bool = False
    start: int = 0

    @property
    def site(self) -> tuple[str, str, int, bool, bool]:
        """The call site as one cause: the function (or fixture), whichever of its lines made the call.

        A helper that seeds `random`, numpy and MLX one line after another is one thing to fix, not three.
        """
        return self.path, self.function, self.start, self.inside, self.fixture

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Origin:
        inside, fixture, start = bool(d.get("inside")), bool(d.get("fixture")), int(d.get("start", 0))
        return cls(str(d["path"]), int(d["line"]), str(d["function"]), inside, fixture, start)

    def __str__(self) -> str:
        if self.fixture:
            return f"fixture {self.function} ({self.path}:{self.line})"
        return f"{self.path}:{self.line} ({self.function})"


@dataclass(frozen=True)
class LeakRecord:
    """One test's leaked state: what changed from what to what (as shown), and what was put back."""

    test: str
    changes: tuple[tuple[str, str, str], ...]  # (what, before, after)
    restored: tuple[str, ...] = ()  # the probes put back before the next test
    unrestored: tuple[str, ...] = ()  # the probes that could not be put back (and why)
    # "import": `test` is a module that changed the state while pytest imported it to collect it.
    phase: LeakPhase = "test"
    # Per change, the resource (the probe's name) and the kind of change ("set", "seed call"): for grouping.
    kinds: tuple[tuple[str, str], ...] = ()
    # The code outside the test that made these changes (None: the test's own code, or not known).
    origin: Origin | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "origin": None if self.origin is None else self.origin.to_json(),
            "test": self.test,
            "changes": [list(c) for c in self.changes],
            "restored": list(self.restored),
            "unrestored": list(self.unrestored),
            "phase": self.phase,
            "kinds": [list(k) for k in self.kinds],
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> LeakRecord:
        """Parse one entry of `leaks`."""
        changes = tuple((str(k), str(b), str(a)) for k, b, a in d["changes"])
        phase: LeakPhase = IMPORT if d.get("phase") == IMPORT else "test"
        kinds = tuple((str(r), str(k)) for r, k in d.get("kinds", ()))
        restored, unrestored = tuple(d.get("restored", ())), tuple(d.get("unrestored", ()))
        origin = Origin.from_json(d["origin"]) if isinstance(d.get("origin"), dict) else None
        return cls(str(d["test"]), changes, restored, unrestored, phase, kinds, origin)


@dataclass(frozen=True)
class WorkerResults:
    """Everything one worker process recorded during its session."""

    worker: str
    pid: int
    python: str
    mlx: str | None
    leaks: str
    started_at: float
    finished_at: float
    exitstatus: int
    probe_us_per_test: float | None
    tests: tuple[TestRecord, ...] = ()
    streams: tuple[StreamRecord, ...] = ()
    findings: tuple[Finding, ...] = field(default=())
    # What each leaked-state finding of a test says, as data (the runner groups them by what changed).
    leaked: tuple[LeakRecord, ...] = ()
    # Tests that only drew numbers from MLX's global generator, under either policy (no finding).
    random_draws: int = 0
    # Tests that only drew numbers from MLX's global generator: its key put back, no finding.
    random_draws_restored: int = 0
    pytest: str | None = None  # the pytest that ran them (None: written by an older plugin)
    # pytest's rootdir and ini file as it chose them, relative to the directory it was started in
    # (None: written by an older plugin; `inifile` None also when pytest found no configuration).
    rootdir: str | None = None
    inifile: str | None = None
    deselected: tuple[str, ...] = ()  # collected, and left out by the package's own options (-k, -m, --deselect)

    def to_json(self) -> dict[str, Any]:
        """The on-disk form (`schema` 1)."""
        d = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in _NESTED}
        return {
            "schema": SCHEMA,
            **d,
            "tests": [t.to_json() for t in self.tests],
            "streams": [asdict(s) for s in self.streams],
            "findings": [f.to_json() for f in self.findings],
            "leaked": [leak.to_json() for leak in self.leaked],
            "deselected": list(self.deselected),
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> WorkerResults:
        """Parse the on-disk form."""
        if d.get("schema") != SCHEMA:
            raise ValueError(f"unsupported results schema {d.get('schema')!r}")
        # A scalar added later (with a default) may be missing from a file an older plugin wrote.
        scalars = {k: d[k] for k in cls.__dataclass_fields__ if k not in _NESTED and k in d}
        return cls(
            **scalars,
            tests=tuple(TestRecord.from_json(t) for t in d["tests"]),
            streams=tuple(StreamRecord.from_json(s) for s in d["streams"]),
            findings=tuple(Finding.from_json(f) for f in d["findings"]),
            leaked=tuple(LeakRecord.from_json(leak) for leak in d.get("leaked", ())),
            deselected=tuple(str(n) for n in d.get("deselected", ())),
        )


def write_atomic(target: Path, text: str) -> Path:
    """Write `text` to `target` whole or not at all (temp file + rename): a reader never sees half a file."""
    try:
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    except OSError as e:
        raise state.StateError(f"cannot write {target}: {e.strerror or e}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, target)
    except BaseException as e:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(e, OSError):  # a full disk: one line naming the file, not a traceback
            raise state.StateError(f"cannot write {target}: {e.strerror or e}") from None
        raise
    return target


def write_results(out_dir: Path, results: WorkerResults) -> Path:
    """Write `results` atomically, so a reader never sees half a file."""
    state.private_dir(out_dir)
    # dumps, not dump: only a one-shot encode uses json's C encoder (several times faster).
    data = results.to_json()
    text = json.dumps(data, separators=(",", ":"))
    # Secrets (token shapes, values of the package's env and of secret-looking variables): one search of the
    # text, and only a file that holds one is encoded again with each string redacted.
    redactor = current_redactor()
    if redactor.search(text):
        text = json.dumps(redactor.data(data), separators=(",", ":"))
    return write_atomic(results_path(out_dir, results.worker), text)


class ResultsUnreadable(ValueError):
    """A results file that is not what the plugin writes (damaged, or written by something else)."""


def read_results(path: Path) -> WorkerResults:
    """Read one `results-<worker>.json`; ResultsUnreadable for what it holds, OSError for the file."""
    try:
        return WorkerResults.from_json(json.loads(path.read_text(encoding="utf-8")))
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as e:
        raise ResultsUnreadable(f"{path}: not a results file promote's plugin wrote ({type(e).__name__})") from None


def read_all_results(out_dir: Path) -> list[WorkerResults]:
    """Read every worker's results in `out_dir`, in worker-name order."""
    return [read_results(p) for p in sorted(out_dir.glob("results-*.json"))]


def plain_pass(record: TestRecord, main_thread_id: int) -> bool:
    """Whether `record` is what `summary.recovered` rebuilds from a short finish line (see ProgressLog)."""
    return (
        record.outcome == "passed"
        and record.thread_id == main_thread_id
        and record.parent is None
        and record.longrepr is None
        and record.skip_reason is None
        and not record.requirements
        and record.fixture is None
        and record.excerpt is None
        and record.output is None
        and record.line is None
    )
