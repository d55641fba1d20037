"""What the Tested section names: every red test with its one-line cause, and what each station ran with."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from promote.core.process import telling_line
from promote.core.vocab import is_red
from promote.runners.plugin.records import read_all_results
from promote.runners.suite import RunResult
from promote.runners.summary import PackageResult

# An exception line in a traceback ("ValueError: ...", "mlx.core.RuntimeError: ...") when pytest marked none with "E".
_EXCEPTION = re.compile(r"^[\w.]*(Error|Exception|Exit|Interrupt)\b.*")


def cause(text: str | None) -> str:
    """The one line of a test's report that says why it failed: its first `E` line, else its exception line."""
    if not text:
        return "no report recorded"
    first = telling_line(text, starts=("E ",), first=True, marked=True)
    if first:
        return re.sub(r"^E\s+", "", first)
    exception = [ln.strip() for ln in text.splitlines() if _EXCEPTION.match(ln.strip())]
    return (exception[-1] if exception else telling_line(text))[:300] or "no report recorded"


def _reruns(p: PackageResult) -> dict[str, dict[str, Any]]:
    return {
        v.test: {
            "verdict": v.kind,
            "polluters": list(v.polluters),
            "detail": v.detail,
            "reruns": v.reruns,
            "passes_on": list(v.passes_on),
        }
        for v in p.verdicts
    }


def package_failures(p: PackageResult) -> list[dict[str, Any]]:
    """Every failed, errored and crashed test of one package (blocked ones are the requirements check's), in order."""
    blocked, reruns = set(p.blocked_tests), _reruns(p)
    # A group of one cause is one entry, under its representative, with every test of the group.
    groups = {g.tests[0]: g for g in p.groups}
    grouped = {t for g in p.groups for t in g.tests[1:]}
    out = []
    for t in p.tests:
        if t.parent is None and is_red(t.outcome) and t.nodeid not in blocked and t.nodeid not in grouped:
            text = t.excerpt or t.longrepr
            entry: dict[str, Any] = {"test": t.nodeid, "outcome": t.outcome, "cause": cause(text),
                                     "rerun": reruns.get(t.nodeid), "station": p.ran_on(t.nodeid)}  # fmt: skip
            if t.nodeid in groups:
                g = groups[t.nodeid]
                entry |= {"cause": f"{g.cause}: {entry['cause']}", "group": list(g.tests)}
            out.append(entry)
    for nodeid in p.crashed_tests:
        out.append({"test": nodeid, "outcome": "crashed", "cause": "its worker process died while running it",
                    "rerun": reruns.get(nodeid), "station": p.ran_on(nodeid)})  # fmt: skip
    return out


def failures(run: RunResult | None) -> list[dict[str, Any]]:
    """The red tests by package: only packages that have any."""
    if run is None:
        return []
    grouped = [{"package": p.name, "tests": package_failures(p)} for p in run.packages]
    return [g for g in grouped if g["tests"]]


def _versions(out_dir: Path) -> dict[str, str | None]:
    """Python, pytest and MLX as the package's own workers recorded them (first worker that says)."""
    found: dict[str, str | None] = {"python": None, "pytest": None, "mlx": None}
    dirs = [out_dir, *sorted(d for d in out_dir.iterdir() if d.is_dir())] if out_dir.is_dir() else []
    for d in dirs:
        try:
            results = read_all_results(d)
        except (OSError, ValueError):
            continue
        for r in results:
            for key, value in (("python", r.python), ("pytest", r.pytest), ("mlx", r.mlx)):
                found[key] = found[key] or value
    return found


def stations(run: RunResult | None) -> list[dict[str, Any]]:
    """Each station a package ran on, its packages, and the versions its workers recorded (null: none did)."""
    if run is None:
        return []
    rows: dict[str, dict[str, Any]] = {}
    for p in run.packages:
        row = rows.setdefault(p.station, {"station": p.station, "packages": [], "python": None, "pytest": None,
                                          "mlx": None})  # fmt: skip
        row["packages"].append(p.name)
        for key, value in _versions(p.out_dir).items():
            row[key] = row[key] or value
    return list(rows.values())


def package_rows(run: RunResult | None, root: Path | None) -> list[dict[str, object]]:
    """The packages' counts, their paths relative to the repository (a page names no path of this machine)."""
    if run is None:
        return []
    out = []
    for p in run.packages:
        row = p.to_json()
        if root is None:
            out.append(row)
            continue
        row["path"] = os.path.relpath(p.path, root).replace(os.sep, "/")
        row["results"] = os.path.relpath(p.out_dir, root).replace(os.sep, "/")
        out.append(row)
    return out
