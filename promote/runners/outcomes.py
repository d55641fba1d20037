"""Read pytest reports: the outcome word, subtest ids, failure text and skip reasons."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

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
    """The subtest context (`msg`, `kwargs`) of a pytest 9 (or pytest-subtests) subtest report."""
    context = getattr(report, "context", None)
    return context if hasattr(context, "kwargs") and hasattr(context, "msg") else None


def subtest_description(context: Any) -> str:
    """`[msg] (k=v, ...)`, the way pytest 9 shows a subtest."""
    parts = []
    if context.msg is not None:
        parts.append(f"[{context.msg}]")
    if context.kwargs:
        parts.append("({})".format(", ".join(f"{k}={v!r}" for k, v in context.kwargs.items())))
    return " ".join(parts) or "(<subtest>)"


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
