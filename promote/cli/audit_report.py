"""Human-readable summary of `promote audit`: the four gates, the findings, where the pages are."""

from __future__ import annotations

from collections.abc import Sequence

from promote.cli.render import findings_lines
from promote.cli.terminal import AUDIT_TONES, GATE_TONES, joined, mark
from promote.core.vocab import Stored
from promote.evidence.audit import AuditResult, Unstored
from promote.evidence.gates import TITLES
from promote.evidence.publish import PublishResult


def audit_report(r: AuditResult) -> str:
    lines = [f"audit {r.run_id}: {mark(r.verdict, AUDIT_TONES[r.verdict])}", ""]
    for key, title in TITLES:
        gate = r.gates[key]
        lines.append(f"{mark(gate.status.upper(), GATE_TONES[gate.status], width=9)} {title}")
        lines += [f"          {line}" for line in gate.evidence]
    if r.findings:
        lines += ["", "findings:", *findings_lines(r.findings)]
    if r.pages is None:
        lines += ["", "pages: not written"]
    else:
        lines += ["", "pages:", f"  {r.pages.md}", f"  {r.pages.html}", f"  {r.pages.json}"]
    if r.published is not None:
        lines.append(f"published: {published_line(r.published)}")
    return joined(lines)


def published_line(p: PublishResult) -> str:
    """What publishing did, from what the docs repository was read back holding."""
    files = ", ".join(p.files)
    short = (p.commit or "")[:7]
    if p.status == "committed":
        text = f"committed {files} in {p.repo} ({short})"
    elif p.status == "unchanged":
        text = f"{files} in {p.repo} unchanged: already committed in {short}"
    elif p.status == "unverified":
        text = f"not published: the commit made in {p.repo} was read back and does not count ({p.cause})"
    elif p.left_behind:
        text = f"not published ({p.cause}); left behind in {p.repo}: {'; '.join(p.left_behind)}"
    else:
        text = f"not published ({p.cause}); nothing was committed and {p.repo} is as it was"
    if p.index_cause:
        text += f"; the docs repository's index was not updated ({p.index_cause}): `git reset -q -- {files}` there"
    if p.push == "pushed":
        text += f"; pushed to origin/{p.branch}, no force"
    elif p.push == "refused":
        text += f"; push to origin refused: {p.push_cause}"
    return text


# What each part of an audit that a full disk (or a locked history) refused is called in the last line.
UNSTORED: dict[Stored, str] = {
    "records": "the run's records were not stored",
    "history": "the run was not recorded in the history",
    "pages": "the evidence pages were not written",
    "statements": "the in-toto statements were not written (the pages were)",
}


def unstored_line(unstored: Sequence[Unstored], *, publish: bool) -> str:
    """The one line after the report: each part not written and why; with --publish, that nothing was."""
    text = "; ".join(f"{UNSTORED[u.what]}: {u.error}" for u in unstored)
    return text + ("; nothing was published" if publish else "")
