"""`promote history`: recent runs with their deltas, or one run in full."""

from __future__ import annotations

from typing import Any

from promote.cli.render import findings_lines, table
from promote.cli.terminal import joined
from promote.config import Config
from promote.core import state
from promote.core.vocab import is_red
from promote.evidence.deltas import Deltas, compare
from promote.evidence.history import History
from promote.evidence.story_findings import flipped_line
from promote.evidence.story_window import tally


def show_history(config: Config, run_id: str | None, *, limit: int) -> tuple[dict[str, Any], str]:
    """(JSON data, text) for the history listing or for one run."""
    history = History(state.state_dir(config.root))
    try:
        if run_id is None:
            return _listing(history, limit)
        run = history.get(run_id)
        deltas = compare(run, history.previous(run), tally(history, run))
    finally:
        history.close()
    data = {
        "run": run.run_id,
        "kind": run.kind,
        "started": run.started,
        "finished": run.finished,
        "commit": run.commit,
        "command": run.command,
        "gates": run.gates,
        "interrupted": run.interrupted,
        "tests": [{"package": t.package, "test": t.nodeid, "outcome": t.outcome} for t in run.tests],
        "findings": [f.to_json() for f in run.findings],
        "deltas": deltas.to_json(),
    }
    lines = [
        f"run {run.run_id} ({run.kind}{', interrupted' if run.interrupted else ''}) at {run.started}",
        f"commit {run.commit or '-'}; {run.command}",
        deltas.headline,
    ]
    lines += [f"  fixed: {d.nodeid}" for d in deltas.fixed]
    lines += [f"  newly failing: {d.nodeid}" for d in deltas.newly_failing]
    lines += [f"  filtered, not fixed: {d.nodeid} ({d.before} -> {d.after})" for d in deltas.filtered]
    lines += [f"  same commit: {d.nodeid} {flipped_line(d)}" for d in deltas.flipped]
    if run.gates:
        lines.append("gates: " + ", ".join(f"{k} {v}" for k, v in run.gates.items()))
    if run.findings:
        lines += ["findings:", *findings_lines(run.findings)]
    return data, joined(lines)


def _listing(history: History, limit: int) -> tuple[dict[str, Any], str]:
    rows, items = [], []
    for run_id in history.run_ids(limit):
        run = history.get(run_id)
        deltas = compare(run, history.previous(run), tally(history, run))
        red = sum(1 for t in run.tests if is_red(t.outcome))
        change = _change(deltas)
        items.append(
            {"run": run.run_id, "kind": run.kind, "interrupted": run.interrupted, "started": run.started,
             "commit": run.commit, "passed": run.count("passed"), "red": red, "blocked": run.count("blocked"),
             "deltas": deltas.to_json()}
        )  # fmt: skip
        kind = run.kind + (" (interrupted)" if run.interrupted else "")
        rows.append([run.run_id, kind, run.started[:19], (run.commit or "-")[:7], str(run.count("passed")),
                     str(red), str(run.count("blocked")), change])  # fmt: skip
    if not rows:
        return {"runs": []}, "no runs recorded yet"
    text = joined(table(["RUN", "KIND", "STARTED", "COMMIT", "PASSED", "RED", "BLOCKED", "SINCE PREVIOUS"], rows))
    return {"runs": items}, text


def _change(deltas: Deltas) -> str:
    """What changed since the previous comparable run; on the same commit, that it was the same commit."""
    if deltas.first:
        return "first run of these packages"
    flips = "".join(f", {d.nodeid} {flipped_line(d)}" for d in deltas.flipped)
    if deltas.commit_unchanged and not deltas.fixed and not deltas.newly_failing:
        # A count of fixes on an unchanged commit would be a claim about a change that did not happen.
        filtered = f", {len(deltas.filtered)} filtered" if deltas.filtered else ""
        return f"same commit{filtered}{flips}"
    return f"+{len(deltas.fixed)} fixed, -{len(deltas.newly_failing)} new red, {len(deltas.filtered)} filtered{flips}"
