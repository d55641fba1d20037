"""Human-readable reports of check and merge results (scripts use --json instead)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from promote.cli.terminal import CHECK_TONES, MERGE_TONES, MIRROR_TONES, SEVERITY_TONES, joined, mark, plain
from promote.core.vocab import ADVANCED, MERGED, PARTIAL, WOULD_MERGE, assert_never
from promote.release.drift import DriftUndecided

if TYPE_CHECKING:
    # Annotations only: `promote check` renders with this module and must not load merge or the runners.
    from promote.core.findings import Finding
    from promote.release.check import CheckResult
    from promote.release.drift import Drift
    from promote.release.merge import MergeResult
    from promote.runners.stations import Inventory


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """Left-aligned columns separated by two spaces, measured without marks; the last column is not padded."""
    widths = [max(len(plain(r[i])) for r in [headers, *rows]) for i in range(len(headers))]
    return [
        "  ".join(cell + " " * (w - len(plain(cell))) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in [headers, *rows]
    ]


def _num(n: int | None) -> str:
    return "-" if n is None else str(n)


def drift_line(d: Drift | DriftUndecided) -> str:
    if isinstance(d, DriftUndecided):
        return f"deployed: undecided: {d.reason}"
    where = f"{d.ref} ({d.sha[:7]}, served since {d.served_since})"
    if d.status == "same":
        return f"deployed: {where} is the candidate itself"
    if d.status == "behind":
        return f"deployed: {where} has {d.trunk_behind} commit(s) the candidate lacks"
    changes = f"{d.undeployed} commit(s) not deployed, {len(d.changed_files)} file(s) differ"
    if d.status == "test-only":
        return f"deployed: {where}: {changes}, test files only: binary unchanged"
    if d.status == "undeployed":
        return f"deployed: {where}: {changes}, including non-test files"
    assert_never(d.status)


# Longest `(cause: ...)` shown beside a finding on the terminal.
CAUSE_SHOWN = 200


def findings_lines(findings: Sequence[Finding]) -> list[str]:
    lines = []
    for f in findings:
        cause = f" (cause: {f.cause})" if f.cause else ""
        if len(cause) > CAUSE_SHOWN:
            # Twenty polluters' ids would bury the line: the message names the first, --json each of them.
            cause = " (cause: the tests it names; --json lists each)"
        severity = mark(f.severity, SEVERITY_TONES[f.severity], width=7)
        lines.append(f"  {severity} {f.check}  {f.subject}: {f.message}{cause}")
    return lines


def check_report(r: CheckResult) -> str:
    lines = [f"candidate {r.candidate[:7]} ({r.candidate_ref}) for {r.trunk}", ""]
    rows = []
    for m in r.mirrors:
        note = m.reason or ""
        status = mark(m.status, MIRROR_TONES[m.status])
        rows.append([m.name, status, (m.head or "-")[:7], _num(m.behind), _num(m.discard), note])
    if rows:
        lines += table(["MIRROR", "STATUS", "HEAD", "BEHIND", "DISCARD", ""], rows)
    else:
        lines.append("no mirrors configured: nothing to verify")
    for m in r.mirrors:
        for c in m.discard_commits:
            lines.append(f"  {m.name} would lose {c.short} {c.subject} ({c.author})")
    if r.drift is not None:
        lines += ["", drift_line(r.drift)]
    if r.findings:
        lines += ["", "findings:", *findings_lines(r.findings)]
    lines += ["", f"verdict: {mark(r.verdict, CHECK_TONES[r.verdict])}"]
    return joined(lines)


def merge_report(r: MergeResult) -> str:
    """The merge as a release note would put it."""
    cand = r.candidate[:7]
    if r.verdict == MERGED:
        by_before: dict[str, list[str]] = {}
        for m in r.mirrors:
            if m.status == ADVANCED:
                by_before.setdefault((m.before or "")[:7], []).append(m.name)
        lines = [
            f"{r.trunk} fast-forwarded {before} to {cand} on {', '.join(names)}, no force"
            for before, names in by_before.items()
        ]
        if not lines:
            lines.append(f"{r.trunk} already at {cand} on every mirror; nothing pushed")
        n = len(r.mirrors)
        lines.append(f"all {n} mirror{'s' if n != 1 else ''} agree; each verified an ancestor first")
        if r.local:
            lines.append(r.local)
        return "\n".join(lines)
    if r.verdict == WOULD_MERGE:
        targets = [m.name for m in r.mirrors if m.before != r.candidate]
        what = ", ".join(targets) if targets else "no mirror (all up to date)"
        return f"dry run: would fast-forward {r.trunk} to {cand} on {what}, no force; nothing pushed"
    lines = []
    for m in r.mirrors:
        moved = f"{(m.before or '-')[:7]} -> {(m.after or '-')[:7]}"
        lines.append(f"  {m.name}: {m.status} {moved}" + (f" ({m.reason})" if m.reason else ""))
    verdict = mark(r.verdict, MERGE_TONES[r.verdict])
    if r.verdict == PARTIAL:
        head = f"{verdict}: {r.trunk} advanced to {cand} on some mirrors only; nothing was forced"
        tail = "reconcile the refused mirror(s), then rerun `promote merge` to resume"
        return joined([head, *lines, tail])
    head = f"{verdict}: nothing pushed"
    return "\n".join([check_report(r.check), joined(["", head, *lines])])


def inventory_report(inv: Inventory) -> str:
    """The inventory as a table for people."""
    rows = []
    for s in inv.stations:
        memory = "-" if s.memory_gb is None else f"{s.memory_gb:g} GB"
        where = "here (detected)" if s.local else (s.ssh or "configured")
        rows.append([s.name, s.platform or "-", ",".join(s.devices) or "-", memory, where, ", ".join(s.resources)])
    lines = table(["STATION", "PLATFORM", "DEVICES", "MEMORY", "WHERE", "RESOURCES"], rows)
    return "\n".join(lines + [f"note: {n}" for n in inv.notes])
