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

from promote import config
from promote.checks.ci import CIReport, survey_ci
from tests.checks.test_ci import workspace

CASES = sorted((Path(__file__).parent / "workflows").glob("*.toml"))


def build(root: Path, case: dict) -> CIReport:  # type: ignore[type-arg]
    sources = {m: _module(names) for m, names in _by_module(case["expected"]).items()}
    body = f'repository = "{case["repository"]}"\n'
    if "runners" in case:
        body += "runners = [" + ", ".join(f'"{r}"' for r in case["runners"]) + "]\n"
    workspace(root, {**case["files"], **sources}, body)
    trunk = case.get("trunk", "main")
    (root / "promote.toml").write_text(f'[promote]\ntrunk = "{trunk}"\n[promote.ci]\n{body}')
    return survey_ci(root, config.load(root / "promote.toml"), list(case["expected"]))


def _by_module(tests: list[str]) -> dict[str, list[str]]:
    modules: dict[str, list[str]] = {}
    for test in tests:
        module, _, name = test.partition("::")
        modules.setdefault(module, []).append(name)
    return modules


def _module(names: list[str]) -> str:
    """A test module with each `name`: a function, or `Class::method` in a unittest TestCase (both runners run
    those)."""
    classes: dict[str, list[str]] = {}
    text = "import unittest\n\n"
    for name in names:
        cls, _, method = name.rpartition("::")
        if cls:
            classes.setdefault(cls, []).append(method)
        else:
            text += f"def {name}():\n    pass\n"
    for cls, methods in classes.items():
        text += f"class {cls}(unittest.TestCase):\n" + "".join(f"    def {m}(self):\n        pass\n" for m in methods)
    return text


def fates(report: CIReport, tests: list[str]) -> dict[str, str]:
    out = dict.fromkeys(tests, "runs")
    out.update({n.test: "not run" for n in report.not_run})
    out.update({u.test: "undecided" for u in report.undecided})
    return out


def read(path: Path) -> dict:  # type: ignore[type-arg]
    case = tomllib.loads(path.read_text())
    assert set(case["commits"]) == set(case["files"]), "each file says the commit it was read at"
    return case


@pytest.fixture(scope="module")
def found(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, str]]:
    """Each case built and audited once (asking the tools is the slow part); its fate for each test id."""
    out = {}
    for path in CASES:
        case = read(path)
        report = build(tmp_path_factory.mktemp(path.stem), case)
        out[path.stem] = fates(report, list(case["expected"]))
        why = {n.test: n.why for n in report.not_run}
        out[path.stem] = {t: f"{f}: {why[t]}" if t in why else f for t, f in out[path.stem].items()}
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
    # The goal: at least 80% of the real workflows read to a decision where the record has one.
    assert len(misses) <= 0.2 * len(CASES), misses
