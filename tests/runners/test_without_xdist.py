"""A package whose own venv has pytest but no pytest-xdist (and no MLX): real venv, real pytest processes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.cli import run
from tests.helpers.packages import CRASHING_SUITE as TESTS
from tests.helpers.packages import write_package

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def plain_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv with pytest alone, installed as a user would (pip, from the configured index or cache)."""
    venv = tmp_path_factory.mktemp("plain") / "venv"
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    pip = subprocess.run([python, "-m", "pip", "install", "-q", "pytest"], capture_output=True, text=True)
    assert pip.returncode == 0, pip.stderr[-2000:]
    for absent in ("xdist", "mlx.core"):
        assert subprocess.run([python, "-c", f"import {absent}"], capture_output=True).returncode != 0
    return python


def configure(root: Path, python: Path, workers: int) -> None:
    (root / "promote.toml").write_text(
        f'[promote]\ntrunk = "main"\n\n[[promote.packages]]\nname = "pkg"\npath = "pkg"\n'
        f'workers = {workers}\npython = "{python}"\n'
    )


def test_one_worker_runs_without_xdist_with_crashes_named_and_nothing_said_about_absent_tools(
    tmp_path: Path, plain_venv: Path
) -> None:
    write_package(tmp_path, "pkg", {"tests/test_a.py": TESTS})
    configure(tmp_path, plain_venv, 1)

    result = run(tmp_path, "test")

    human = result.stdout
    assert result.exit_code == 1, human + result.stderr
    results = Path(next(line for line in human.splitlines() if line.startswith("results: ")).split(": ", 1)[1])
    report = json.loads((results / "run.json").read_text())
    pkg = report["packages"][0]
    # Each death is named and the rest still ran in the next process, as under xdist.
    assert (pkg["passed"], pkg["failed"], pkg["crashed"]) == (3, 1, 2)
    crashes = {f["subject"] for f in report["findings"] if f["check"] == "worker-crash"}
    assert crashes == {"tests/test_a.py::test_2_dies", "tests/test_a.py::test_5_killed"}
    leaks = [f["subject"] for f in report["findings"] if f["check"] == "leaked-state"]
    assert leaks == ["tests/test_a.py::test_6_leaks"]
    # Plain pytest, not xdist, ran it (xdist's workers are gw0, gw1...): three processes, each after a death.
    assert sorted(p.name for p in (results / "pkg" / "all").glob("progress-*.jsonl")) == [
        "progress-main.1.jsonl",
        "progress-main.2.jsonl",
        "progress-main.jsonl",
    ]
    # A package without MLX: not one line about MLX.
    assert "mlx" not in (human + result.stderr).lower()


def test_more_workers_without_xdist_is_one_line_naming_what_to_install_where_before_anything_runs(
    tmp_path: Path, plain_venv: Path
) -> None:
    write_package(tmp_path, "pkg", {"tests/test_a.py": TESTS})
    configure(tmp_path, plain_venv, 2)

    result = run(tmp_path, "test")

    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        f"promote: error: {tmp_path / 'promote.toml'}: package 'pkg': workers = 2 needs pytest-xdist, which "
        f"{plain_venv} cannot import (install it: {plain_venv} -m pip install pytest-xdist; or set workers = 1)"
    ]
    assert not (tmp_path / ".promote" / "runs").exists() or not any((tmp_path / ".promote" / "runs").iterdir())
