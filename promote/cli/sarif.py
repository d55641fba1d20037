"""SARIF 2.1.0 of a command's findings: one result per finding, with file and line where the finding names them."""

from __future__ import annotations

import re
from typing import Any

from promote import __version__

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
LEVELS = {"error": "error", "warning": "warning", "info": "note"}
# `path:line:` at the start of a message (an invalid workflow), or a path in a subject (`a/b.py::test`).
_AT_LINE = re.compile(r"^([\w./@+-]+\.[A-Za-z0-9]+):(\d+)(?::\d+)?:")
_PATH = re.compile(r"^([\w./@+-]+\.(?:py|pyi|ya?ml|toml|cfg|ini|md|txt|json|sh))(?:::|:\s|$)")


def location(finding: dict[str, Any]) -> tuple[str, int | None] | None:
    """(file, line) a finding points at: its location, else a path its message or subject names."""
    where = finding.get("location")
    if isinstance(where, dict):
        line = where.get("line")
        return str(where["path"]), None if line is None else int(line)
    # A finding without one (from an older run, or whose producer cannot place it) may still name a path.
    message, subject = str(finding.get("message") or ""), str(finding.get("subject") or "")
    m = _AT_LINE.match(message)
    if m:
        return m.group(1), int(m.group(2))
    m = _PATH.match(subject)
    return (m.group(1), None) if m else None


def sarif(data: dict[str, Any]) -> dict[str, Any]:
    """The SARIF log of `data["findings"]` (the FINDING shape of every --json output)."""
    findings: list[dict[str, Any]] = list(data.get("findings") or [])
    rules = list(dict.fromkeys(str(f["check"]) for f in findings))
    results = [_result(f, rules.index(str(f["check"]))) for f in findings]
    driver = {
        "name": "promote",
        "version": __version__,
        "rules": [{"id": r, "name": r, "shortDescription": {"text": r}} for r in rules],
    }
    return {"$schema": SCHEMA, "version": "2.1.0", "runs": [{"tool": {"driver": driver}, "results": results}]}


def _result(finding: dict[str, Any], index: int) -> dict[str, Any]:
    cause = f" (caused by {finding['cause']})" if finding.get("cause") else ""
    result: dict[str, Any] = {
        "ruleId": str(finding["check"]),
        "ruleIndex": index,
        "level": LEVELS.get(str(finding.get("severity")), "warning"),
        "message": {"text": f"{finding.get('subject')}: {finding.get('message')}{cause}"},
    }
    where = location(finding)
    if where is not None:
        region = {"region": {"startLine": where[1]}} if where[1] else {}
        physical = {"artifactLocation": {"uri": where[0], "uriBaseId": "%SRCROOT%"}, **region}
        result["locations"] = [{"physicalLocation": physical}]
    return result
