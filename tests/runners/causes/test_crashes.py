"""A test whose process dies is investigated like a failure: rerun alone (where it crashes again or not), then
bisected. Real crashes (a segfault, an abort) in real pytest processes, with workers = 1 and 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers.cli import run
from tests.helpers.packages import write_config, write_package

pytestmark = pytest.mark.slow

SEGFAULTS = "import ctypes\n    ctypes.string_at(0)"


def promote_test(root: Path) -> tuple[int, dict]:  # type: ignore[type-arg]
    result = run(root, "test", "--json")
    return result.exit_code, json.loads(result.stdout)


@pytest.mark.parametrize("workers", [1, 2])
def test_a_test_that_segfaults_alone_is_its_own_crash_with_the_signal_and_frames(tmp_path: Path, workers: int) -> None:
    files = {
        "test_a.py": f"def test_before():\n    pass\n\ndef test_segfaults():\n    {SEGFAULTS}\n\n"
        "def test_after():\n    pass\n",
    }
    write_package(tmp_path, "pkg", files)
    write_config(tmp_path, [{"name": "pkg", "path": "pkg", "workers": workers}])

    code, report = promote_test(tmp_path)

    assert code == 1
    [verdict] = report["packages"][0]["reruns"]
    assert (verdict["test"], verdict["verdict"]) == ("test_a.py::test_segfaults", "crashes-alone")
    assert "died of SIGSEGV when it ran alone" in verdict["detail"], verdict["detail"]
    # The innermost frame of the package's own code, from the fatal-error dump of that rerun.
    assert "ctypes/__init__.py:" in verdict["detail"], verdict["detail"]
    assert " in string_at <- test_a.py:6 in test_segfaults" in verdict["detail"], verdict["detail"]
    crashes = [f for f in report["findings"] if f["check"] == "worker-crash"]
    # Said once, with what the rerun showed, in place of the run's own line.
    assert [f["subject"] for f in crashes] == ["test_a.py::test_segfaults"]
    assert crashes[0]["message"].startswith("crashes when run alone: its process died of SIGSEGV")
    assert not [f for f in report["findings"] if f["check"] in ("flaky", "order-dependent", "rerun-undecided")]


def test_an_abort_alone_is_named_by_its_signal(tmp_path: Path) -> None:
    write_package(tmp_path, "pkg", {"test_b.py": "import os\n\ndef test_aborts():\n    os.abort()\n"})
    write_config(tmp_path, [{"name": "pkg", "path": "pkg"}])

    code, report = promote_test(tmp_path)

    assert code == 1
    [verdict] = report["packages"][0]["reruns"]
    assert verdict["verdict"] == "crashes-alone"
    assert "died of SIGABRT" in verdict["detail"]


def test_a_crash_only_after_a_test_that_sets_a_global_is_bisected_to_it(tmp_path: Path) -> None:
    files = {
        "shared.py": "STATE = {}\n",
        "test_c.py": "import shared\n\n"
        + "".join(f"def test_{i:02d}():\n    pass\n\n" for i in range(12))
        + "def test_sets_global():\n    shared.STATE['handle'] = 0\n\n"
        + "".join(f"def test_{i:02d}():\n    pass\n\n" for i in range(12, 20))
        + "def test_crashes_after():\n    if shared.STATE:\n        import ctypes\n        ctypes.string_at(0)\n",
    }
    write_package(tmp_path, "pkg", files)
    write_config(tmp_path, [{"name": "pkg", "path": "pkg"}])

    code, report = promote_test(tmp_path)

    assert code == 1
    [verdict] = report["packages"][0]["reruns"]
    assert (verdict["test"], verdict["verdict"]) == ("test_c.py::test_crashes_after", "order-dependent")
    assert verdict["polluters"] == ["test_c.py::test_sets_global"]
    [found] = [f for f in report["findings"] if f["check"] == "order-dependent"]
    assert found["cause"] == "test_c.py::test_sets_global"
