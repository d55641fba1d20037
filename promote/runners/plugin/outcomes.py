"""Read pytest reports: the outcome word, subtest ids, failure text and skip reasons."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from promote.core.findings import Location
from promote.core.vocab import is_red

if TYPE_CHECKING:  # the runner's own process reads records without importing pytest
    import pytest

MAX_LONGREPR = 4000


def phase_outcome(report: pytest.TestReport) -> str:
    """passed, failed, error (setup/teardown failed), skipped, xfailed or xpassed."""
    if hasattr(report, "wasxfail"):
        if report.skipped:
            return "xfailed"
        if report.passed:
            return "xpassed"
    if report.failed and report.when != "call":
        return "error"
    return report.outcome


def combine(current: str | None, report: pytest.TestReport) -> str | None:
    """The test's outcome so far, updated with one phase's report (as pytest counts them)."""
    outcome = phase_outcome(report)
    if report.when == "setup":
        return None if outcome == "passed" else outcome
    if report.when == "call":
        return outcome
    # A failing teardown makes a test that did not already fail an error.
    if outcome == "error" and current != "failed":
        return "error"
    return current


def subtest_context(report: pytest.TestReport) -> Any | None:
    """The subtest context (`msg`, `kwargs`) of a subtest report (pytest 9, or pytest-subtests on pytest 8)."""
    context = getattr(report, "context", None)
    return context if hasattr(context, "kwargs") and hasattr(context, "msg") else None


def subtest_description(report: pytest.TestReport, context: Any) -> str:
    """The subtest's part of its name as pytest shows it, e.g. `[msg] (i=1)`."""
    # A subtest report's head line is "<domain> <description>", rendered by pytest (or pytest-subtests)
    # itself: how kwargs are shown changed between pytest releases (raw values vs. already repr'd ones).
    domain = report.location[2] if report.location else None
    head = report.head_line
    if domain and head and head.startswith(domain + " "):
        return head[len(domain) + 1 :]
    parts = [f"[{context.msg}]"] if context.msg is not None else []
    if context.kwargs:
        parts.append("({})".format(", ".join(f"{k}={v}" for k, v in context.kwargs.items())))
    return " ".join(parts) or "(<subtest>)"


def failed_by_subtests(outcome: str, failed_subtests: int) -> bool:
    """Whether a test that ended `outcome` is failed by its subtests, as pytest 9 counts a test with any."""
    # pytest 9 fails a passed parent only while reporting its status (not without the terminal reporter)
    # and never a unittest parent; the record says failed whenever a subtest failed, as reruns judge it.
    return failed_subtests > 0 and not is_red(outcome)


def last_lines(sections: list[tuple[str, str]], keep: int = 5) -> str | None:
    """The last non-blank lines a collector printed (pytest's captured stdout and stderr), or None."""
    printed = [
        line.rstrip() for title, text in sections if title.startswith("Captured std") for line in text.splitlines()
    ]
    kept = [line for line in printed if line.strip()][-keep:]
    return truncate("\n".join(kept), MAX_LONGREPR // 4) if kept else None


def truncate(text: str, limit: int = MAX_LONGREPR) -> str:
    """Keep the head and, mostly, the tail (where the error is) of a long text."""
    if len(text) <= limit:
        return text
    head = limit // 4
    marker = f"\n[... {len(text) - limit} characters cut ...]\n"
    return text[:head] + marker + text[-(limit - head) :]


def skip_reason(report: pytest.TestReport) -> str | None:
    """Why a test was skipped (or xfailed)."""
    wasxfail = getattr(report, "wasxfail", None)
    if wasxfail is not None:
        return str(wasxfail) or "xfail"
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2])
    return str(longrepr) if longrepr is not None else None


def place(location: tuple[str, int | None, str] | None) -> Location | None:
    """A test's place as pytest reports it (`item.location`: file relative to the rootdir, 0-based line)."""
    if location is None:
        return None
    path, line, _ = location
    return Location(path.replace("\\", "/"), None if line is None else line + 1)


def raised_at(path: Path, error: BaseException) -> int | None:
    """The line of file `path` that raised `error` (or the error pytest raised it from), when it went through it."""
    # pytest turns a module's ImportError or SyntaxError into a CollectError raised from it.
    for e in (error, error.__cause__):
        if isinstance(e, SyntaxError) and e.filename and _same(Path(e.filename), path):
            return e.lineno
        line = None
        tb = e.__traceback__ if e is not None else None
        while tb is not None:
            if _same(Path(tb.tb_frame.f_code.co_filename), path):
                line = tb.tb_lineno  # the innermost frame in the file is the line that raised
            tb = tb.tb_next
        if line is not None:
            return line
    return None


def _same(a: Path, b: Path) -> bool:
    return a == b or a.resolve() == b.resolve()
