"""The words promote decides with: every status, verdict and outcome, each spelled once, with its predicates.

Each is a `Literal`, so a branch over one is checked by mypy: end the chain with `assert_never(value)` and a
new value fails at type-check instead of falling through to the last case.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Final, Literal, NoReturn

if sys.version_info >= (3, 11):
    from typing import assert_never
else:  # pragma: no cover - Python 3.10 has no typing.assert_never

    def assert_never(value: NoReturn, /) -> NoReturn:
        raise AssertionError(f"unhandled value: {value!r}")


# --- One answer a check can give; `undecided` is an answer of its own, never a pass it did not see.
Undecided = Literal["undecided"]
UNDECIDED: Final = "undecided"

Status = Literal["pass", "fail", "undecided"]  # a check's or a gate's status
PASS: Final = "pass"
FAIL: Final = "fail"


def worst(statuses: Iterable[Status]) -> Status:
    """Fail beats undecided beats pass (nothing at all is a pass: no check said otherwise)."""
    seen = set(statuses)
    if FAIL in seen:
        return FAIL
    return UNDECIDED if UNDECIDED in seen else PASS


def is_decided(status: Status) -> bool:
    return status != UNDECIDED


# --- `promote check` and `promote merge`.
CheckVerdict = Literal["promotable", "blocked", "undecided"]
PROMOTABLE: Final = "promotable"
BLOCKED: Final = "blocked"

MergeVerdict = Literal["merged", "would-merge", "blocked", "partial", "undecided"]
MERGED: Final = "merged"
WOULD_MERGE: Final = "would-merge"
PARTIAL: Final = "partial"

MirrorState = Literal["up-to-date", "fast-forward", "diverged", "missing", "unreachable"]  # a mirror's trunk
UP_TO_DATE: Final = "up-to-date"
FAST_FORWARD: Final = "fast-forward"
DIVERGED: Final = "diverged"
MISSING: Final = "missing"
UNREACHABLE: Final = "unreachable"


def is_safe(state: MirrorState) -> bool:
    """A fast-forward to the candidate discards nothing on this mirror."""
    return state in (UP_TO_DATE, FAST_FORWARD)


# What a merge did to one mirror's trunk; `up-to-date` is the mirror's state carried over (nothing to push).
MergeMirrorState = Literal[
    "advanced", "rejected", "not-attempted", "unverified", "would-advance", "interrupted", "up-to-date"
]
ADVANCED: Final = "advanced"
REJECTED: Final = "rejected"
NOT_ATTEMPTED: Final = "not-attempted"
UNVERIFIED: Final = "unverified"
WOULD_ADVANCE: Final = "would-advance"
INTERRUPTED: Final = "interrupted"

# How trunk differs from what production serves (a drift that could not be read is `Undecided`).
DriftStatus = Literal["same", "test-only", "undeployed", "behind"]


def binary_unchanged(status: DriftStatus) -> bool:
    """What production runs is built from the same non-test files as the candidate."""
    return status in ("same", "test-only")


# --- Tests: one test's outcome as the records have it, and the counts a run keeps of them.
TestOutcome = Literal["passed", "failed", "error", "skipped", "xfailed", "xpassed", "crashed"]
RED: tuple[TestOutcome, ...] = ("failed", "error", "crashed")


# A collected test its pytest never started (it stopped first: its own --maxfail or -x, a death it could not go
# past): kept in the history as collected, so a stop is never read as tests gone from the package.
NotRun = Literal["not-run"]
NOT_RUN: Final[NotRun] = "not-run"


# Collected and left out by the package's own options (-k, -m, --deselect): never started, never missing.
Deselected = Literal["deselected"]
DESELECTED: Final[Deselected] = "deselected"

# A test's fate in a stored or published run: what its records say, or why it has none. One list, so the history's
# writer, the published page's `outcomes` and the shared history's reader cannot disagree on a word.
Fate = Literal[TestOutcome, "blocked", Deselected, NotRun]


def is_red(outcome: str | None) -> bool:
    """A red test: it failed, errored (setup or teardown) or crashed its worker."""
    return outcome in RED


# A package's counts: the records' words inside, the `--json` contract's keys outside (`error` -> `errors`).
Count = Literal["passed", "failed", "error", "skipped", "xfailed", "xpassed", "blocked", "crashed"]
CountKey = Literal["passed", "failed", "errors", "skipped", "xfailed", "xpassed", "blocked", "crashed"]
COUNT_KEYS: Final[dict[Count, CountKey]] = {
    "passed": "passed",
    "failed": "failed",
    "error": "errors",
    "skipped": "skipped",
    "xfailed": "xfailed",
    "xpassed": "xpassed",
    "blocked": "blocked",
    "crashed": "crashed",
}

# What a requirement makes of a test that did not pass (promote.runners.requirements): a module not installed,
# something no station and no CI job has, or something only some stations (or CI jobs) have.
Blocker = Literal["missing-package", "impossible-requirement", "station-bound"]
MISSING_PACKAGE: Final = "missing-package"
IMPOSSIBLE: Final = "impossible-requirement"
STATION_BOUND: Final = "station-bound"
BLOCKERS: tuple[Blocker, ...] = (IMPOSSIBLE, STATION_BOUND, MISSING_PACKAGE)
# How a package's pyproject.toml declares a module a test could not import: among its own dependencies, in an
# extra, nowhere, or unknown (no [project] table, or the list is dynamic).
Declaration = Literal["required", "extra", "undeclared", "unknown"]

# What reruns showed about one red test.
RerunVerdict = Literal["genuine", "crashes-alone", "order-dependent", "flaky", "undecided", "not-reproduced"]
GENUINE: Final = "genuine"
# Its process dies (a signal, e.g. SIGSEGV) when it runs alone: its own failure, never flaky.
CRASHES_ALONE: Final = "crashes-alone"
ORDER_DEPENDENT: Final = "order-dependent"
FLAKY: Final = "flaky"
NOT_REPRODUCED: Final = "not-reproduced"

# When a leak happened: while a test ran, or while pytest imported a module to collect it.
LeakPhase = Literal["test", "import"]
IMPORT: Final = "import"

# What the test plugin does about global state a test leaves changed (`off` is the runner's own, for reruns).
LeakPolicy = Literal["restore", "report", "off"]

# --- The CI audit: whether a command or job runs a test, and whether a job can run here at all.
CIVerdict = Literal["run", "dropped", "undecided"]
RUN: Final = "run"
DROPPED: Final = "dropped"
JobReach = Literal["runs", "never", "undecided"]
RUNS_HERE: Final = "runs"
NEVER: Final = "never"

# --- The repository's test inventory (promote.runners.inventory): who runs the tests it collected.
# package: a declared package ran them; ci: only a CI job does; ci-undecided: no package, and whether a CI job does
# could not be decided; nobody: no package and no CI job. Tests no package runs are `unowned-tests`.
Owner = Literal["package", "ci", "ci-undecided", "nobody"]
UNOWNED_TESTS: Final = "unowned-tests"
# Why the bounded reader of `pytest --collect-only -q` refused what pytest printed (promote.runners.collect_output).
CollectFault = Literal["size", "encoding", "summary", "count"]

# --- Accelerated paths.
AccelVerdict = Literal["holds", "broken", "undecided"]
ParityVerdict = Literal["identical", "within-tolerance", "differs", "error"]  # error: could not be decided
# measured: no target to meet; slower: the whole interval below 1.0, whatever the target.
BenchVerdict = Literal["met", "missed", "undecided", "measured", "slower", "error"]
# Where a bench's load figure came from: tasks runnable sampled during each run, or the 1-minute average.
LoadSource = Literal["runnable", "load-average"]
Better = Literal["higher", "lower"]  # which way a bench metric improves (tokens per second up, seconds down)
LedgerOutcome = Literal["served", "declined", "failed"]
AccelStep = Literal["switch", "parity", "bench", "sweep", "quality"]  # the runs `promote accel` makes for one path
# The paired yardstick against its margin; timed-out (partial output, counted and shown) and error never judge.
QualityVerdict = Literal["non-inferior", "inferior", "inconclusive", "timed-out", "error"]


def parity_holds(verdict: ParityVerdict) -> bool:
    return verdict in ("identical", "within-tolerance")


def quality_judged(verdict: QualityVerdict) -> bool:
    """The yardstick ran to its end and its interval was judged against the margin."""
    return verdict in ("non-inferior", "inferior", "inconclusive")


# Why the bounded JSON reader refused a document someone else wrote (promote.core.bounded_json): a bound it broke,
# or, for `type`, a value (or a published page's field) that does not hold what its reader expects.
JsonFault = Literal["syntax", "encoding", "size", "depth", "number", "type"]

# --- A test's story over the nights (promote.evidence.stories).
StoryKind = Literal["flaky-history", "never-ran", "red-streak"]  # a package that lost tests is a `Drop`, not a story

# --- Publishing the evidence page, and a finding's severity.
PublishStatus = Literal["committed", "unchanged", "refused", "unverified"]
# What an audit writes under `.promote/` that a full disk (or a locked history) can refuse: its decision stands.
# records: the run's junit.xml and run.json; statements: the in-toto statements beside the pages.
Stored = Literal["records", "history", "pages", "statements"]
PushStatus = Literal["pushed", "refused"]
Severity = Literal["error", "warning", "info"]
SEVERITIES: tuple[Severity, ...] = ("error", "warning", "info")
