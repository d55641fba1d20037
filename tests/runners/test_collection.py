"""Collection failures stop nothing else, and nothing unseen is a pass: real `promote test` runs in tmp_path."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from promote import config
from promote.evidence import gates
from promote.runners.suite import run_tests
from tests.helpers.cli import run_json
from tests.helpers.packages import write_config, write_package

pytestmark = pytest.mark.slow

GOOD = """
    def test_one():
        pass

    def test_two():
        pass
"""


def findings(report: dict[str, Any], check: str) -> dict[str, str]:
    """Subject -> message of one check's findings."""
    return {f["subject"]: f["message"] for f in report["findings"] if f["check"] == check}


@pytest.mark.parametrize("workers", [1, 2])
def test_modules_that_exit_or_crash_at_import_are_named_with_their_cause_and_the_rest_runs(
    tmp_path: Path, workers: int
) -> None:
    write_package(
        tmp_path,
        "pkg",
        {
            "tests/test_good.py": GOOD,
            "tests/test_exit.py": "import sys\nsys.exit(1)\n\ndef test_never():\n    pass\n",
            "tests/test_crash.py": "raise RuntimeError('boom at import')\n\ndef test_never():\n    pass\n",
            "tests/sub/conftest.py": "raise RuntimeError('sub conftest broken')\n",
            "tests/sub/test_sub.py": "def test_never():\n    pass\n",
            "tests/zz/test_last.py": "def test_after_them():\n    pass\n",
        },
    )
    write_config(tmp_path, [{"name": "pkg", "path": "pkg", "workers": workers}])

    code, report = run_json(tmp_path, "test")

    pkg = report["packages"][0]
    assert code == 1
    # Every other module ran and is counted; each broken one is one error.
    assert (pkg["passed"], pkg["failed"], pkg["errors"]) == (3, 0, 3)
    assert findings(report, "package-error") == {
        "tests/test_exit.py": "pytest could not collect tests/test_exit.py: SystemExit: 1 (tests/test_exit.py:2)",
        "tests/test_crash.py": (
            "pytest could not collect tests/test_crash.py: RuntimeError: boom at import (tests/test_crash.py:1)"
        ),
        "tests/sub": "pytest could not collect tests/sub: RuntimeError: sub conftest broken (tests/sub/conftest.py:1)",
    }


def test_a_root_conftest_that_exits_is_a_package_error_not_green_and_fails_the_tested_gate(tmp_path: Path) -> None:
    pkg = write_package(tmp_path, "pkg", {"conftest.py": "", "tests/test_good.py": GOOD})
    path = write_config(tmp_path, [{"name": "pkg", "path": "pkg"}])
    code, first = run_json(tmp_path, "test")
    assert (code, first["packages"][0]["passed"]) == (0, 2)
    (pkg / "conftest.py").write_text("import sys\n\nsys.exit(1)\n")

    result = run_tests(config.load(path))

    only = result.packages[0]
    assert (only.green, result.green, sum(only.counts.values())) == (False, False, 0)
    errors = [f for f in result.findings if f.check == "package-error"]
    assert [(f.severity, f.subject) for f in errors] == [("error", "pkg")]
    message = errors[0].message
    assert message.startswith(
        "pytest exited with status 1 but recorded no failure and ran no test: ERROR: conftest.py:3"
    )
    assert message.endswith(f"; the previous run ({first['run']}) ran 2 test(s)")
    gate = gates.tested(result, None, None)
    assert gate.status == "fail"
    assert gate.evidence[0].startswith("0 tests across 1 package (pkg 0)")
    assert gate.evidence[1].startswith("pkg ran on ")
    assert gate.evidence[2] == f"pkg: {message}"
    # The CLI says so too: not green, exit 1.
    code, again = run_json(tmp_path, "test")
    assert code == 1 and "ran no test" in findings(again, "package-error")["pkg"]


def test_a_python_without_pytest_is_a_package_error_naming_it(tmp_path: Path) -> None:
    venv = tmp_path / "bare"
    # The interpreter under the test runner's venv: a venv without pip has no pytest either.
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", str(venv)], check=True)
    write_package(tmp_path, "pkg", {"tests/test_good.py": GOOD})
    write_config(tmp_path, [{"name": "pkg", "path": "pkg", "python": str(venv / "bin" / "python")}])

    code, report = run_json(tmp_path, "test")

    assert code == 1
    assert report["packages"][0]["passed"] == 0
    message = findings(report, "package-error")["pkg"]
    assert "ran no test" in message and "No module named pytest" in message


def test_no_tests_collected_is_a_package_error(tmp_path: Path) -> None:
    write_package(tmp_path, "pkg", {"tests/test_empty.py": "VALUE = 1\n"})
    write_config(tmp_path, [{"name": "pkg", "path": "pkg"}])

    code, report = run_json(tmp_path, "test")

    assert code == 1
    assert findings(report, "package-error")["pkg"].startswith("no tests ran: pytest collected no tests")


def test_an_exit_status_the_records_do_not_explain_is_a_package_error(tmp_path: Path) -> None:
    # A session-finish hook that fails the run after every test passed: pytest exits 1, no test failed.
    conftest = "import pytest\n\n@pytest.hookimpl(trylast=True)\ndef pytest_sessionfinish(session):\n"
    conftest += "    session.exitstatus = 1\n"
    write_package(tmp_path, "pkg", {"conftest.py": conftest, "tests/test_good.py": GOOD})
    write_config(tmp_path, [{"name": "pkg", "path": "pkg"}])

    code, report = run_json(tmp_path, "test")

    assert code == 1
    assert report["packages"][0]["passed"] == 2
    assert findings(report, "package-error")["pkg"].startswith("pytest exited with status 1 but recorded no failure: ")


@pytest.mark.parametrize("workers", [1, 2])
def test_a_module_that_exits_at_import_is_reported_with_what_it_printed_and_as_missing_package(
    tmp_path: Path, workers: int
) -> None:
    write_package(
        tmp_path,
        "pkg",
        {
            "tests/test_good.py": GOOD,
            # Checks its optional packages itself, says which it lacks on stderr, exits.
            "tests/test_says.py": (
                "import sys\n\nprint('checking optional packages')\n"
                "print('Missing required packages: psutil_nowhere, pynvml_nowhere', file=sys.stderr)\n"
                "sys.exit(1)\n\ndef test_never():\n    pass\n"
            ),
            # Fails to import one, prints why and exits: the import error itself names it.
            "tests/test_tries.py": (
                "import sys\n\ntry:\n    import psutil_nowhere\nexcept ImportError:\n"
                "    print('this suite needs psutil_nowhere; pip install it')\n    sys.exit(1)\n\n"
                "def test_never():\n    pass\n"
            ),
            # Says something that names nothing to install, and a secret from the package's env with it.
            "tests/test_other.py": (
                "import os, sys\n\nprint('config is broken, token', os.environ['RELEASE_TOKEN'])\nsys.exit(3)\n\n"
                "def test_never():\n    pass\n"
            ),
        },
    )
    (tmp_path / "promote.toml").write_text(
        '[promote]\ntrunk = "main"\n\n[[promote.packages]]\nname = "pkg"\npath = "pkg"\n'
        f'workers = {workers}\nenv = {{ RELEASE_TOKEN = "s3cr3t-value-42" }}\n'
    )

    code, report = run_json(tmp_path, "test")

    assert code == 1
    pkg = report["packages"][0]
    assert (pkg["passed"], pkg["errors"], pkg["blocked"]) == (2, 1, 2)
    # One finding per module, whichever module said it lacks it; errors, as the modules fail rather than skip.
    missing = [
        (f["subject"], f["severity"], f["message"]) for f in report["findings"] if f["check"] == "missing-package"
    ]
    undeclared = "no pyproject.toml declares the package's dependencies"
    assert sorted(missing) == [
        (
            "tests/test_says.py",
            "error",
            f"cannot import psutil_nowhere: not installed on station local; {undeclared}; "
            "2 tests or modules fail instead of skipping; "
            "2 module(s) not collected: tests/test_says.py, tests/test_tries.py",
        ),
        (
            "tests/test_says.py",
            "error",
            f"cannot import pynvml_nowhere: not installed on station local; {undeclared}; "
            "1 test or module fails instead of skipping; "
            "1 module(s) not collected: tests/test_says.py",
        ),
    ]
    # The module that names nothing is a collection error with its last words, redacted like everything else.
    assert findings(report, "package-error") == {
        "tests/test_other.py": (
            "pytest could not collect tests/test_other.py: SystemExit: 3 (tests/test_other.py:4); "
            "it printed: config is broken, token ***"
        ),
    }
    assert "s3cr3t-value-42" not in json.dumps(report)
