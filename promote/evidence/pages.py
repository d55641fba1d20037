"""The evidence document (versioned JSON) and the pages rendered from it."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import Any, Protocol, TypeVar

from promote import __version__
from promote.core import state
from promote.core.findings import Finding
from promote.core.outcome import FAIL, PASS, UNDECIDED
from promote.core.redact import Redactor, printable
from promote.core.redact import current as current_redactor
from promote.core.vocab import RED, Status, worst
from promote.evidence import failures as failures_mod
from promote.evidence import machine_paths
from promote.evidence import render as render_pages
from promote.evidence.deltas import Deltas
from promote.evidence.gates import TITLES, Gate
from promote.evidence.stories import RunMarks
from promote.release.check import CheckResult
from promote.runners.inventory import TestInventory
from promote.runners.suite import RunResult

SCHEMA_VERSION = 1
# The schema shipped in the package, by its path in it (the shipped file's own `$id`).
SCHEMA_ID = "urn:promote-release:promote/schemas/evidence.schema.json"


@dataclass(frozen=True)
class Pages:
    md: Path
    html: Path
    json: Path
    statements: tuple[Path, ...] = ()

    def to_json(self) -> dict[str, object]:
        return {"md": str(self.md), "html": str(self.html), "json": str(self.json),
                "intoto": [str(p) for p in self.statements]}  # fmt: skip


def schema() -> dict[str, Any]:
    """The JSON Schema of the evidence document, shipped with the package."""
    data: dict[str, Any] = json.loads(files("promote").joinpath("schemas/evidence.schema.json").read_text("utf-8"))
    return data


def verdict(gates: dict[str, Gate]) -> Status:
    return worst([g.status for g in gates.values()])


def _refers(f: Finding, other: Finding) -> bool:
    """Whether `f` quotes `other` as its cause's own finding: e.g. an order-dependent finding quoting the polluter's
    leaked-state message word for word. Only a finding of another check about exactly what caused this one: a
    finding of the same check about another test (one that needs the same thing) is no reason for this one not to
    say it, and neither is a subject that only begins like the cause."""
    causes = (f.cause or "").split(", ")
    about_cause = other.check != f.check and other.subject != f.subject and other.subject in causes
    return about_cause and len(other.message) >= 30 and other.message in f.message and other.message != f.message


def _line(f: Finding, others: list[Finding]) -> dict[str, Any]:
    """One finding as one line: the cause only when it is not the subject, another finding's message not repeated."""
    message = f.message
    for other in others:
        if _refers(f, other):
            message = message.replace(other.message, f"see {other.check} for {other.subject}")
    if message.startswith(f"{f.subject}: "):
        message = message[len(f.subject) + 2 :]
    # The cause only when it adds something: not the subject again, not a name the message already gives.
    cause = f.cause if f.cause and f.cause != f.subject and f.cause not in message else None
    line: dict[str, Any] = {"severity": f.severity, "subjects": [f.subject], "cause": cause, "message": message}
    if f.tests:  # a grouped finding: its tests are a field, and its message already counts all but the first few
        line["tests"], line["folded"] = list(f.tests), message
    return line


def _folded(line: dict[str, Any], known: set[str]) -> None:
    """The test ids of the run the line's message names, in order, and the message with all but the first FOLD
    of them counted instead ("and 76 more"): what a page shows of a finding that lists a whole suite."""
    if "tests" in line:
        return
    message = line["message"]
    spans = sorted((m.start(), m.end(), t) for t in known for m in re.finditer(re.escape(t), message))
    kept: list[tuple[int, int, str]] = []
    for start, end, test in spans:  # a longer id that contains a shorter one wins at the same place
        if kept and start < kept[-1][1]:
            if end - start > kept[-1][1] - kept[-1][0]:
                kept[-1] = (start, end, test)
            continue
        kept.append((start, end, test))
    line["tests"] = [t for _, _, t in kept]
    line["folded"] = message
    if len(kept) > render_pages.FOLD:
        cut, last = kept[render_pages.FOLD - 1][1], kept[-1][1]
        line["folded"] = f"{message[:cut]} and {len(kept) - render_pages.FOLD} more{message[last:]}"


def _grouped(findings: list[Finding], known: set[str] | None = None) -> list[dict[str, Any]]:
    """Findings by check, one line each; findings that say the same thing about several subjects share a line."""
    groups: dict[str, list[Finding]] = {}
    for f in findings:
        groups.setdefault(f.check, []).append(f)
    out = []
    for check, items in _referred_first(groups, findings):
        lines: dict[tuple[str, str, str | None], dict[str, Any]] = {}
        for f in items:
            line = _line(f, findings)
            key = (line["severity"], line["message"], line["cause"])
            if key in lines:
                if f.subject not in lines[key]["subjects"]:
                    lines[key]["subjects"].append(f.subject)
            else:
                lines[key] = line
        for line in lines.values():
            _folded(line, known or set())
        out.append({"check": check, "findings": [f.to_json() for f in items], "lines": list(lines.values())})
    return out


def _referred_first(groups: dict[str, list[Finding]], findings: list[Finding]) -> list[tuple[str, list[Finding]]]:
    """The checks in name order, except that a check a line refers to ("see leaked-state for ...") comes before
    the check of the line that refers to it: what a line points at is on the page already when it is read."""
    refers: dict[str, set[str]] = {check: set() for check in groups}
    for f in findings:
        refers[f.check] |= {o.check for o in findings if _refers(f, o)}
    ordered: list[str] = []

    def place(check: str, seen: frozenset[str]) -> None:
        if check in ordered or check in seen:  # a cycle keeps name order
            return
        for first in sorted(refers[check]):
            place(first, seen | {check})
        ordered.append(check)

    for check in sorted(groups):
        place(check, frozenset())
    return [(check, groups[check]) for check in ordered]


class Counted(Protocol):
    """A run as the chart reads it: a stored run, or its counts alone (story_window.RunCounts)."""

    @property
    def run_id(self) -> str: ...

    @property
    def started(self) -> str: ...

    @property
    def interrupted(self) -> bool: ...

    @property
    def packages(self) -> set[str]: ...

    def count(self, outcome: str) -> int: ...


C = TypeVar("C", bound=Counted)


def comparable(runs: Sequence[C]) -> list[C]:
    """The runs (newest first) of exactly the package set the newest ran, none interrupted: what a chart compares."""
    if not runs:
        return []
    packages = runs[0].packages
    return [r for r in runs if r.packages == packages and not r.interrupted]


def history_points(runs: Sequence[Counted], marks: Sequence[RunMarks] = ()) -> list[dict[str, Any]]:
    """Passed / failed / blocked of each run comparable with the newest, oldest first (for the chart), with the
    flaky failures and the never-ran tests the stories found in each."""
    marked = {m.run: m for m in marks}
    return [
        {
            "run": r.run_id,
            "started": r.started,
            "passed": r.count("passed"),
            "failed": sum(r.count(outcome) for outcome in RED),
            "blocked": r.count("blocked"),
            "flaky": marked[r.run_id].flaky if r.run_id in marked else 0,
            "never_ran": marked[r.run_id].never_ran if r.run_id in marked else 0,
        }
        for r in reversed(comparable(runs))
    ]


def document(
    *,
    run_id: str,
    check: CheckResult,
    run: RunResult | None,
    deltas: Deltas,
    gates: dict[str, Gate],
    findings: list[Finding],
    last_merge: str | None,
    history: list[dict[str, Any]],
    provenance: dict[str, str],
    sections: list[dict[str, Any]] | None = None,
    root: Path | None = None,
    stories: dict[str, object] | None = None,
    shared: dict[str, Any] | None = None,
    inventory: TestInventory | None = None,
) -> dict[str, Any]:
    """The evidence document: everything the pages show, as plain JSON.

    `sections` lists extra sections after the findings, each {"key", "title", "data"}; the pages render each
    with the templates named for its key. Paths are relative to `root` (the repository), and no string names a
    path of this machine (machine_paths).
    """
    doc = {
        "$schema": SCHEMA_ID,
        "schema_version": SCHEMA_VERSION,
        "run": run_id,
        "verdict": verdict(gates),
        "candidate": {
            "sha": check.candidate,
            "short": check.candidate[:7],
            "ref": check.candidate_ref,
            "trunk": check.trunk,
        },
        "gate_titles": [list(t) for t in TITLES],
        "gates": {key: gates[key].to_json() for key, _ in TITLES},
        "packages": failures_mod.package_rows(run, root),
        "failures": failures_mod.failures(run),
        "stations": failures_mod.stations(run),
        "deltas": deltas.to_json(),
        "findings": [f.to_json() for f in findings],
        "findings_by_check": _grouped(findings, {t.nodeid for p in (run.packages if run else ()) for t in p.tests}),
        # `promote check`'s verdict (the mirrors alone, before the merge), not the Merged gate's status.
        "merge": {
            "check_verdict": check.verdict,
            "mirrors": [m.to_json() for m in check.mirrors],
            "last_merge": last_merge,
        },
        "deployed": check.drift.to_json() if check.drift else None,
        "history": history,
        # Each test's story over the window (promote.evidence.story_findings.section); None: no history was read.
        "stories": stories,
        # The run as the shared history keeps it (docs_history): each package's count, the tests that did not pass.
        "outcomes": shared,
        "sections": list(sections or []),
        # Every test of the repository by directory and who runs it (None: the audit collected no test root).
        "inventory": None if inventory is None else inventory.to_json(),
        "provenance": {"tool": "promote", "version": __version__, **provenance},
    }
    return machine_paths.unmachined(doc, root)  # type: ignore[no-any-return]


def cleaned(obj: Any) -> Any:
    """`obj` (JSON-like) with each string made fit for a page: redacted, control characters shown."""
    redactor = current_redactor()
    return _cleaned(obj, redactor)


def _cleaned(obj: Any, redactor: Redactor) -> Any:
    if isinstance(obj, str):
        return printable(redactor(obj))
    if isinstance(obj, dict):
        return {k: _cleaned(v, redactor) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_cleaned(v, redactor) for v in obj]
    return obj


def write(doc: dict[str, Any], out_dir: Path) -> Pages:
    """Write evidence.json, evidence.md and evidence.html.

    Every string is cleaned first (promote.core.redact): secrets redacted, control characters shown as `\\xNN`.
    """
    doc = cleaned(doc)
    state.private_dir(out_dir)
    pages = Pages(out_dir / "evidence.md", out_dir / "evidence.html", out_dir / "evidence.json")
    state.write_private(pages.json, json.dumps(doc, indent=2) + "\n")
    state.write_private(pages.md, render_pages.markdown(doc))
    state.write_private(pages.html, render_pages.html(doc))
    return pages


def write_statements(out_dir: Path, statements: dict[str, dict[str, Any]]) -> tuple[Path, ...]:
    """Write one in-toto statement per package beside the pages, cleaned as they are."""
    written = []
    for name, statement in statements.items():
        path = out_dir / f"intoto-{name}.json"
        state.write_private(path, json.dumps(cleaned(statement), indent=2) + "\n")
        written.append(path)
    return tuple(written)


__all__ = ["FAIL", "PASS", "UNDECIDED", "Pages", "document", "schema", "verdict", "write", "write_statements"]
