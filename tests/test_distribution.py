"""The distribution: its name, what a plain install pulls in, and what the demo asks for without its extra."""

from __future__ import annotations

import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from tests.helpers.gitrepos import make_fleet
from tests.helpers.packages import write_package

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the fallback promote itself depends on
    import tomli as tomllib

ROOT = Path(__file__).parent.parent
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def test_the_distribution_has_a_name_of_its_own_and_the_core_needs_no_mlx() -> None:
    assert PROJECT["name"] == "promote-release"
    core = " ".join(PROJECT["dependencies"]).lower()
    assert "mlx" not in core and "transformers" not in core
    extras = PROJECT["optional-dependencies"]
    assert any(r.startswith("mlx[cpu]") and "linux" in r for r in extras["mlx"])
    assert any(r.startswith("mlx>") and "darwin" in r for r in extras["mlx"])
    assert "mlx-lm>=0.24" in extras["demo"] and "promote-release[mlx]" in extras["demo"]
    assert "promote-release[demo]" in extras["dev"]


def test_the_demo_without_its_extra_names_the_extra_in_one_line(tmp_path: Path) -> None:
    # An interpreter where mlx_lm cannot be imported (None in sys.modules: find_spec says None, import fails).
    blocker = tmp_path / "blocker"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text("import sys\nsys.modules['mlx_lm'] = None\n")
    env = {"PYTHONPATH": str(blocker), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-m", "promote", "demo", "--keep", str(tmp_path / "demo")],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("promote: error: the demo needs mlx-lm (not installed here): pip install "), line
    # The index does not have promote-release: the hint installs from where this promote came from.
    assert "pip install 'promote-release[demo]'" not in line and "[demo]" in line
    assert not (tmp_path / "demo").exists()


@pytest.mark.slow
def test_a_plain_install_pulls_in_no_mlx_and_check_and_test_run_there(tmp_path: Path) -> None:
    # A copy of the source: building in the repository itself would leave build/ and egg-info behind.
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "promote", source / "promote", ignore=shutil.ignore_patterns("__pycache__"))
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python, promote = env_dir / "bin" / "python", env_dir / "bin" / "promote"
    pip = [str(python), "-m", "pip", "--disable-pip-version-check"]
    subprocess.run([*pip, "install", "--quiet", str(source)], check=True, timeout=540)

    installed = subprocess.run([*pip, "list", "--format=freeze"], capture_output=True, text=True, check=True).stdout
    names = {line.split("==")[0].lower() for line in installed.splitlines()}
    assert "promote-release" in names
    assert not names & {"mlx", "mlx-cpu", "mlx-lm", "mlx-metal", "transformers", "torch", "numpy"}, names

    fleet = make_fleet(tmp_path / "team", names=("origin",))
    write_package(fleet.work, "packages/proxy", {"tests/test_proxy.py": "def test_route():\n    assert True\n"})
    with (fleet.work / "promote.toml").open("a") as config:
        config.write('[[promote.packages]]\nname = "proxy"\npath = "packages/proxy"\n')
    clean = {"PATH": f"{env_dir / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path)}
    checked = subprocess.run([str(promote), "check"], cwd=fleet.work, capture_output=True, text=True, env=clean)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = subprocess.run([str(promote), "test"], cwd=fleet.work, capture_output=True, text=True, env=clean)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "all green" in tested.stdout
    assert any(line.split()[:3] == ["proxy", "1", "0"] for line in tested.stdout.splitlines()), tested.stdout
    demo = subprocess.run([str(promote), "demo"], cwd=tmp_path, capture_output=True, text=True, env=clean)
    assert demo.returncode == 2
    assert demo.stderr.strip().endswith(f"(not installed here): pip install '{source}[demo]'"), demo.stderr
