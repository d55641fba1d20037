"""One call that reseeds `random`, numpy and MLX is one leaked-state finding naming that call site and all three
states, whether the helper is the project's own or a library's outside the repository; a leak of another cause
stays its own finding, and a test that fails after it is named on it. In both modes: under `restore` the states are
put back after each test (the test that would fail under `report` passes).

Real `promote test` runs on a real repository (real pytest processes, numpy and MLX on the CPU).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from promote.core.findings import Finding
from promote.evidence import render as render_pages
from tests.helpers.cli import run_json
from tests.helpers.evidence import document
from tests.helpers.gitrepos import commit, git
from tests.helpers.packages import write_config, write_package

pytestmark = pytest.mark.slow
pytest.importorskip("mlx.core")
pytest.importorskip("numpy")

SEED_ALL = """
    import random

    import mlx.core
    import numpy


    def seed_all(n):
        random.seed(n)
        numpy.random.seed(n)
        mlx.core.random.seed(n)
"""
TESTS = """
    import os
    import random

    import fakeseed
    from proj.helpers import seed_all


    def test_a_project_one():
        seed_all(1)


    def test_a_project_two():
        seed_all(2)


    def test_b_library():
        fakeseed.seed_all(3)


    def test_c_env():
        os.environ["CALL_SITE_FLAG"] = "1"


    def test_d_draws_fresh_numbers():
        # Only after the library's seed(3) is this the first draw of a generator seeded with 3.
        assert random.random() != random.Random(3).random()
"""
STATES = ("random.state (seed call)", "numpy.random.state (seed call)", "mlx.random.state (mx.random.seed)")


def _repository(tmp_path: Path, leaks: str) -> Path:
    root = tmp_path / "repo"
    # A library as pip puts it: importable through sys.path, outside the package's rootdir and the repository.
    site = tmp_path / "site-packages"
    (site / "fakeseed").mkdir(parents=True)
    (site / "fakeseed" / "__init__.py").write_text(SEED_ALL.replace("\n    ", "\n"))
    files = {
        "proj/__init__.py": "",
        "proj/helpers.py": SEED_ALL,
        "test_calls.py": TESTS,
        "pytest.ini": f"[pytest]\npythonpath = . {site}\n",
    }
    write_package(root, "pkg", files)
    write_config(root, [{"name": "pkg", "path": "pkg", "leaks": leaks, "workers": 1, "python": sys.executable}])
    (root / ".gitignore").write_text(".promote/\n__pycache__/\n")
    git(root, "init", "-q", "-b", "main")
    commit(root, "start", {})
    return root


def _line(path: Path, text: str) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if text in line)


@pytest.fixture(scope="module", params=["restore", "report"])
def suite(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path, dict[str, Any]]:
    leaks = request.param
    root = _repository(tmp_path_factory.mktemp(f"sites-{leaks}"), leaks)
    _, report = run_json(root, "test")
    return leaks, root, report


def _leaks(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f["subject"]: f for f in report["findings"] if f["check"] == "leaked-state"}


def test_a_project_helper_is_one_finding_at_its_first_seeding_line_with_all_three_states(
    suite: tuple[str, Path, dict[str, Any]],
) -> None:
    leaks, root, report = suite
    line = _line(root / "pkg" / "proj" / "helpers.py", "random.seed(n)")
    helper = _leaks(report)[f"proj/helpers.py:{line} (seed_all)"]
    assert helper["tests"] == ["test_calls.py::test_a_project_one", "test_calls.py::test_a_project_two"]
    assert helper["message"].startswith("changed global state during 2 tests (")
    assert all(state in helper["message"] for state in STATES), helper["message"]
    assert "library code" not in helper["message"]
    assert helper["location"] == {"path": "pkg/proj/helpers.py", "line": line}
    done = (
        "(promote restored it after the test)"
        if leaks == "restore"
        else '(promote left it as is, as leaks = "report" asks)'
    )
    assert done in helper["message"], helper["message"]


def test_a_library_helper_outside_the_repository_is_one_finding_naming_it_and_what_failed_after_it(
    suite: tuple[str, Path, dict[str, Any]],
) -> None:
    leaks, root, report = suite
    line = _line(root.parent / "site-packages" / "fakeseed" / "__init__.py", "random.seed(n)")
    library = _leaks(report)[f"fakeseed/__init__.py:{line} (seed_all)"]
    assert library["tests"] == ["test_calls.py::test_b_library"]
    assert library["message"].startswith("changed global state (library code) during 1 test (")
    assert all(state in library["message"] for state in STATES), library["message"]
    assert library.get("location") is None, "a library's file is not the repository's"
    victim = "test_calls.py::test_d_draws_fresh_numbers"
    # Named as its victim's cause in both modes: `restore` puts the states back and measures what that hid.
    assert library["severity"] == "error"
    assert library["message"].endswith(f"later tests failed because of it (order-dependent): {victim}")
    [dependent] = [f for f in report["findings"] if f["check"] == "order-dependent"]
    assert (dependent["subject"], dependent["cause"]) == (victim, "test_calls.py::test_b_library")
    [package] = report["packages"]
    if leaks == "restore":
        # Put back after the test: the next test drew from the generator it would have met alone, and passed.
        assert "(promote restored it after the test)" in library["message"] and package["failed"] == 0
        assert dependent["message"].startswith("passes only because promote restored state"), dependent["message"]
    else:
        assert package["failed"] == 1


def test_another_cause_stays_its_own_finding_and_the_page_shows_one_line_per_cause(
    suite: tuple[str, Path, dict[str, Any]],
) -> None:
    _, _, report = suite
    leaks = _leaks(report)
    flag = leaks["test_calls.py::test_c_env"]
    assert "os.environ[CALL_SITE_FLAG]: <unset> -> '1'" in flag["message"]
    assert not any(state in flag["message"] for state in STATES)
    assert len(leaks) == 3, sorted(leaks)
    # The evidence page: one line per finding, the call site's tests listed on its line.
    page = render_pages.markdown(document(findings=[Finding.from_json(f) for f in report["findings"]]))
    sites = [line for line in page.splitlines() if line.startswith("- **") and "(seed_all)`: " in line]
    assert len(sites) == 2, sites
    [helper] = [line for line in sites if "`proj/helpers.py:" in line]
    assert "test_calls.py::test_a_project_one" in helper and all(state in helper for state in STATES), helper
