"""Alone is as `pytest MODULE::TEST` runs it: only the test's own module collected, its configuration kept."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers.cli import run
from tests.helpers.packages import write_config, write_package

pytestmark = pytest.mark.slow


def test_a_failure_that_needs_another_module_collected_is_not_its_own(tmp_path: Path) -> None:
    # test_z sets a module attribute while pytest imports it (no probe sees that): every test fails once it is
    # collected, whatever ran before. Plain `pytest test_a.py::test_sees_default` passes.
    files = {
        "settings.py": "MODE = 'plain'\n",
        "test_a.py": "import settings\n\n\ndef test_sees_default():\n    assert settings.MODE == 'plain'\n",
        "test_z.py": "import settings\n\nsettings.MODE = 'draft'\n\n\ndef test_other():\n    pass\n",
    }
    write_package(tmp_path, "pkg", files)
    write_config(tmp_path, [{"name": "pkg", "path": "pkg", "workers": 1}])

    result = run(tmp_path, "test", "--json")

    report = json.loads(result.stdout)
    [rerun] = report["packages"][0]["reruns"]
    assert rerun["test"] == "test_a.py::test_sees_default"
    assert rerun["verdict"] == "order-dependent", rerun
    [finding] = [f for f in report["findings"] if f["check"] == "order-dependent"]
    assert "importing the package's other modules makes it fail" in finding["message"], finding["message"]
    assert "genuine" not in json.dumps(report["packages"][0]["reruns"])


def test_alone_keeps_the_ini_file_and_conftest_on_the_way(tmp_path: Path) -> None:
    # The package's ini file names a marker and its conftest a fixture: collected alone, the module still has both.
    files = {
        "pytest.ini": "[pytest]\nmarkers =\n    model: needs a model\naddopts = --strict-markers\n",
        "tests/conftest.py": "import pytest\n\n\n@pytest.fixture\ndef answer():\n    return 42\n",
        "tests/unit/test_b.py": (
            "import pytest\n\n\n@pytest.mark.model\ndef test_wrong(answer):\n    assert answer == 41\n"
        ),
        "tests/other/test_c.py": "raise RuntimeError('a module that cannot be imported')\n",
    }
    write_package(tmp_path, "pkg", files)
    write_config(tmp_path, [{"name": "pkg", "path": "pkg", "workers": 1}])

    report = json.loads(run(tmp_path, "test", "--json").stdout)

    reruns = {r["test"]: r for r in report["packages"][0]["reruns"]}
    assert reruns["tests/unit/test_b.py::test_wrong"]["verdict"] == "genuine", reruns
    assert reruns["tests/unit/test_b.py::test_wrong"]["reruns"] == 1
    rerun_dir = Path(report["packages"][0]["results"]) / "reruns" / "rerun-001"
    # Only its own module was collected: the broken one beside it was never imported in the rerun.
    assert "test_c.py" not in (rerun_dir / "pytest.log").read_text()
