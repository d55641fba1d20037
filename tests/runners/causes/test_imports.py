"""A module that sets state when imported is the cause of the failures it makes, whatever the order."""

from __future__ import annotations

from pathlib import Path

import pytest

from promote import config
from promote.runners.suite import run_tests
from tests.helpers.packages import write_config, write_package

pytestmark = pytest.mark.slow

VICTIMS = """
    import os

    def test_default_mode_1():
        assert os.environ.get("APP_MODE") is None

    def test_default_mode_2():
        assert os.environ.get("APP_MODE") is None

    def test_unrelated():
        assert True
"""
SETTER = """
    import os

    os.environ["APP_MODE"] = "1"

    def test_uses_mode():
        assert os.environ["APP_MODE"] == "1"
"""


# The setter collected before the victims, and after them: pytest imports every module before the first test.
@pytest.mark.parametrize("setter", ["tests/test_a_setup.py", "tests/test_z_setup.py"])
@pytest.mark.parametrize("workers", [1, 2])
def test_state_set_at_import_is_named_as_the_cause_not_called_flaky(tmp_path: Path, setter: str, workers: int) -> None:
    write_package(tmp_path, "pkg", {"tests/test_m_app.py": VICTIMS, setter: SETTER})
    path = write_config(tmp_path, [{"name": "pkg", "path": "pkg", "workers": workers}])

    result = run_tests(config.load(path))

    [pkg] = result.packages
    assert (pkg.passed, pkg.failed) == (2, 2)
    assert not [f for f in result.findings if f.check == "flaky"]
    found = sorted((f.subject, f.cause) for f in result.findings if f.check == "order-dependent")
    assert found == [
        ("tests/test_m_app.py::test_default_mode_1", setter),
        ("tests/test_m_app.py::test_default_mode_2", setter),
    ]
    [leak] = [f for f in result.findings if f.check == "leaked-state"]
    assert leak.subject == setter and leak.severity == "error"
    assert leak.message.startswith(f"{setter} changed global state when imported, before any test ran: ")
    assert "os.environ[APP_MODE]: <unset> -> '1'" in leak.message
    assert "later tests failed because of it (order-dependent): tests/test_m_app.py::test_default_mode_1" in (
        leak.message
    )


def test_a_test_that_fails_alone_with_no_module_setting_state_stays_genuine(tmp_path: Path) -> None:
    files = {"tests/test_m_app.py": VICTIMS, "tests/test_x.py": "def test_red():\n    assert False\n"}
    write_package(tmp_path, "pkg", files)
    path = write_config(tmp_path, [{"name": "pkg", "path": "pkg"}])

    result = run_tests(config.load(path))

    [verdict] = result.packages[0].verdicts
    assert (verdict.test, verdict.kind) == ("tests/test_x.py::test_red", "genuine")
    assert not [f for f in result.findings if f.check in ("order-dependent", "flaky", "leaked-state")]


def test_a_failure_of_its_own_beside_a_module_setting_state_costs_one_rerun(tmp_path: Path) -> None:
    # Rerun alone with the importer left out of collection, it fails all the same: its own failure, told in one
    # rerun (each rerun collects the whole package; a second to rule the import out would double their cost).
    files = {"tests/test_setup.py": SETTER, "tests/test_x.py": "def test_red():\n    assert False\n"}
    write_package(tmp_path, "pkg", files)
    path = write_config(tmp_path, [{"name": "pkg", "path": "pkg"}])

    result = run_tests(config.load(path))

    [verdict] = result.packages[0].verdicts
    assert (verdict.test, verdict.kind, verdict.reruns) == ("tests/test_x.py::test_red", "genuine", 1)
    assert not [f for f in result.findings if f.check in ("order-dependent", "flaky")]
