"""The GitHub Action (action.yml): its own `run:` commands, run as the runner would, in a CI-like clone."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import venv
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helpers.ciclone import ci_clone, team_repository

ROOT = Path(__file__).parent.parent
ACTION: dict[str, Any] = yaml.safe_load((ROOT / "action.yml").read_text())


def expand(text: str, values: dict[str, str]) -> str:
    """`${{ name }}` replaced as the runner would, from `values`; an expression the test does not know fails."""

    def one(found: re.Match[str]) -> str:
        return values[found[1].strip()]

    return re.sub(r"\$\{\{(.*?)\}\}", one, text)


def test_the_action_is_composite_installs_its_own_checkout_and_uploads_the_pages() -> None:
    assert ACTION["runs"]["using"] == "composite"
    steps = ACTION["runs"]["steps"]
    install, audit, upload = steps
    assert "${{ github.action_path }}" in str(install["env"].values())
    assert "promote audit --candidate HEAD" in audit["run"]
    assert upload["uses"].startswith("actions/upload-artifact@") and upload["if"] == "always()"
    assert upload["with"]["path"].endswith("/.promote/runs/")
    # Inputs reach the shell through the environment, never pasted into the script.
    assert all("inputs." not in step.get("run", "") for step in steps)


@pytest.mark.slow
def test_the_action_steps_install_promote_and_pass_the_audit_of_a_ci_clone(tmp_path: Path) -> None:
    # The action's checkout, as the runner lays it out under _actions/: a copy of this repository's sources.
    action_path = tmp_path / "action"
    action_path.mkdir()
    for name in ("pyproject.toml", "README.md", "action.yml"):
        shutil.copy(ROOT / name, action_path / name)
    shutil.copytree(ROOT / "promote", action_path / "promote", ignore=shutil.ignore_patterns("__pycache__"))
    env_dir = tmp_path / "runner-python"
    venv.create(env_dir, with_pip=True)
    ci = ci_clone(team_repository(tmp_path / "team"))
    output = tmp_path / "github-output"
    output.touch()

    values = {f"inputs.{k}": v.get("default", "") for k, v in ACTION["inputs"].items()}
    values["github.action_path"] = str(action_path)
    values["steps.audit.outputs.exit-code"] = ""
    runner_env = {
        "PATH": f"{env_dir / 'bin'}:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "GITHUB_ACTIONS": "true",
        "GITHUB_OUTPUT": str(output),
        "RUNNER_TEMP": str(tmp_path),
    }
    for step in ACTION["runs"]["steps"]:
        if "run" not in step:
            continue
        env = {**runner_env, **{k: expand(str(v), values) for k, v in step.get("env", {}).items()}}
        cwd = ci / expand(step.get("working-directory", "."), values)
        done = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", expand(step["run"], values)],
            cwd=cwd, env=env, capture_output=True, text=True, timeout=540,
        )  # fmt: skip
        assert done.returncode == 0, f"{step['name']}: {done.stdout}{done.stderr}"

    assert output.read_text() == "exit-code=0\n"
    uploaded = ci / ACTION["runs"]["steps"][2]["with"]["path"].replace("${{ inputs.working-directory }}/", "")
    pages = {p.suffix for p in uploaded.rglob("evidence.*")} | {p.suffix for p in uploaded.rglob("*.md")}
    assert {".md", ".html", ".json"} <= pages, sorted(os.listdir(uploaded))
