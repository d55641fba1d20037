"""`promote init` counts a package's tests with the project's own interpreter: a real venv in the tree that alone can
import the module the tests need, real git, real pytest collections."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from promote.config import load
from promote.runners import environments
from tests.helpers.cli import run
from tests.helpers.gitrepos import commit, git

pytestmark = pytest.mark.slow

NEEDS = "import tinymod\n\n\n"
TESTS = {
    "pkg/pyproject.toml": '[tool.pytest.ini_options]\ntestpaths = ["tests"]\n',
    "pkg/tests/test_one.py": NEEDS + "".join(f"def test_one_{i}():\n    assert tinymod.X == 1\n\n\n" for i in range(3)),
    "pkg/tests/test_two.py": NEEDS + "def test_two():\n    assert tinymod.X == 1\n",
    "pkg/tests/test_plain.py": "def test_plain():\n    assert True\n",
}


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    commit(repo, "tests", TESTS)
    return repo


def _venv(at: Path, modules: Path) -> Path:
    """A venv at `at` that imports `tinymod` from `modules`, and pytest from promote's own environment."""
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", str(at)], check=True)
    python = at / "bin" / "python"
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    # addsitedir, not a plain path line: promote's environment's own .pth files (its editable install) apply too.
    own = sysconfig.get_paths()["purelib"]
    (Path(purelib) / "promote-test.pth").write_text(f"import site; site.addsitedir({own!r})\n{modules}\n")
    return python


def _block(text: str) -> str:
    return next(b.strip() for b in text.split("\n\n") if b.startswith("# [[promote.packages]]"))


def test_init_counts_with_the_packages_venv_and_proposes_it_as_its_python(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    modules = tmp_path / "site"
    modules.mkdir()
    (modules / "tinymod.py").write_text("X = 1\n")
    _venv(repo / "pkg" / ".venv", modules)

    result = run(repo, "init")

    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    assert _block((repo / "promote.toml").read_text()) == (
        "# [[promote.packages]]           # 5 tests in pkg/tests, run by nothing\n"
        '# name = "pkg"\n# path = "pkg"\n# python = ".venv/bin/python"   # the project\'s own, found in .venv\n'
        '# args = ["tests"]\n# workers = 1'
    )
    # Uncommented, the package runs with that venv.
    keys = r"^# (\[\[promote\.packages\]\]|name =|path =|python =|args =)"
    text = re.sub(keys, r"\1", (repo / "promote.toml").read_text(), flags=re.M)
    (repo / "promote.toml").write_text(text)
    [pkg] = load(repo / "promote.toml").packages
    assert pkg.interpreter == str(repo / "pkg" / ".venv" / "bin" / "python")


def test_a_venv_at_the_repository_root_is_written_relative_to_the_package(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    modules = tmp_path / "site"
    modules.mkdir()
    (modules / "tinymod.py").write_text("X = 1\n")
    _venv(repo / "venv", modules)

    assert run(repo, "init").exit_code == 0

    block = _block((repo / "promote.toml").read_text())
    assert block.startswith("# [[promote.packages]]           # 5 tests in pkg/tests, run by nothing\n")
    assert '# python = "../venv/bin/python"   # the project\'s own, found in venv\n' in block


def test_without_an_environment_init_says_it_counted_with_its_own_python_and_names_the_key(tmp_path: Path) -> None:
    repo = _repo(tmp_path)

    result = run(repo, "init")

    assert result.exit_code == 0, result.output
    assert result.stderr == (
        "promote: pkg: no environment of its own found (.venv, venv, hatch, poetry, VIRTUAL_ENV), so its tests were "
        f"counted by promote's own Python ({sys.executable}): 1 collected, 2 test module(s) failed to import; "
        'set python = "..." in its [[promote.packages]] table\n'
    )
    block = _block((repo / "promote.toml").read_text())
    assert block.splitlines()[:2] == [
        "# [[promote.packages]]           # 1 tests in pkg/tests, run by nothing",
        "#                                # counted by promote's own Python: no environment of the project's was "
        'found and 2 test module(s) failed to import; set python = "PATH" to the project\'s interpreter',
    ]
    assert "# python =" not in block


def test_the_active_virtualenv_is_found_last(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    active = tmp_path / "active"
    python = _venv(active, tmp_path)
    found = environments.find(project, project, {"VIRTUAL_ENV": str(active), "PATH": os.environ["PATH"]})
    assert found == environments.Environment(python, "VIRTUAL_ENV")
    inside = _venv(project / ".venv", tmp_path)
    assert environments.find(project, project, {"VIRTUAL_ENV": str(active)}) == environments.Environment(
        inside, ".venv"
    )
    assert environments.find(project, project, {}) == environments.Environment(inside, ".venv")
    assert environments.find(tmp_path / "elsewhere", tmp_path / "elsewhere", {}) is None


def test_a_tool_that_fails_is_skipped(tmp_path: Path) -> None:
    # A `poetry` on PATH that fails, for a project that says it uses poetry: nothing found, nothing raised.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "poetry"
    fake.write_text("#!/bin/sh\necho 'no venv' >&2\nexit 1\n")
    fake.chmod(0o755)
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text("[tool.poetry]\nname = 'x'\n")
    assert environments.find(project, project, {"PATH": str(bin_dir)}) is None
    # One that names an environment: found as poetry's.
    venv = tmp_path / "poetry-env"
    python = _venv(venv, tmp_path)
    fake.write_text(f"#!/bin/sh\necho {venv}\n")
    assert environments.find(project, project, {"PATH": str(bin_dir)}) == environments.Environment(python, "poetry")
