"""Failures grouped by cause: one group's reruns spent once, its finding said once, the same each time."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.cli import run
from tests.helpers.gitrepos import commit, git
from tests.helpers.packages import write_config, write_package

pytestmark = pytest.mark.slow

# A project helper that opens a model directory this machine does not have: the cause of every test using it.
MODELS = """\
from pathlib import Path

ROOT = Path("/nonexistent-promote-models")


def open_model(name):
    return (ROOT / name / "config.json").read_text()
"""
# A module-level flag an earlier test sets; every later test asserting through the same line fails.
FLAGS = """\
DRAFT = {"on": False}


def check_plain():
    assert not DRAFT["on"], "draft mode left on"
"""


def _suite(models: int, victims: int) -> dict[str, str]:
    names = ", ".join(f'"m{i}"' for i in range(models))
    return {
        "models.py": MODELS,
        "flags.py": FLAGS,
        "test_a_models.py": (
            "import pytest\nimport models\n\n\n"
            f"@pytest.mark.parametrize('name', [{names}])\n"
            "def test_loads(name):\n    assert models.open_model(name)\n"
        ),
        "test_b_flag.py": "import flags\n\n\ndef test_turns_draft_on():\n    flags.DRAFT['on'] = True\n",
        "test_c_plain.py": "import flags\n\n\n"
        + "".join(f"def test_plain_{i}():\n    flags.check_plain()\n\n\n" for i in range(victims))
        + "def test_own():\n    assert 1 + 1 == 3\n",
    }


def _promote_test(root: Path) -> dict[str, Any]:
    result = run(root, "test", "--json")
    assert result.exit_code == 1, result.stdout + result.stderr
    report: dict[str, Any] = json.loads(result.stdout)
    return report


def test_sixty_failures_of_one_cause_are_one_finding_and_a_few_reruns(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q", "-b", "main")
    write_package(tmp_path, "pkg", _suite(models=60, victims=5))
    write_config(tmp_path, [{"name": "pkg", "path": "pkg", "workers": 1}])
    commit(tmp_path, "the package")

    report = _promote_test(tmp_path)

    [pkg] = report["packages"]
    assert pkg["failed"] == 60 + 5 + 1
    same = [f for f in report["findings"] if f["check"] == "same-cause"]
    assert len(same) == 1, same
    [models] = same
    assert models["message"].startswith("60 tests fail with FileNotFoundError at models.py:7"), models["message"]
    assert models["location"] == {"path": "pkg/models.py", "line": 7}
    assert sorted(models["tests"]) == sorted(f"test_a_models.py::test_loads[m{i}]" for i in range(60))
    reruns = {r["test"]: r for r in pkg["reruns"]}
    # Two of the sixty rerun (one process each), the rest given their verdict, none of them "undecided".
    rerun = [t for t, r in reruns.items() if "models" in t and r["reruns"] > 0]
    assert sorted(rerun) == ["test_a_models.py::test_loads[m0]", "test_a_models.py::test_loads[m9]"], rerun
    assert {reruns[f"test_a_models.py::test_loads[m{i}]"]["verdict"] for i in range(60)} == {"genuine"}
    assert not [f for f in report["findings"] if f["check"] == "rerun-undecided"]
    # The five victims of one flag are one order-dependent finding naming its polluter, with all five tests.
    dependent = [f for f in report["findings"] if f["check"] == "order-dependent"]
    assert len(dependent) == 1, dependent
    assert dependent[0]["cause"] == "test_b_flag.py::test_turns_draft_on"
    assert sorted(dependent[0]["tests"]) == [f"test_c_plain.py::test_plain_{i}" for i in range(5)]
    assert dependent[0]["message"].startswith("5 tests fail with AssertionError at flags.py:5"), dependent[0]
    # A failure of its own cause is its own: genuine, with no finding beside the group's.
    assert reruns["test_c_plain.py::test_own"]["verdict"] == "genuine"
    assert "test_c_plain.py::test_own" not in {t for f in report["findings"] for t in f.get("tests", [])}


def test_unittest_cases_failing_through_the_same_line_join_the_group(tmp_path: Path) -> None:
    # unittest catches a TestCase's failure itself; pytest hands it on late, and the cause must still be read.
    suite = _suite(models=3, victims=0)
    suite["test_d_cases.py"] = "import unittest\nimport models\n\n\nclass TestModels(unittest.TestCase):\n" + "".join(
        f"    def test_case_{i}(self):\n        models.open_model('u{i}')\n\n" for i in range(3)
    )
    write_package(tmp_path, "pkg", suite)
    write_config(tmp_path, [{"name": "pkg", "path": "pkg", "workers": 1}])

    report = _promote_test(tmp_path)

    [same] = [f for f in report["findings"] if f["check"] == "same-cause"]
    assert same["message"].startswith("6 tests fail with FileNotFoundError at models.py:7"), same["message"]
    cases = [f"test_d_cases.py::TestModels::test_case_{i}" for i in range(3)]
    assert set(cases) <= set(same["tests"]), same["tests"]


def test_two_runs_of_the_same_tree_rerun_the_same_tests_and_say_the_same(tmp_path: Path) -> None:
    write_package(tmp_path, "pkg", _suite(models=12, victims=0))
    write_config(tmp_path, [{"name": "pkg", "path": "pkg", "workers": 2}])

    first, second = _promote_test(tmp_path), _promote_test(tmp_path)

    def said(report: dict[str, Any]) -> tuple[object, ...]:
        findings = sorted((f["check"], f["subject"], f["message"]) for f in report["findings"])
        rerun = sorted(r["test"] for r in report["packages"][0]["reruns"] if r["reruns"] > 0)
        return tuple(findings), tuple(rerun)

    assert said(first) == said(second)


def test_the_run_report_and_the_page_list_a_group_once_under_its_cause(tmp_path: Path) -> None:
    write_package(tmp_path, "pkg", _suite(models=8, victims=0))
    write_config(tmp_path, [{"name": "pkg", "path": "pkg", "workers": 1}])

    result = run(tmp_path, "test")

    lines = result.stdout.splitlines()
    failed = lines[lines.index("failed:") + 1 : lines.index("findings:") - 1]
    assert failed == [
        "  pkg: test_c_plain.py::test_own (failed)",
        "  pkg: 8 tests fail with FileNotFoundError at models.py:7 (same cause), test_a_models.py::test_loads[m0]"
        " and 7 more",
    ], failed
