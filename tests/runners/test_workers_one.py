"""`workers = 1` is plain pytest, as `cd PACKAGE && python -m pytest` runs it, even where xdist is installed; a
package whose own options disable xdist runs without it. Real packages, real pytest processes through promote."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.cli import run
from tests.helpers.packages import CRASHING_SUITE, write_config, write_package

pytestmark = pytest.mark.slow

PLAIN = """
    import sys
    import threading

    def test_on_the_main_thread_of_pytest_itself():
        assert threading.current_thread() is threading.main_thread()
        # The process promote started, not an xdist worker (whose argv is execnet's).
        assert any(a.startswith("--promote-out=") for a in sys.argv), sys.argv

    def test_passes():
        pass

    def test_fails():
        assert 1 == 2
"""


def _report(root: Path) -> tuple[int, dict[str, Any], str]:
    result = run(root, "test")
    results = next(line for line in result.stdout.splitlines() if line.startswith("results: "))
    report = json.loads((Path(results.split(": ", 1)[1]) / "run.json").read_text())
    return result.exit_code, report, result.stdout + result.stderr


def _counts(pkg: dict[str, Any]) -> tuple[int, int, int, int]:
    return pkg["passed"], pkg["failed"], pkg["errors"], pkg["crashed"]


@pytest.mark.parametrize(
    ("workers", "said"),
    [(1, False), (3, True)],
)
def test_a_package_that_disables_xdist_runs_as_its_own_pytest_would(tmp_path: Path, workers: int, said: bool) -> None:
    # Its own addopts say -p no:xdist: plain pytest passes with it; a promote that added -n would be a usage error.
    write_package(tmp_path, "pkg", {"pytest.ini": "[pytest]\naddopts = -p no:xdist\n", "tests/test_a.py": PLAIN})
    write_config(tmp_path, [{"name": "pkg", "path": "pkg", "workers": workers, "python": sys.executable}])

    status, report, text = _report(tmp_path)

    pkg = report["packages"][0]
    assert status == 1, text
    assert _counts(pkg) == (2, 1, 0, 0), text
    assert not [f for f in report["findings"] if f["check"] == "package-error"], report["findings"]
    # Its reruns ran too (no `-n 0` that this package's pytest would refuse): the failure reproduced alone.
    assert [(r["test"], r["verdict"]) for r in pkg["reruns"]] == [("tests/test_a.py::test_fails", "genuine")]
    notes = [f for f in report["findings"] if f["check"] == "runs-without-xdist"]
    if said:
        assert len(notes) == 1 and notes[0]["severity"] == "info", notes
        assert "-p no:xdist, in " + str(tmp_path / "pkg" / "pytest.ini") in notes[0]["message"]
        assert "not on the 3 workers configured" in notes[0]["message"]
    else:
        assert notes == []  # workers = 1 is plain pytest anyway: nothing to say


def test_a_root_conftest_that_replaces_popen_does_not_stop_a_one_worker_package(tmp_path: Path) -> None:
    # xdist's execnet spawns its workers with subprocess.Popen; plain pytest never does.
    conftest = """
        import subprocess

        class _Refused(subprocess.Popen):
            def __init__(self, *args, **kwargs):
                raise RuntimeError("no subprocesses in this suite")

        subprocess.Popen = _Refused
    """
    write_package(tmp_path, "pkg", {"conftest.py": conftest, "tests/test_a.py": PLAIN})
    write_config(tmp_path, [{"name": "pkg", "path": "pkg", "workers": 1, "python": sys.executable}])

    status, report, text = _report(tmp_path)

    assert status == 1, text
    assert _counts(report["packages"][0]) == (2, 1, 0, 0), text
    assert "INTERNALERROR" not in text


def test_a_test_that_kills_a_one_worker_process_is_crashed_and_the_rest_still_runs(tmp_path: Path) -> None:
    write_package(tmp_path, "pkg", {"tests/test_a.py": CRASHING_SUITE})
    write_config(tmp_path, [{"name": "pkg", "path": "pkg", "workers": 1, "python": sys.executable}])

    status, report, text = _report(tmp_path)

    pkg = report["packages"][0]
    assert status == 1, text
    assert _counts(pkg) == (3, 1, 0, 2), text
    crashes = sorted(f["subject"] for f in report["findings"] if f["check"] == "worker-crash")
    assert crashes == ["tests/test_a.py::test_2_dies", "tests/test_a.py::test_5_killed"]
    assert pkg["not_run"] == 0
    # Plain pytest processes (xdist's would be gw0...), each started after the last died under a test.
    names = sorted(p.name for p in (Path(pkg["results"]) / "all").glob("progress-*.jsonl"))
    assert names == ["progress-main.1.jsonl", "progress-main.2.jsonl", "progress-main.jsonl"]


def test_a_configuration_file_promote_cannot_read_is_pytests_to_report_not_a_traceback(tmp_path: Path) -> None:
    # Not valid TOML: promote's reader gives its typed error, runs the package as configured, pytest says why.
    write_package(
        tmp_path,
        "pkg",
        {"pyproject.toml": '[tool.pytest.ini_options]\naddopts = "-p no:xdist\n', "tests/test_a.py": PLAIN},
    )
    write_config(tmp_path, [{"name": "pkg", "path": "pkg", "workers": 2, "python": sys.executable}])

    status, report, text = _report(tmp_path)

    assert status == 1, text
    errors = [f for f in report["findings"] if f["check"] == "package-error"]
    # One per pytest process promote started (the parallel part, then the serial part): each names the file.
    assert errors and all("pyproject.toml: Illegal character" in f["message"] for f in errors), errors
    assert "Traceback" not in text
