"""A package's pytest that stops early (its own --maxfail, -x) or loses a worker: what was collected is still counted,
and the stop is said as what it is, never as tests gone. Real repositories, real `promote test` runs, the history."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.cli import run_json
from tests.helpers.gitrepos import commit, git
from tests.helpers.packages import write_config, write_package

pytestmark = pytest.mark.slow

TWENTY = "".join(f"def test_{n:02d}():\n    pass\n\n\n" for n in range(1, 21))


def _repository(root: Path, files: dict[str, str], workers: int) -> None:
    write_package(root, "pkg", files)
    write_config(root, [{"name": "pkg", "path": "pkg", "workers": workers, "python": sys.executable}])
    (root / "promote.toml").write_text(
        (root / "promote.toml").read_text().replace("[promote]\n", "[promote]\nmax_reruns = 2\n")
    )
    (root / ".gitignore").write_text(".promote/\n__pycache__/\n")
    git(root, "init", "-q", "-b", "main")
    commit(root, "start", {})


def _checks(report: dict[str, Any], check: str) -> list[dict[str, Any]]:
    return [f for f in report["findings"] if f["check"] == check]


def test_the_packages_own_maxfail_is_said_as_a_stop_and_its_unrun_tests_stay_collected(tmp_path: Path) -> None:
    _repository(tmp_path, {"pytest.ini": "[pytest]\naddopts = --maxfail=1\n", "tests/test_a.py": TWENTY}, workers=1)
    status, first = run_json(tmp_path, "test")
    assert status == 0 and first["packages"][0]["passed"] == 20, first
    # A commit that breaks one test and deletes nothing.
    broken = commit(
        tmp_path,
        "break test_03",
        {"pkg/tests/test_a.py": TWENTY.replace("test_03():\n    pass", "test_03():\n    assert 1 == 2")},
    )

    status, second = run_json(tmp_path, "test")

    pkg = second["packages"][0]
    assert status == 1
    assert (pkg["passed"], pkg["failed"], pkg["not_run"]) == (2, 1, 17), pkg
    assert _checks(second, "tests-dropped") == [], f"nothing was removed in {broken[:7]}"
    [stopped] = _checks(second, "pytest-stopped")
    assert stopped["severity"] == "warning" and stopped["subject"] == "pkg"
    assert "stopping after 1 failures" in stopped["message"], stopped
    assert "the package's own --maxfail=1" in stopped["message"]
    assert "17 of 20 collected tests did not run" in stopped["message"]

    # Fixed again: every test runs, and the history never thought any had gone.
    commit(tmp_path, "fix test_03", {"pkg/tests/test_a.py": TWENTY})
    status, third = run_json(tmp_path, "test")
    assert status == 0 and third["packages"][0]["passed"] == 20
    assert _checks(third, "tests-dropped") == [] and _checks(third, "pytest-stopped") == []


def test_exitfirst_is_the_same_stop(tmp_path: Path) -> None:
    _repository(tmp_path, {"setup.cfg": "[tool:pytest]\naddopts = -x\n", "tests/test_a.py": TWENTY}, workers=1)
    run_json(tmp_path, "test")
    commit(
        tmp_path,
        "break test_10",
        {"pkg/tests/test_a.py": TWENTY.replace("test_10():\n    pass", "test_10():\n    assert 0")},
    )

    _, report = run_json(tmp_path, "test")

    assert report["packages"][0]["not_run"] == 10
    assert _checks(report, "tests-dropped") == []
    [stopped] = _checks(report, "pytest-stopped")
    assert "--maxfail=1 (or -x)" in stopped["message"] and "10 of 20 collected tests" in stopped["message"]


def test_a_process_that_dies_outside_any_test_leaves_its_tests_collected_and_says_so(tmp_path: Path) -> None:
    # The death is in the package's own hook, after collection and before the first test: no test to name.
    conftest = "import os\n\n\ndef pytest_runtestloop(session):\n    if os.path.exists('die'):\n        os._exit(7)\n"
    _repository(tmp_path, {"conftest.py": conftest, "tests/test_a.py": TWENTY}, workers=1)
    run_json(tmp_path, "test")
    (tmp_path / "pkg" / "die").write_text("")
    commit(tmp_path, "an unrelated change")

    status, report = run_json(tmp_path, "test")

    assert status == 1 and report["packages"][0]["not_run"] == 20
    assert _checks(report, "tests-dropped") == []
    [stopped] = _checks(report, "pytest-stopped")
    assert "pytest ended (status 7) before running them" in stopped["message"]
    assert "20 of 20 collected tests did not run" in stopped["message"]


def test_a_crashed_xdist_worker_loses_no_test_and_drops_none(tmp_path: Path) -> None:
    _repository(tmp_path, {"tests/test_a.py": TWENTY}, workers=2)
    run_json(tmp_path, "test")
    dying = TWENTY.replace("def test_05():\n    pass", "def test_05():\n    import os\n    os._exit(3)")
    commit(tmp_path, "test_05 dies", {"pkg/tests/test_a.py": dying})

    status, report = run_json(tmp_path, "test")

    pkg = report["packages"][0]
    assert status == 1
    assert (pkg["passed"], pkg["crashed"], pkg["not_run"]) == (19, 1, 0), json.dumps(report["findings"])
    assert _checks(report, "tests-dropped") == []
