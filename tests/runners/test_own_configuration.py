"""A package runs as its own CI runs it: promote's first pass against plain `cd PACKAGE && python -m pytest`.

Each layout is a real repository in tmp_path with a real pytest configuration; plain pytest runs from the
package's directory with an observer plugin that only writes down each test's outcome (a `-p` plugin
changes neither the rootdir nor the ini file), and promote's counts, test ids and verdict must equal it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from promote.runners.plugin.records import read_all_results
from tests.helpers.cli import run, run_json
from tests.helpers.gitrepos import commit, git

pytestmark = pytest.mark.slow

OBSERVER = """
import json, os

_seen = {}


def pytest_collectreport(report):
    if report.failed:
        _seen[report.nodeid] = "error"


def pytest_runtest_logreport(report):
    before = _seen.get(report.nodeid)
    if report.failed:
        now = "failed" if report.when == "call" else "error"
    elif report.skipped:
        now = "xfailed" if hasattr(report, "wasxfail") else "skipped"
    elif report.when == "call":
        now = "xpassed" if hasattr(report, "wasxfail") else "passed"
    else:
        return
    if before not in ("failed", "error"):
        _seen[report.nodeid] = now


def pytest_sessionfinish(session, exitstatus):
    if hasattr(session.config, "workerinput"):  # an xdist worker: the controller saw every report
        return
    with open(os.environ["OBSERVED"], "w") as f:
        json.dump({"tests": _seen, "status": int(exitstatus), "inifile": str(session.config.inipath)}, f)
"""

TESTS = {
    "tests/test_a.py": """
        import warnings

        import pytest


        def old():
            warnings.warn("old", DeprecationWarning)
            return 1


        def test_ok():
            assert True


        def test_warns():
            assert old() == 1


        @pytest.mark.slow
        def test_slow():
            assert True
        """,
    # Collected only where `python_files` names check_*.py.
    "tests/check_b.py": """
        def test_found_by_python_files():
            assert True
        """,
    # Outside `testpaths`: collected only where testpaths does not apply (pytest started below the rootdir).
    "other/test_outside.py": """
        def test_outside():
            assert False, "collected although testpaths = tests"
        """,
}

# The settings a package's configuration holds, in each file format.
OPTIONS = {
    "addopts": "-m 'not slow' --strict-markers",
    "markers": ["slow: takes long"],
    "filterwarnings": ["error"],
    "python_files": ["test_*.py", "check_*.py"],
    "testpaths": ["tests"],
}


def ini_text(fmt: str, options: dict[str, object]) -> tuple[str, str]:
    """(file name, its text) for `options` in one of pytest's configuration formats."""
    if fmt == "pyproject.toml":
        lines = ["[tool.pytest.ini_options]"]
        for key, value in options.items():
            lines.append(f"{key} = {json.dumps(value)}")
        return fmt, "\n".join(lines) + "\n"
    section = {"setup.cfg": "tool:pytest"}.get(fmt, "pytest")
    lines = [f"[{section}]"]
    for key, value in options.items():
        if isinstance(value, list):
            lines.append(f"{key} =\n" + "".join(f"    {v}\n" for v in value).rstrip("\n"))
        else:
            lines.append(f"{key} = {value}")
    return fmt, "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Layout:
    """One way a repository holds a package and its pytest configuration."""

    name: str
    package: str = "packages/engine"  # where the package is, relative to the repository
    fmt: str | None = "pyproject.toml"  # the configuration's file format (None: no configuration)
    at: str = "package"  # where the configuration is: "package" or "root" (above it)
    options: dict[str, object] = field(default_factory=lambda: dict(OPTIONS))
    files: dict[str, str] = field(default_factory=dict)  # more files, relative to the repository
    workers: int = 1


LAYOUTS = [
    *(Layout(f"{fmt}-at-package", fmt=fmt) for fmt in ("pyproject.toml", "pytest.ini", "tox.ini", "setup.cfg")),
    *(Layout(f"{fmt}-above", fmt=fmt, at="root") for fmt in ("pyproject.toml", "pytest.ini", "tox.ini", "setup.cfg")),
    Layout("package-at-root", package=".", at="root"),
    Layout("package-at-root-pytest-ini", package=".", fmt="pytest.ini", at="root"),
    Layout("two-workers", workers=2),
    Layout("two-workers-above", at="root", fmt="tox.ini", workers=2),
    Layout("no-configuration", fmt=None),
    # The package's own workers in addopts: promote's reruns still run (one process, `-n 0`).
    Layout("xdist-in-addopts", options={**OPTIONS, "addopts": "-n 2 -m 'not slow' --strict-markers"}),
    Layout("only-keyword", options={"addopts": "-k 'not warns and not outside'"}),
    Layout(
        "conftest-above-with-ini-above",
        at="root",
        options={"testpaths": ["tests"]},
        files={"conftest.py": "import pytest\n\n\n@pytest.fixture\ndef shared():\n    return 1\n"},
    ),
    Layout(
        "conftest-above-without-ini",
        fmt=None,
        files={"conftest.py": "def pytest_collection_modifyitems(items):\n    items[:] = items[:1]\n"},
    ),
    Layout(
        "plugin-by-p",
        options={"addopts": "-p engine_plugin"},
        files={
            "packages/engine/engine_plugin.py": (
                "def pytest_collection_modifyitems(items):\n"
                "    items[:] = [i for i in items if 'outside' not in i.nodeid]\n"
            )
        },
    ),
    Layout(
        "import-mode-importlib",
        options={"addopts": "--import-mode=importlib"},
        files={
            "packages/engine/one/test_same.py": "def test_one():\n    assert True\n",
            "packages/engine/two/test_same.py": "def test_two():\n    assert True\n",
        },
    ),
]


def build(root: Path, layout: Layout) -> Path:
    """A git repository holding the layout, with a promote.toml at its root; the package's directory."""
    pkg = root / layout.package
    files = {f"{layout.package}/{rel}": text for rel, text in TESTS.items()}
    if layout.fmt is not None:
        name, text = ini_text(layout.fmt, layout.options)
        files[f"{layout.package if layout.at == 'package' else '.'}/{name}"] = text
    files.update(layout.files)
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    (root / "promote.toml").write_text(
        '[promote]\ntrunk = "main"\n\n[[promote.packages]]\nname = "engine"\n'
        f'path = "{layout.package}"\nworkers = {layout.workers}\n'
    )
    git(root, "init", "-q", "-b", "main")
    (root / ".gitignore").write_text(".promote/\n")
    commit(root, "the package")
    return pkg


def observe(pkg: Path, tmp: Path, *args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    """`cd PACKAGE && python -m pytest ARGS`, as its CI runs it, with the observer writing down what ran."""
    (tmp / "observer").mkdir()
    (tmp / "observer" / "promote_observer.py").write_text(OBSERVER)
    observed = tmp / "observed.json"
    env = {**(env or os.environ), "OBSERVED": str(observed), "PYTHONPATH": str(tmp / "observer")}
    subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "promote_observer", *args],
        cwd=pkg,
        env=env,
        capture_output=True,
        check=False,
    )
    data: dict[str, Any] = json.loads(observed.read_text())
    return data


def plain_pytest(pkg: Path, tmp: Path) -> dict[str, Any]:
    return observe(pkg, tmp)


def first_pass(results: Path) -> dict[str, str]:
    """Test id -> outcome in promote's first pass (its reruns are elsewhere)."""
    return {
        t.nodeid: t.outcome
        for part in ("all", "parallel", "serial")
        for r in read_all_results(results / part)
        for t in r.tests
        if t.parent is None
    }


@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda layout: layout.name)
def test_promote_runs_the_package_as_plain_pytest_from_its_directory_does(tmp_path: Path, layout: Layout) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    pkg = build(root, layout)
    plain = plain_pytest(pkg, tmp_path)
    code, data = run_json(root, "test")
    (package,) = data["packages"]
    ours = first_pass(Path(package["results"]))
    assert ours == plain["tests"]
    counts = Counter(ours.values())
    assert (package["passed"], package["failed"], package["errors"]) == (
        counts["passed"],
        counts["failed"],
        counts["error"],
    )
    # Red exactly when pytest is red.
    assert (code != 0) == (plain["status"] != 0), (code, plain["status"], data["findings"])
    inifile = plain["inifile"]
    expected = None if inifile == "None" else Path(str(inifile)).relative_to(root).as_posix()
    assert package["inifile"] == expected
    assert package["rootdir"] is not None
    # Every red test was judged by its reruns, which ran under the same configuration.
    assert not [f for f in data["findings"] if f["check"] == "rerun-undecided"], data["findings"]


def test_a_filterwarnings_error_in_a_package_below_the_root_is_red_and_says_which_file(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    options = {"filterwarnings": ["error"], "markers": ["slow: takes long"], "testpaths": ["tests"]}
    build(root, Layout("pyproject", options=options))
    result = run(root, "test")
    assert result.exit_code == 1
    assert "engine: ran with packages/engine/pyproject.toml (rootdir packages/engine)" in result.stdout
    assert "tests/test_a.py::test_warns (failed)" in result.stdout


def test_a_module_that_cannot_be_imported_does_not_stop_the_others_where_plain_pytest_stops(tmp_path: Path) -> None:
    # The one place promote deliberately goes further than the package's runner (docs/testing.md): plain
    # pytest interrupts the session at a collection error; promote runs every other module, and is red too.
    root = tmp_path / "repo"
    root.mkdir()
    pkg = build(root, Layout("broken", options={}, files={"packages/engine/tests/test_broken.py": "import nope\n"}))
    plain = plain_pytest(pkg, tmp_path)
    code, data = run_json(root, "test")
    (package,) = data["packages"]
    ours = first_pass(Path(package["results"]))
    assert plain["status"] == 2 and not any(o == "passed" for o in plain["tests"].values())
    assert ours["tests/test_broken.py"] == "error"
    assert ours["tests/test_a.py::test_ok"] == "passed"
    assert code == 1
