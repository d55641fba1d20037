"""A plugin the package loads itself (`-p` in its addopts) that reorders its tests: promote's reruns and bisection
ask for the suite's own order and get it, so a deterministic polluter is found, never called flaky."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.helpers.cli import run_json
from tests.helpers.packages import write_config, write_package

pytestmark = pytest.mark.slow

# The team's own plugin: runs the tests in the reverse of the order it is given (as a "newest first" plugin would).
REVERSE = """
def pytest_collection_modifyitems(config, items):
    items.reverse()
"""

VICTIM = """
import os

def test_victim():
    assert "POLLUTED" not in os.environ
"""

POLLUTER = """
import os

def test_polluter():
    os.environ["POLLUTED"] = "1"
"""

BYSTANDERS = "".join(f"def test_{n}():\n    pass\n\n\n" for n in range(4))


@pytest.mark.parametrize("workers", [1, 2])
def test_a_polluter_run_first_by_the_packages_own_plugin_is_found_by_the_reruns(tmp_path: Path, workers: int) -> None:
    files = {
        "pytest.ini": "[pytest]\naddopts = -p reverse_order\n",
        "reverse_order.py": REVERSE,
        # Collected a, b, m, z; run z, m, b, a: the polluter before the victim only in the plugin's order.
        "tests/test_a_victim.py": VICTIM,
        "tests/test_b_middle.py": BYSTANDERS,
        "tests/test_m_more.py": BYSTANDERS,
        "tests/test_z_polluter.py": POLLUTER,
    }
    write_package(tmp_path, "pkg", files)
    write_config(tmp_path, [{"name": "pkg", "path": "pkg", "workers": workers, "python": sys.executable}])
    if workers == 2:  # one worker for all: xdist would spread the polluter and the victim apart
        text = (tmp_path / "promote.toml").read_text()
        (tmp_path / "promote.toml").write_text(text + 'serial = ["tests/*"]\n')

    status, report = run_json(tmp_path, "test")

    pkg = report["packages"][0]
    assert status == 1 and (pkg["passed"], pkg["failed"]) == (9, 1), report
    [verdict] = pkg["reruns"]
    assert verdict["test"] == "tests/test_a_victim.py::test_victim"
    assert verdict["verdict"] == "order-dependent", verdict
    assert verdict["polluters"] == ["tests/test_z_polluter.py::test_polluter"]
    assert not [f for f in report["findings"] if f["check"] == "flaky"]
    [leak] = [f for f in report["findings"] if f["check"] == "leaked-state"]
    assert leak["severity"] == "error" and leak["subject"] == "tests/test_z_polluter.py::test_polluter", leak
