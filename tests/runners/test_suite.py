"""`promote test` end to end: real pytest processes on packages written into tmp_path."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from promote.evidence.history import History
from tests.helpers.cli import run
from tests.helpers.gitrepos import commit, git
from tests.helpers.packages import write_config, write_package

pytestmark = pytest.mark.slow

MIXED = {
    "test_mixed.py": """
        import os
        import unittest

        def test_ok():
            pass

        def test_fails():
            assert 1 == 2

        def test_dies():
            os._exit(1)

        def test_after_the_crash():
            pass

        class Sub(unittest.TestCase):
            def test_sub(self):
                for i in range(3):
                    with self.subTest(i=i):
                        self.assertLess(i, 2)
    """,
}


def run_test(root: Path, *args: str) -> tuple[int, dict]:  # type: ignore[type-arg]
    result = run(root, "test", "--json", *args)
    return result.exit_code, json.loads(result.stdout)


def package_of(report: dict, name: str) -> dict:  # type: ignore[type-arg]
    return next(p for p in report["packages"] if p["name"] == name)


def test_crash_is_named_and_the_rest_of_the_package_still_runs(tmp_path: Path) -> None:
    write_package(tmp_path, "mixed", MIXED)
    write_config(tmp_path, [{"name": "mixed", "path": "mixed"}])

    code, report = run_test(tmp_path)

    assert code == 1
    pkg = package_of(report, "mixed")
    # The unittest parent with a failing subtest is failed; its subtests are counted apart.
    assert (pkg["passed"], pkg["failed"], pkg["crashed"]) == (2, 2, 1)
    subtests = pytest.version_tuple >= (9,)  # pytest 8 reports no unittest subtests
    assert pkg["subtests"] == ({"passed": 2, "failed": 1} if subtests else {})
    crash = [f for f in report["findings"] if f["check"] == "worker-crash"]
    assert [(f["subject"], f["cause"]) for f in crash] == [("test_mixed.py::test_dies",) * 2]
    assert set(report) >= {"run", "packages", "findings"}
    assert set(pkg) >= {"name", "passed", "failed", "errors", "skipped", "blocked", "crashed", "duration_s"}
    run_dir = tmp_path / ".promote" / "runs" / report["run"]
    assert (run_dir / "run.json").is_file()
    junit = ET.parse(run_dir / "mixed" / "junit.xml").getroot().find("testsuite")
    assert junit is not None
    assert (junit.get("tests"), junit.get("failures"), junit.get("errors")) == (
        ("8", "3", "1") if subtests else ("5", "2", "1")
    )
    names = [c.get("name") for c in junit.iter("testcase")]
    assert "test_dies" in names and "test_after_the_crash" in names


UNITTEST_SUBTESTS = """
    import unittest

    class Sub(unittest.TestCase):
        def test_sub(self):
            for i in range(5):
                with self.subTest(i=i):
                    self.assertNotEqual(i, 3)

        def test_other(self):
            pass
"""
FIXTURE_SUBTESTS = """
    def test_sub(subtests):
        for i in range(5):
            with subtests.test(i=i):
                assert i != 3

    def test_other():
        pass
"""


@pytest.mark.parametrize(
    ("source", "workers", "failing"),
    [
        (UNITTEST_SUBTESTS, 1, "test_sub.py::Sub::test_sub"),
        (UNITTEST_SUBTESTS, 2, "test_sub.py::Sub::test_sub"),
        (FIXTURE_SUBTESTS, 2, "test_sub.py::test_sub"),
    ],
    ids=["unittest-serial", "unittest-xdist", "fixture-xdist"],
)
def test_a_test_with_a_failing_subtest_fails_and_its_rerun_agrees(
    tmp_path: Path, source: str, workers: int, failing: str
) -> None:
    # Plain pytest 9 says "1 failed, 2 passed" for the unittest one and leaves its parent passed: a
    # rerun reading that parent would call the test flaky ("passes alone").
    if source is FIXTURE_SUBTESTS and pytest.version_tuple < (9,):
        pytest.importorskip("pytest_subtests", reason="no `subtests` fixture before pytest 9")
    write_package(tmp_path, "sub", {"test_sub.py": source})
    write_config(tmp_path, [{"name": "sub", "path": "sub", "workers": workers}])

    code, report = run_test(tmp_path)

    assert code == 1
    pkg = package_of(report, "sub")
    assert (pkg["passed"], pkg["failed"], pkg["errors"]) == (1, 1, 0)
    if pytest.version_tuple >= (9,):  # pytest 8 reports no unittest subtests: the first failure ends the test
        assert pkg["subtests"] == {"passed": 4, "failed": 1}
    assert [(r["test"], r["verdict"]) for r in pkg["reruns"]] == [(failing, "genuine")]
    assert not [f for f in report["findings"] if f["check"] in ("flaky", "order-dependent", "rerun-undecided")]


def test_serial_and_two_workers_give_the_same_pass_fail_set(tmp_path: Path) -> None:
    files = {
        f"test_m{i}.py": f"""
            import pytest

            @pytest.mark.parametrize("n", range(6))
            def test_n(n):
                assert n % {i + 2} != 1
        """
        for i in range(3)
    }
    write_package(tmp_path, "serial", files)
    write_package(tmp_path, "parallel", files)
    write_config(
        tmp_path,
        [{"name": "serial", "path": "serial", "workers": 1}, {"name": "parallel", "path": "parallel", "workers": 2}],
    )

    code, report = run_test(tmp_path)

    assert code == 1
    runs = tmp_path / ".promote" / "runs" / report["run"]

    def outcomes(name: str) -> dict[str, str]:
        found: dict[str, str] = {}
        for path in (runs / name).glob("*/results-*.json"):  # the parts, not the reruns
            found.update({t["nodeid"]: t["outcome"] for t in json.loads(path.read_text())["tests"]})
        return found

    serial, parallel = outcomes("serial"), outcomes("parallel")
    assert len(serial) == 18
    assert serial == parallel
    workers = set()
    for path in (runs / "parallel").glob("*/results-*.json"):
        workers |= {t["worker"] for t in json.loads(path.read_text())["tests"]}
    assert workers == {"gw0", "gw1"}
    assert package_of(report, "serial")["failed"] == package_of(report, "parallel")["failed"] > 0


def test_unknown_package_is_a_usage_error(tmp_path: Path) -> None:
    write_package(tmp_path, "a", {"test_a.py": "def test(): pass\n"})
    write_config(tmp_path, [{"name": "a", "path": "a"}])
    result = run(tmp_path, "test", "--package", "b")
    assert result.exit_code == 2
    assert "--package 'b': no such package" in result.stderr


def test_missing_package_directory_is_a_config_error(tmp_path: Path) -> None:
    write_config(tmp_path, [{"name": "a", "path": "nowhere"}])
    result = run(tmp_path, "test")
    assert result.exit_code == 2
    assert "path" in result.stderr and "is not a directory" in result.stderr


def test_green_package_exits_zero_with_a_table(tmp_path: Path) -> None:
    write_package(tmp_path, "a", {"test_a.py": "def test_one(): pass\ndef test_two(): pass\n"})
    write_config(tmp_path, [{"name": "a", "path": "a"}])
    result = run(tmp_path, "test")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    header = next(ln for ln in lines if ln.startswith("PACKAGE"))
    row = lines[lines.index(header) + 1].split()
    assert row[:7] == ["a", "2", "0", "0", "0", "0", "0"]
    assert lines[-1] == "all green"


COMMITS_DURING_THE_RUN = """
    import subprocess

    def test_one():
        # Someone commits while the tests run: the run is still of the commit they started on.
        who = ["-c", "user.name=x", "-c", "user.email=x@example.com"]
        subprocess.run(["git", *who, "commit", "-q", "--allow-empty", "-m", "later"], check=True)
"""


def test_the_run_is_stored_with_the_commit_the_tests_started_on(tmp_path: Path) -> None:
    write_package(tmp_path, "a", {"test_a.py": COMMITS_DURING_THE_RUN})
    write_config(tmp_path, [{"name": "a", "path": "a"}])
    git(tmp_path, "init", "-q", "-b", "main")
    head = commit(tmp_path, "the code under test")

    code, report = run_test(tmp_path)

    assert code == 0, report
    assert git(tmp_path, "rev-parse", "HEAD^") == head  # the test did commit
    history = History(tmp_path / ".promote")
    try:
        stored = history.get(report["run"])
    finally:
        history.close()
    assert (stored.kind, stored.commit) == ("test", head)
    assert [(t.nodeid, t.outcome) for t in stored.tests] == [("test_a.py::test_one", "passed")]


def test_outside_a_repository_the_run_is_stored_without_a_commit(tmp_path: Path) -> None:
    write_package(tmp_path, "a", {"test_a.py": "def test_one(): pass\n"})
    write_config(tmp_path, [{"name": "a", "path": "a"}])

    code, report = run_test(tmp_path)

    assert code == 0
    history = History(tmp_path / ".promote")
    try:
        assert history.get(report["run"]).commit is None
    finally:
        history.close()


def test_a_package_python_that_is_not_there_is_a_config_error_and_nothing_starts(tmp_path: Path) -> None:
    write_package(tmp_path, "a", {"test_a.py": "def test_one(): pass\n"})
    write_config(tmp_path, [{"name": "a", "path": "a", "python": "venv/bin/python"}])

    result = run(tmp_path, "test")

    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        f"promote: error: {tmp_path / 'promote.toml'}: package 'a': python venv/bin/python is not an executable here"
    ]
    assert not (tmp_path / ".promote" / "runs").exists()


def test_a_package_python_relative_to_its_directory_runs_it(tmp_path: Path) -> None:
    # Resolved as pytest is started (from the package's directory), not from where promote runs.
    package = write_package(tmp_path, "a", {"test_a.py": "def test_one(): pass\n"})
    (package / "venv" / "bin").mkdir(parents=True)
    # A wrapper, not a symlink: a symlink to a venv's python starts the base interpreter, outside the venv.
    wrapper = package / "venv" / "bin" / "python"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    wrapper.chmod(0o755)
    write_config(tmp_path, [{"name": "a", "path": "a", "python": "venv/bin/python"}])

    code, report = run_test(tmp_path)

    assert code == 0, report
    assert package_of(report, "a")["passed"] == 1


COMMITS_THEN_HANGS = """
    import subprocess
    import time

    def test_commits_then_hangs():
        who = ["-c", "user.name=x", "-c", "user.email=x@example.com"]
        subprocess.run(["git", *who, "commit", "-q", "--allow-empty", "-m", "later"], check=True)
        print("committed", flush=True)
        time.sleep(120)
"""


def test_an_interrupted_run_is_stored_with_the_commit_the_tests_started_on(tmp_path: Path) -> None:
    write_package(tmp_path, "a", {"test_a.py": COMMITS_THEN_HANGS})
    write_config(tmp_path, [{"name": "a", "path": "a"}])
    git(tmp_path, "init", "-q", "-b", "main")
    head = commit(tmp_path, "the code under test")
    proc = subprocess.Popen([sys.executable, "-m", "promote", "test"], cwd=tmp_path, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while git(tmp_path, "rev-parse", "HEAD^", check=False) != head:  # the test has committed, and now hangs
            assert proc.poll() is None and time.monotonic() < deadline, "the test never committed"
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()

    assert proc.returncode == 130, err
    (run_dir,) = (tmp_path / ".promote" / "runs").iterdir()
    history = History(tmp_path / ".promote")
    try:
        stored = history.get(run_dir.name)
    finally:
        history.close()
    assert (stored.kind, stored.interrupted, stored.commit) == ("test", True, head)
