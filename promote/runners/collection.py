"""Modules pytest could not collect: one record of each, and the finding that names it and why."""

from __future__ import annotations

import re

from promote.core.findings import Finding, Location
from promote.core.process import telling_line
from promote.runners.plugin.records import TestRecord


def uncollected(t: TestRecord, location: Location | None) -> Finding:
    message = f"pytest could not collect {t.nodeid}: {_cause(t.longrepr)}{_said(t)}"
    return Finding("package-error", "error", t.nodeid, message, location=location)


def collection_errors_of(tests: list[TestRecord]) -> tuple[list[TestRecord], list[TestRecord]]:
    """(the records with each collection error once, those errors): every xdist worker reports its own copy."""
    kept: list[TestRecord] = []
    errors: dict[str, TestRecord] = {}
    for t in tests:
        if t.index == 0 and t.outcome == "error":
            if t.nodeid in errors:
                continue
            errors[t.nodeid] = t
        kept.append(t)
    return kept, list(errors.values())


_FRAME = re.compile(r"^(?P<where>[^\s<][^:]*\.py:\d+): in ", re.MULTILINE)


def _cause(text: str | None) -> str:
    """A collection error's exception line, and the package's own line that raised it."""
    last = re.sub(r"^E\s+", "", telling_line(text or "")) or "no details"
    # Frames of pytest, importlib and installed packages are not the package's: the last of the others raised.
    frames = [m["where"] for m in _FRAME.finditer(text or "") if "-packages/" not in m["where"]]
    return f"{last} ({frames[-1]})" if frames else last


def _said(t: TestRecord) -> str:
    """What a module printed last before it failed, which often says what to install (redacted when written)."""
    return f"; it printed: {' | '.join(t.output.splitlines())}" if t.output else ""
