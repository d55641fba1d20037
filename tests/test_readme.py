"""What the README shows parses and means what it says."""

from __future__ import annotations

import plistlib
import re
from pathlib import Path

import yaml

from promote import config
from promote.cli import cli

README = (Path(__file__).parent.parent / "README.md").read_text()


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README, flags=re.S)


def test_every_toml_example_is_a_valid_configuration(tmp_path: Path) -> None:
    examples = blocks("toml")
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
    assert any("promote audit" in step.get("run", "") for step in steps)
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
    assert names <= set(cli.commands)
    assert {"check", "merge", "test", "bisect", "init"} <= names


def test_pre_commit_hook_id_matches_the_manifest() -> None:
    manifest = yaml.safe_load((Path(__file__).parent.parent / ".pre-commit-hooks.yaml").read_text())
    assert manifest[0]["id"] == "promote-check"
    assert manifest[0]["entry"] == "promote check"


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
