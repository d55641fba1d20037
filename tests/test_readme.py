"""What the README shows parses and means what it says."""

from __future__ import annotations

import importlib
import json
import os
import plistlib
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import click
import pytest
import yaml

from promote import config
from promote.cli import cli
from promote.runners.plugin.probes import ENTRY_POINT_GROUP, as_probe

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the fallback promote itself depends on
    import tomli as tomllib

ROOT = Path(__file__).parent.parent
README = (ROOT / "README.md").read_text()
ACTION = yaml.safe_load((ROOT / "action.yml").read_text())


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README, flags=re.S)


def test_every_toml_example_is_a_valid_configuration(tmp_path: Path) -> None:
    examples = [text for text in blocks("toml") if not text.startswith("[project.")]
    assert len(examples) >= 2
    for i, text in enumerate(examples):
        body = text if text.lstrip().startswith("[promote]") else '[promote]\ntrunk = "main"\n' + text
        path = tmp_path / f"example{i}.toml"
        path.write_text(body)
        loaded = config.load(path)
        assert loaded.trunk


def test_yaml_examples_parse_and_the_workflow_runs_an_audit() -> None:
    parsed = [yaml.safe_load(text) for text in blocks("yaml")]
    workflow = next(p for p in parsed if isinstance(p, dict) and "jobs" in p)
    steps = workflow["jobs"]["audit"]["steps"]
    # The workflow uses this repository's action, which runs the audit (tests/test_action.py runs its steps).
    [action] = [s for s in steps if s.get("uses", "").split("@")[0].endswith("/promote")]
    assert set(action.get("with", {})) <= set(ACTION["inputs"])
    assert any("promote audit" in step.get("run", "") for step in ACTION["runs"]["steps"])
    assert not any("pip install promote" in step.get("run", "") for step in steps)  # another project's name
    assert workflow[True]["schedule"][0]["cron"] == "30 2 * * *"  # YAML 1.1 reads the key `on` as True
    hook = next(p for p in parsed if isinstance(p, dict) and "repos" in p)
    assert hook["repos"][0]["hooks"][0]["id"] == "promote-check"


def test_launchd_plist_and_cron_line_run_promote_audit() -> None:
    [plist] = blocks("xml")
    agent = plistlib.loads(plist.encode())
    assert agent["ProgramArguments"][1:] == ["audit", "--publish", "--push"]
    [cron] = blocks("cron")
    line = next(ln for ln in cron.splitlines() if ln and not ln.startswith("#"))
    assert len(line.split()[:5]) == 5 and "promote audit --publish" in line


def test_every_command_in_the_exit_code_table_exists() -> None:
    table = [ln for ln in README.splitlines() if ln.startswith("| `promote ")]
    names = {re.match(r"\| `promote (\w+)", ln).group(1) for ln in table}  # type: ignore[union-attr]
    assert names <= set(cli.list_commands(click.Context(cli)))
    assert {"check", "merge", "test", "bisect", "init"} <= names


def test_pre_commit_hook_id_matches_the_manifest() -> None:
    manifest = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    assert manifest[0]["id"] == "promote-check"
    assert manifest[0]["entry"] == "promote check"
    # A pre-push hook needs its hook type installed; the README says how.
    assert manifest[0]["stages"] == ["pre-push"]
    assert "pre-commit install --hook-type pre-push" in "".join(blocks("sh"))
    # Its environment installs the repository alone: the core dependencies, no MLX or mlx-lm.
    assert manifest[0]["language"] == "python"
    assert not any("mlx" in dep for dep in manifest[0].get("additional_dependencies", []))


def shell_line(starting: str) -> str:
    [line] = [ln for text in blocks("sh") for ln in text.splitlines() if ln.startswith(starting)]
    return line.split("  #")[0].strip()


def test_the_plugin_command_runs_as_written_where_promote_is_installed(tmp_path: Path) -> None:
    (tmp_path / "test_it.py").write_text("def test_it():\n    assert True\n")
    command = shell_line("pytest -p promote.runners.plugin.hooks")
    argv = [sys.executable, "-m", *command.replace("DIR", str(tmp_path / "out")).split()]
    done = subprocess.run([*argv, "-p", "no:cacheprovider"], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "already registered" not in done.stderr
    [record] = json.loads((tmp_path / "out" / "results-main.json").read_text())["tests"]
    assert (record["nodeid"], record["outcome"]) == ("test_it.py::test_it", "passed")


def test_the_completion_line_prints_a_bash_completion_function() -> None:
    line = shell_line('eval "$(_PROMOTE_COMPLETE=bash_source promote)"')
    assert line == 'eval "$(_PROMOTE_COMPLETE=bash_source promote)"'
    promote = Path(sys.executable).parent / "promote"
    env = {**os.environ, "_PROMOTE_COMPLETE": "bash_source"}
    done = subprocess.run([str(promote)], capture_output=True, text=True, env=env, check=True)
    assert "_promote_completion()" in done.stdout and "complete -o nosort -F _promote_completion" in done.stdout


CONTRACT_CHECKS = {
    "mirror-diverged", "mirror-missing", "mirror-unreachable", "trunk-behind-deployed", "undeployed-change",
    "leaked-state", "cross-thread-stream", "order-dependent", "worker-crash", "impossible-requirement",
    "station-bound", "missing-package", "ci-filtered", "ci-unreachable-runner", "undocumented-feature",
    "filtered-not-fixed",
}  # fmt: skip


def test_every_finding_promote_emits_is_explained() -> None:
    explained = set(re.findall(r"^\| `([a-z-]+)` \|", README, flags=re.M))
    emitted: set[str] = set()
    for path in (Path(__file__).parent.parent / "promote").rglob("*.py"):
        text = path.read_text()
        emitted |= set(re.findall(r'Finding\(\s*"([a-z-]+)"', text))
        emitted |= set(re.findall(r'check="([a-z-]+)"', text))
    assert len(emitted) > 15
    assert emitted <= explained
    assert explained >= CONTRACT_CHECKS


def test_the_probe_example_registers_under_the_entry_point_group_and_makes_probes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    [pyproject] = [text for text in blocks("toml") if text.startswith("[project.")]
    [(name, target)] = tomllib.loads(pyproject)["project"]["entry-points"][ENTRY_POINT_GROUP].items()
    module, function = target.split(":")
    [example] = [text for text in blocks("python") if "Probe(" in text]
    # The example's own module layout, with a stand-in for the project module it watches.
    package = tmp_path / "myproject"
    (package / "testing").mkdir(parents=True)
    for init in (package / "__init__.py", package / "testing" / "__init__.py"):
        init.write_text("")
    (package / "tokenizers.py").write_text("CACHE_SIZE = 128\n")
    (tmp_path / (module.replace(".", "/") + ".py")).write_text(example)
    monkeypatch.syspath_prepend(str(tmp_path))

    probes = [as_probe(p) for p in getattr(importlib.import_module(module), function)()]
    tok: Any = importlib.import_module("myproject.tokenizers")
    [probe] = probes
    before = probe.snapshot()
    tok.CACHE_SIZE = 4096  # what a test that leaks would do
    assert probe.changes(before, probe.snapshot())
    assert probe.restore is not None
    probe.restore(before)
    assert (name, tok.CACHE_SIZE) == ("tokenizer-cache", 128)
