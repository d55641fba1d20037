"""Human-readable summary of `promote audit`: the four gates, the findings, where the pages are."""

from __future__ import annotations

from promote.cli.render import findings_lines
from promote.evidence.audit import AuditResult
from promote.evidence.gates import TITLES


def audit_report(r: AuditResult) -> str:
    lines = [f"audit {r.run_id}: {r.verdict}", ""]
    for key, title in TITLES:
        gate = r.gates[key]
        lines.append(f"{gate.status.upper():<9} {title}")
        lines += [f"          {line}" for line in gate.evidence]
    if r.findings:
        lines += ["", "findings:", *findings_lines(r.findings)]
    lines += ["", "pages:", f"  {r.pages.md}", f"  {r.pages.html}", f"  {r.pages.json}"]
    if r.published:
        lines.append(f"published: {r.published}")
    return "\n".join(lines)
