"""Findings about a package's tests point at their files relative to the repository root, not the package."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.cli import run
from tests.helpers.gitrepos import commit, git
from tests.helpers.packages import write_config, write_package

pytestmark = pytest.mark.slow

# test_a leaves a variable behind; test_b, after it, fails only because of it (order-dependent).
ORDER_DEPENDENT = """\
import os


def test_a():
    os.environ["PROMOTE_LOCATION_LEAK"] = "1"


def test_b():
    assert "PROMOTE_LOCATION_LEAK" not in os.environ
"""
BROKEN = "import os\n\nraise RuntimeError('broken at import')\n"


def by_check(findings: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The one finding of each check (the run makes one of each)."""
    checks = [f["check"] for f in findings]
    assert len(checks) == len(set(checks)), checks
    return {f["check"]: f for f in findings}


def test_findings_of_a_package_in_a_subdirectory_are_located_from_the_repository_root(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    write_package(repo, "pkg", {"tests/test_x.py": ORDER_DEPENDENT, "tests/test_broken.py": BROKEN})
    write_config(repo, [{"name": "pkg", "path": "pkg"}])
    commit(repo, "a package in a subdirectory")

    as_json = run(repo, "test", "--json")
    as_sarif = run(repo, "test", "--format", "sarif")

    assert as_json.exit_code == as_sarif.exit_code == 1
    found = by_check(json.loads(as_json.stdout)["findings"])
    # Node ids stay relative to the package (as pytest names them); the location is the repository's path.
    assert found["order-dependent"]["subject"] == "tests/test_x.py::test_b"
    assert found["order-dependent"]["location"] == {"path": "pkg/tests/test_x.py", "line": None}
    assert found["package-error"]["subject"] == "tests/test_broken.py"
    # The line of the module that raised, read from the exception, not from pytest's text.
    assert found["package-error"]["location"] == {"path": "pkg/tests/test_broken.py", "line": 3}
    # The plugin saw the leaking test itself: its file and the line of its def.
    assert found["leaked-state"]["location"] == {"path": "pkg/tests/test_x.py", "line": 4}

    results = {r["ruleId"]: r for r in json.loads(as_sarif.stdout)["runs"][0]["results"]}
    assert sorted(results) == sorted(found)
    placed = {rule: r["locations"][0]["physicalLocation"] for rule, r in results.items()}
    assert placed["order-dependent"] == {"artifactLocation": {"uri": "pkg/tests/test_x.py", "uriBaseId": "%SRCROOT%"}}
    assert placed["package-error"] == {
        "artifactLocation": {"uri": "pkg/tests/test_broken.py", "uriBaseId": "%SRCROOT%"},
        "region": {"startLine": 3},
    }


def test_a_package_outside_any_repository_has_findings_without_location(tmp_path: Path) -> None:
    write_package(tmp_path, "pkg", {"tests/test_broken.py": BROKEN})
    write_config(tmp_path, [{"name": "pkg", "path": "pkg"}])

    result = run(tmp_path, "test", "--json")

    found = by_check(json.loads(result.stdout)["findings"])
    assert found["package-error"]["subject"] == "tests/test_broken.py"
    # No repository root to be relative to: no place rather than a path relative to something else.
    assert found["package-error"]["location"] is None
