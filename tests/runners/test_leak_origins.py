"""Leaks that code outside the tests made (a library's call, an autouse fixture, a library's daemon thread) are one
finding each, naming that code, in either mode, over one worker or two, a worker that died included.

Real `promote test` runs on a real repository (real pytest and xdist processes, MLX on the CPU).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.cli import run_json
from tests.helpers.gitrepos import commit, git
from tests.helpers.packages import write_config, write_package

pytestmark = pytest.mark.slow
pytest.importorskip("mlx.core")

SEEDERS = 4
# A change as a finding shows it: `before -> after` (an MLX key is two numbers).
CHANGE = re.compile(r"(key\[\d+, \d+\]|\S+) -> (key\[\d+, \d+\]|\S+)")
LIBRARY = '''
    import threading

    import mlx.core as mx


    def reset():
        """Seeds MLX's global generator: every test that calls it leaks the seed."""
        mx.random.seed(0)


    class Monitor(threading.Thread):
        """Like tqdm's monitor: a daemon thread a library starts once and leaves running."""

        def __init__(self):
            super().__init__(daemon=True)
            self.stop = threading.Event()
            self.start()

        def run(self):
            self.stop.wait()


    MONITOR = []


    def progress():
        if not MONITOR:
            MONITOR.append(Monitor())
'''
CONFTEST = """
    import mlx.core as mx
    import pytest


    @pytest.fixture(autouse=True)
    def seeded(request):
        if request.node.get_closest_marker("seeded"):
            mx.random.seed(7)
        yield
"""
TESTS = (
    """
import os
import sys

import mlx.core as mx
import pytest

from seeding import progress, reset
"""
    + "".join(f"\ndef test_lib_{i}():\n    reset()\n    mx.random.normal((2,))\n" for i in range(SEEDERS))
    + "".join(f"\n@pytest.mark.seeded\ndef test_fixture_{i}():\n    pass\n" for i in range(SEEDERS))
    + """
def test_own_seed():
    mx.random.seed(5)

def test_progress_bar():
    progress()

def test_same_value():
    os.environ["HOME"] = os.environ.get("HOME", "")
    mx.set_default_device(mx.default_device())

def test_path_appended():
    sys.path.append("/nowhere/at/all")

class TestSetUp:
    def setup_method(self):
        mx.random.seed(9)

    def test_in_a_class(self):
        pass
"""
)
FILES = {
    "seeding/__init__.py": LIBRARY,
    "conftest.py": CONFTEST,
    "test_suite.py": TESTS,
    "pytest.ini": "[pytest]\npythonpath = .\nmarkers =\n    seeded: seeded by the autouse fixture\n",
}


def _repository(root: Path, files: dict[str, str], leaks: str, workers: int) -> Path:
    write_package(root, "pkg", files)
    package = {"name": "pkg", "path": "pkg", "leaks": leaks, "workers": workers, "python": sys.executable}
    write_config(root, [package])
    (root / ".gitignore").write_text(".promote/\n__pycache__/\n")
    git(root, "init", "-q", "-b", "main")
    commit(root, "start", {})
    return root


def _leaks(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f["subject"]: f for f in report["findings"] if f["check"] == "leaked-state"}


def _line(path: Path, text: str) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if text in line)


@pytest.fixture(scope="module", params=[("restore", 1), ("report", 2)], ids=["restore-1", "report-2"])
def suite(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path, int, dict]:  # type: ignore[type-arg]
    leaks, workers = request.param
    root = _repository(tmp_path_factory.mktemp(f"origins-{leaks}"), FILES, leaks, workers)
    status, report = run_json(root, "test")
    return leaks, root, status, report


def test_a_library_call_is_one_finding_at_its_line_listing_the_tests(suite: tuple[str, Path, int, dict]) -> None:  # type: ignore[type-arg]
    _, root, _, report = suite
    line = _line(root / "pkg" / "seeding" / "__init__.py", "mx.random.seed(0)")
    library = _leaks(report)[f"seeding/__init__.py:{line} (reset)"]
    assert library["severity"] == "warning"
    assert sorted(library["tests"]) == [f"test_suite.py::test_lib_{i}" for i in range(SEEDERS)]
    assert library["message"].startswith(f"changed global state during {SEEDERS} tests (")
    assert "mlx.random.state (mx.random.seed)" in library["message"]
    assert library["location"] == {"path": "pkg/seeding/__init__.py", "line": line}


def test_an_autouse_fixture_is_one_finding_naming_it_and_where_it_is_defined(
    suite: tuple[str, Path, int, dict],
) -> None:  # type: ignore[type-arg]
    _, root, _, report = suite
    # Where pytest itself says a fixture is (`--fixtures`): the first line of its definition, its decorator.
    line = _line(root / "pkg" / "conftest.py", "@pytest.fixture(autouse=True)")
    fixture = _leaks(report)[f"fixture seeded (conftest.py:{line})"]
    assert sorted(fixture["tests"]) == [f"test_suite.py::test_fixture_{i}" for i in range(SEEDERS)]
    # Under `report` the next seeded test finds the key the last one left: seeded again, never "from X to X".
    assert "mlx.random.state (mx.random.seed): not called -> mx.random.seed called" in fixture["message"]
    assert all(before != after for before, after in CHANGE.findall(fixture["message"])), fixture["message"]
    # None of the tests the fixture seeded is named as a cause of its own.
    assert not [s for s in _leaks(report) if "test_fixture_" in s]


def test_the_tests_own_leaks_stay_per_test_and_nothing_reads_as_a_change_to_the_same_value(
    suite: tuple[str, Path, int, dict],  # type: ignore[type-arg]
) -> None:
    _, _, _, report = suite
    leaks = _leaks(report)
    # The tests' own seeds are grouped as before: by resource and way of change, named by their tests.
    own_tests = ["test_suite.py::TestSetUp::test_in_a_class", "test_suite.py::test_own_seed"]
    [own] = [f for f in leaks.values() if f["subject"] in own_tests]
    assert sorted(own["tests"]) == own_tests and own["cause"].startswith("test_suite.py::")
    # pytest runs `setup_method` through a fixture of its own: the method is the test module's own code.
    assert "mlx.random.state (mx.random.seed): not called -> mx.random.seed called" in own["message"]
    # A value set to what it was is no change; an entry appended to a long sys.path shows as what was added.
    assert "test_suite.py::test_same_value" not in leaks
    path = leaks["test_suite.py::test_path_appended"]["message"]
    assert "sys.path: (" in path and " unchanged, '/nowhere/at/all')" in path, path
    assert len(leaks) == 5, sorted(leaks)


def test_a_library_daemon_thread_is_one_warning_and_never_an_error(suite: tuple[str, Path, int, dict]) -> None:  # type: ignore[type-arg]
    _, root, status, report = suite
    line = _line(root / "pkg" / "seeding" / "__init__.py", "self.start()")
    thread = _leaks(report)[f"seeding/__init__.py:{line} (__init__)"]
    assert thread["severity"] == "warning" and thread["tests"] == ["test_suite.py::test_progress_bar"]
    assert "threads[seeding.Monitor]" in thread["message"] and "left running" in thread["message"]
    assert "could not restore" not in json.dumps(report["findings"])
    assert status == 0, report["findings"]


CRASHING = {
    **FILES,
    "test_suite.py": """
import os

from seeding import reset
"""
    + "".join(f"\ndef test_lib_{i}():\n    reset()\n" for i in range(8))
    + """
def test_z_dies():
    # xdist hands a worker this last test only after it ran others: it dies with leaks it never wrote out.
    os.abort()
""",
}


def test_the_leaks_of_a_worker_that_died_are_grouped_with_the_others(tmp_path: Path) -> None:
    root = _repository(tmp_path, CRASHING, "report", 2)

    _, report = run_json(root, "test")

    assert [f["subject"] for f in report["findings"] if f["check"] == "worker-crash"] == ["test_suite.py::test_z_dies"]
    [library] = _leaks(report).values()
    assert sorted(library["tests"]) == [f"test_suite.py::test_lib_{i}" for i in range(8)]
    results = Path(report["packages"][0]["results"])
    logs = results.glob("**/progress-gw*.jsonl")
    dead = [p for p in logs if not (p.parent / f"results-{p.stem.removeprefix('progress-')}.json").is_file()]
    assert dead and '"leaked":' in dead[0].read_text()
