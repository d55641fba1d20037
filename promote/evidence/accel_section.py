"""The accelerations on the evidence page: their effect on the Tested gate, and a Measurement | Result section each."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import Any

from promote.accel.rows import (
    BENCH_HEADER,
    REQUESTS_HEADER,
    SWEEP_HEADER,
    bench_table,
    requests_table,
    rows,
    sweep_table,
)
from promote.accel.store import recent
from promote.accel.verify import AccelReport
from promote.config.settings import Config
from promote.core.outcome import FAIL, UNDECIDED
from promote.core.vocab import worst
from promote.evidence.gates import EVERY_PASSED, Gate, plural

# A broken switch, a broken accelerated path or parity that differs: what was promoted is not what was tested.
# So is evidence the path took no part in, and a path that fails requests or lets a fallback answer for it,
# a switch that leaves the path serving, and tests red both ways (the switch proves nothing about them).
# A bench step undecided without an error: it ran, and its interval holds the target.
STRADDLES = "the speed-up's interval includes the target: more rounds may decide it"
FAILS_TESTED = (
    "kill-switch-broken", "acceleration-broken", "parity-differs", "parity-vacuous", "bench-vacuous",
    "acceleration-failed-request", "served-elsewhere", "switch-ineffective", "acceleration-tests-fail",
    # Slower than off on the bench's own evidence (only with `audit --bench`): promoting it is the regression.
    "acceleration-slower",
    # Worse on the team's own yardstick, or judged on items the path never served.
    "quality-inferior", "quality-vacuous",
)  # fmt: skip
# What a finding of each check is about: a test of the package, a class of the sweep's requests, or a run
# (acceleration-broken names a test, or a request class when it comes from the sweep).
_SUBJECT_KIND = {
    "acceleration-failed-request": "request class",
    "served-elsewhere": "request class",
    "parity-vacuous": "parity run",
    "bench-vacuous": "bench run",
    "switch-ineffective": "kill switch",
    "acceleration-slower": "bench case",
    "quality-inferior": "quality run",
    "quality-vacuous": "quality run",
}


def tested_with(gate: Gate, report: AccelReport) -> Gate:
    """The Tested gate with each path's evidence; a broken switch or parity fails it."""
    # "Kill switch `ENV=0`" reads "kill switch `ENV=0`" mid-line: only the first letter is lowered, never a code span.
    lines = [f"{r.name}: {m[:1].lower()}{m[1:]}: {result}" for r in report.results for m, result in rows(r)]
    # An error only: parity that differs is a warning while the yardstick says the path is no worse.
    failing = [f for f in report.findings if f.check in FAILS_TESTED and f.severity == "error"]
    lines += [f"{f.check}: {f.subject}" for f in failing]
    # A step that could not decide (a yardstick too small, an arm stopped at its time limit, a speed-up whose
    # interval holds its target) leaves the gate undecided, as it makes `promote accel` exit 3: never a pass unseen.
    undecided = report.undecided
    lines += [f"{u.name}: {u.step} undecided: {u.error or STRADDLES}" for u in undecided]
    status = worst([gate.status, FAIL if failing else UNDECIDED]) if failing or undecided else gate.status
    lead = gate.row
    if undecided and not failing and len(lead) >= 2:
        said = f"{plural(len(undecided), 'accelerated-path step')} undecided (see Accelerated paths)"
        lead = (lead[0], said if lead[1] == EVERY_PASSED else f"{lead[1]}; {said}", *lead[2:])
    if failing and len(lead) >= 2:
        # The row's second sentence says what is red; a broken path joins it rather than pushing CI off the row.
        classes = {c.label for r in report.results if r.sweep is not None for c in r.sweep.classes}
        counts = Counter(
            (f.check, _SUBJECT_KIND.get(f.check, "request class" if f.subject in classes else "test")) for f in failing
        )
        broken = ", ".join(
            f"{check} for {plural(n, kind)} (see Accelerated paths)" for (check, kind), n in counts.items()
        )
        second = broken if lead[1] == EVERY_PASSED else f"{lead[1]}; {broken}"
        lead = (lead[0], second, *lead[2:])
    return replace(gate, status=status, evidence=(*gate.evidence, *lines), lead=lead)


def section(config: Config, report: AccelReport) -> dict[str, Any]:
    """The page section: per path, its Measurement | Result rows and its speedup in earlier runs."""
    data = []
    for r in report.results:
        past = [e for e in recent(config, r.name) if e.get("speedup") is not None]
        data.append({
            "name": r.name,
            "package": r.package,
            "rows": [list(row) for row in rows(r)],
            "sweep": {"header": list(SWEEP_HEADER), "rows": sweep_table(r.sweep)},
            "cases": {"header": list(BENCH_HEADER), "rows": bench_table(r.bench)},
            "requests": {"header": list(REQUESTS_HEADER), "rows": requests_table(r.parity)},
            "findings": [f.to_json() for f in r.findings],
            "speedups": [{"time": e["time"], "speedup": e["speedup"], "interval": e["interval"]} for e in past],
            "result": r.to_json(),
        })  # fmt: skip
    return {"key": "accelerations", "title": "Accelerated paths", "data": data}
