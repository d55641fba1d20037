"""The CI audit on real workflows of public Python projects (tests/checks/workflows, read by hand).

Each case is built as the project lays it out: the workflow, the files it names, and one small test module per
test id of the record. The audit must never report not-run for a test a job runs, and reads a case to a
decision when the record has one.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

from promote.checks.ci import CIReport, survey_ci
from tests.checks.test_ci import workspace

CASES = sorted((Path(__file__).parent / "workflows").glob("*.toml"))


def build(root: Path, case: dict) -> CIReport:  # type: ignore[type-arg]
    modules: dict[str, list[str]] = {}
    for test in case["expected"]:
        module, _, name = test.partition("::")
        modules.setdefault(module, []).append(name)
    sources = {m: "".join(f"def {n}():\n    pass\n" for n in names) for m, names in modules.items()}
    body = f'repository = "{case["repository"]}"\n'
    if "runners" in case:
        body += "runners = [" + ", ".join(f'"{r}"' for r in case["runners"]) + "]\n"
    cfg = workspace(root, {**case["files"], **sources}, body)
    return survey_ci(root, cfg, list(case["expected"]))


def fates(report: CIReport, tests: list[str]) -> dict[str, str]:
    out = dict.fromkeys(tests, "runs")
    out.update({n.test: "not run" for n in report.not_run})
    out.update({u.test: "undecided" for u in report.undecided})
    return out


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_each_tests_verdict_is_the_one_read_by_hand(path: Path, tmp_path: Path) -> None:
    case = tomllib.loads(path.read_text())
    assert set(case["commits"]) == set(case["files"]), "each file says the commit it was read at"
    report = build(tmp_path, case)
    found = fates(report, list(case["expected"]))
    wrong = {t: (found[t], case["expected"][t]) for t in found if found[t] != case["expected"][t]}
    why = {n.test: n.why for n in report.not_run} | {u.test: u.why for u in report.undecided}
    assert not wrong, {t: (*v, why.get(t, "")) for t, v in wrong.items()}
