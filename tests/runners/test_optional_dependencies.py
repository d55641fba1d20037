"""Optional dependencies end to end: a package whose tests skip for modules it lacks, run by `promote test`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from promote.runners.declared import DeclaredError, declared_for, read_declared
from tests.helpers.cli import run_json
from tests.helpers.gitrepos import git
from tests.helpers.packages import write_package

PYPROJECT = """\
[project]
name = "pkg"
version = "0"
dependencies = ["Declared_Dep_Nowhere>=1; python_version >= '3.8'"]

[project.optional-dependencies]
speed = ["extra-mod-nowhere[fast]>=2"]
"""

TESTS = {
    "pyproject.toml": PYPROJECT,
    # Every way a test says it skips for torch_nowhere, which no extra declares.
    "tests/test_importorskip.py": """
        import pytest

        def test_imports():
            pytest.importorskip("torch_nowhere")
    """,
    "tests/test_reasons.py": """
        import importlib.util
        import unittest

        import pytest

        HAS_TORCH = importlib.util.find_spec("torch_nowhere") is not None

        @pytest.mark.skipif(not HAS_TORCH, reason="torch_nowhere is required")
        def test_skipif():
            pass

        def test_skip_call():
            if not HAS_TORCH:
                pytest.skip("requires torch_nowhere")

        class TestCase(unittest.TestCase):
            def test_skip_test(self):
                if not HAS_TORCH:
                    self.skipTest("torch_nowhere not installed")

        @pytest.mark.skip(reason="needs work")
        def test_not_a_module():
            pass
    """,
    "tests/test_extra.py": """
        import pytest

        def test_extra():
            pytest.importorskip("extra_mod_nowhere")
    """,
    "tests/test_declared.py": """
        import pytest

        def test_declared():
            pytest.importorskip("declared_dep_nowhere")
    """,
    "tests/test_ok.py": "def test_ok():\n    pass\n",
}


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("optional")
    git(root, "init", "-q", "-b", "main")
    write_package(root, "pkg", TESTS)
    (root / "promote.toml").write_text(
        '[promote]\ntrunk = "main"\n\n[[promote.packages]]\nname = "pkg"\npath = "pkg"\n'
    )
    code, found = run_json(root, "test")
    found["code"] = code
    return found


def _missing(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    found = [f for f in report["findings"] if f["check"] == "missing-package"]
    return {f["message"].split(":")[0].removeprefix("cannot import "): f for f in found}


def test_a_module_no_extra_declares_is_one_warning_whichever_way_its_tests_skip(report: dict[str, Any]) -> None:
    torch = _missing(report)["torch_nowhere"]
    assert torch["severity"] == "warning"
    assert torch["message"].startswith(
        "cannot import torch_nowhere: not installed on station local; "
        "optional: no extra of pkg/pyproject.toml declares it; its tests skip without it; 4 test(s) via "
    )
    (package,) = report["packages"]
    blocked = sorted(b["test"] for b in package["blockers"] if b["requirements"] == ["package:torch_nowhere"])
    assert blocked == [
        "tests/test_importorskip.py::test_imports",
        "tests/test_reasons.py::TestCase::test_skip_test",
        "tests/test_reasons.py::test_skip_call",
        "tests/test_reasons.py::test_skipif",
    ]
    # A skip that names no module is a skip, not a package.
    assert "test_not_a_module" not in str(report["findings"])
    assert (package["passed"], package["skipped"], package["blocked"]) == (1, 1, 6)


def test_a_module_an_extra_declares_is_a_warning_naming_the_extra(report: dict[str, Any]) -> None:
    extra = _missing(report)["extra_mod_nowhere"]
    assert (extra["severity"], extra["subject"]) == ("warning", "tests/test_extra.py::test_extra")
    assert "optional: extra `speed` of pkg/pyproject.toml declares it; its tests skip without it" in extra["message"]


def test_a_declared_dependency_missing_is_an_error(report: dict[str, Any]) -> None:
    declared = _missing(report)["declared_dep_nowhere"]
    assert declared["severity"] == "error"
    assert "a dependency pkg/pyproject.toml declares (not optional); fix the environment" in declared["message"]
    assert report["code"] == 1
    assert len(_missing(report)) == 3


def test_a_pyproject_that_cannot_be_read_is_one_typed_error_and_one_outside_a_repository_is_not_looked_for(
    tmp_path: Path,
) -> None:
    (tmp_path / "pyproject.toml").write_text("[project]\ndependencies = [" + "[" * 5000 + "]" * 5000 + "]\n")
    with pytest.raises(DeclaredError, match="nested too deeply"):
        read_declared(tmp_path / "pyproject.toml")
    (tmp_path / "pyproject.toml").write_bytes(b"[project]\n# " + b"x" * (1 << 20))
    found = declared_for(tmp_path)
    assert isinstance(found, DeclaredError) and "larger than" in str(found)
    (tmp_path / "pkg").mkdir()
    assert declared_for(tmp_path / "pkg") is None  # no .git: the pyproject.toml above is no one's
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\ndynamic = ["dependencies"]\n')
    (tmp_path / ".git").mkdir()
    found = declared_for(tmp_path / "pkg")
    assert not isinstance(found, DeclaredError) and found is not None
    assert (found.shown, found.of("yaml"), found.of("PyYAML")) == (
        "pyproject.toml",
        ("unknown", None),
        ("unknown", None),
    )
