"""SARIF 2.1.0 of a command's findings: one result per finding, at the file and line of its `location`."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from promote import __version__
from promote.core.findings import Location

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
LEVELS = {"error": "error", "warning": "warning", "info": "note"}


def location(finding: dict[str, Any]) -> Location | None:
    """Where a finding points: its `location` field, and nothing else (a finding without one has no place)."""
    where = finding.get("location")
    return Location.from_json(where) if isinstance(where, dict) else None


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
        region = {"region": {"startLine": where.line}} if where.line else {}
        # A URI reference, as SARIF requires: a `#`, `%`, `?` or space in a path is percent-encoded (RFC 3986).
        physical = {"artifactLocation": {"uri": quote(where.path, safe="/"), "uriBaseId": "%SRCROOT%"}, **region}
        result["locations"] = [{"physicalLocation": physical}]
    return result
