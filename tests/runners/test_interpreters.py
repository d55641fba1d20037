"""The plugin works in every interpreter a package may have: each Python that pytest 8 supports.

promote itself needs Python 3.10, but the plugin runs inside the tested package's own interpreter
(`python = ...` in promote.toml), which may be older or newer. Each interpreter found on this machine gets
a virtualenv with the newest pytest and pytest-xdist it can install, and a real package runs in it.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from promote import config
from promote.runners.suite import run_tests
from tests.helpers.packages import write_config, write_package

pytestmark = pytest.mark.slow

VERSIONS = ("3.9", "3.10", "3.11", "3.12", "3.13")

SUITE = {
    "tests/test_mixed.py": """
        import os
        import unittest

        import pytest


        def test_passes():
            assert True


        def test_fails():
            assert 1 == 2


        @pytest.mark.skip(reason="not here")
        def test_skipped():
            pass


        def test_sets_a_flag():
            os.environ["PROMOTE_INTERP_FLAG"] = "1"


        class TestCase(unittest.TestCase):
            def test_subtests(self):
                for i in range(3):
                    with self.subTest(i=i):
                        self.assertLess(i, 2)
        """,
}


def find_python(version: str) -> str | None:
    """An interpreter of this minor version: pyenv's, else one on PATH that really runs."""
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    for candidate in sorted(pyenv.glob(f"{version}.*/bin/python"), reverse=True):
        return str(candidate)
    found = shutil.which(f"python{version}")
    if found and subprocess.run([found, "-c", "pass"], capture_output=True, check=False).returncode == 0:
        return found
    return None


def venv_for(python: str, version: str) -> Path:
    """A virtualenv of `python` with pytest and pytest-xdist, made once per machine and shared by workers."""
    base = Path(tempfile.gettempdir()) / "promote-interpreters"
    base.mkdir(exist_ok=True)
    venv = base / version
    with open(base / f"{version}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (venv / "ready").is_file():
            shutil.rmtree(venv, ignore_errors=True)
            subprocess.run([python, "-m", "venv", str(venv)], check=True, capture_output=True)
            pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
            subprocess.run([*pip, "pytest>=8", "pytest-xdist>=3.5"], check=True, capture_output=True)
            (venv / "ready").write_text("")
    return venv / "bin" / "python"


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("version", VERSIONS)
def test_the_plugin_records_a_package_run_in_each_interpreter(tmp_path: Path, version: str, workers: int) -> None:
    python = find_python(version)
    if python is None:
        if os.environ.get("PROMOTE_REQUIRE_PYTHONS"):
            pytest.fail(f"no Python {version} on this machine")
        pytest.skip(f"no Python {version} on this machine")
    interpreter = venv_for(python, version)
    write_package(tmp_path, "pkg", SUITE)
    path = write_config(tmp_path, [{"name": "pkg", "path": "pkg", "python": str(interpreter), "workers": workers}])

    result = run_tests(config.load(path))

    [pkg] = result.packages
    assert (pkg.passed, pkg.failed, pkg.skipped, pkg.errors, pkg.crashed) == (2, 2, 1, 0, 0), pkg.findings
    assert not [f for f in pkg.findings if f.check in ("package-error", "worker-crash")], pkg.findings
    # (Subtests are reported separately only from pytest 9 on, which needs Python 3.10: not compared here.)
    [leak] = [f for f in pkg.findings if f.check == "leaked-state"]
    assert leak.subject == "tests/test_mixed.py::test_sets_a_flag"
    # Its reruns ran in the same interpreter: the plain failure is judged genuine.
    assert ("tests/test_mixed.py::test_fails", "genuine") in {(v.test, v.kind) for v in pkg.verdicts}
    assert pkg.configuration is not None and pkg.configuration.known
