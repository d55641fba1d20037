"""The CI audit on real workflows of public Python projects (tests/checks/workflows, read by hand).

Each case is built as the project lays it out: the workflow, the files it names, and one small test module per
test id of the record. The audit must never report not-run for a test a job runs, and reads a case to a
decision when the record has one.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.workflow_cases import CASES, audit, fates, lay_out, read


@pytest.fixture(scope="module")
def found(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, str]]:
    """Each case built and audited once (asking the tools is the slow part); its fate for each test id, with
    the reason of a not-run."""
    out = {}
    for path in CASES:
        case = read(path)
        root = tmp_path_factory.mktemp(path.stem)
        report = audit(root, case, lay_out(root, case))
        why = {n.test: n.why for n in report.not_run}
        out[path.stem] = {
            t: f"{f}: {why[t]}" if t in why else f for t, f in fates(report, list(case["expected"])).items()
        }
    return out


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_no_test_a_job_runs_is_reported_not_run_and_no_decision_contradicts_the_record(
    path: Path, found: dict[str, dict[str, str]]
) -> None:
    case = read(path)
    fate = {t: f.partition(":")[0] for t, f in found[path.stem].items()}
    # Undecided where the record decides is a miss, counted below; a decision against the record is wrong.
    wrong = {t: (found[path.stem][t], e) for t, e in case["expected"].items() if fate[t] not in (e, "undecided")}
    assert not wrong, wrong


def test_most_workflows_are_read_to_the_decision_of_the_record(found: dict[str, dict[str, str]]) -> None:
    misses = {}
    for path in CASES:
        case = read(path)
        undecided = {t: e for t, e in case["expected"].items() if found[path.stem][t] == "undecided" != e}
        if undecided:
            misses[path.stem] = undecided
    # The goal is at least 85% of the real workflows read to a decision where the record has one; today 45 of 75
    # are (a command the audit cannot follow makes its tests undecided, never "not run"). A ratchet until then:
    # a change that leaves one more workflow undecided fails here.
    assert len(misses) <= 30, misses
