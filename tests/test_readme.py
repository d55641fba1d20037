"""What the README and the manual in docs/ show parses, runs as written and means what it says."""

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
from packaging.requirements import Requirement

from promote import config
from promote.cli import cli
from promote.runners.plugin.probes import ENTRY_POINT_GROUP, as_probe
from tests.helpers.gitrepos import GIT_ENV, commit, git

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the fallback promote itself depends on
    import tomli as tomllib

ROOT = Path(__file__).parent.parent
README = (ROOT / "README.md").read_text()
ACTION = yaml.safe_load((ROOT / "action.yml").read_text())
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
PAGES = {path.name: path.read_text() for path in sorted((ROOT / "docs").glob("*.md"))}


def page(name: str) -> str:
    """A page of the manual, by file name (docs/NAME)."""
    return PAGES[name]


def blocks(language: str, *texts: str) -> list[str]:
    """The fenced blocks of `language` in `texts` (default: the README and every page of the manual)."""
    return re.findall(rf"```{language}\n(.*?)```", "\n".join(texts or (README, *PAGES.values())), flags=re.S)


def test_every_toml_example_is_a_valid_configuration(tmp_path: Path) -> None:
    examples = [text for text in blocks("toml") if not text.startswith("[project.")]
    assert len(examples) >= 6
    for i, text in enumerate(examples):
        body = text if text.lstrip().startswith("[promote]") else '[promote]\ntrunk = "main"\n' + text
        path = tmp_path / f"example{i}.toml"
        path.write_text(body)
        loaded = config.load(path)
        assert loaded.trunk


def test_yaml_examples_parse_and_the_workflow_runs_an_audit() -> None:
    parsed = [yaml.safe_load(text) for text in blocks("yaml", page("ci.md"))]
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
    [plist] = blocks("xml", page("audits.md"))
    agent = plistlib.loads(plist.encode())
    assert agent["ProgramArguments"][1:] == ["audit", "--publish", "--push"]
    [cron] = blocks("cron", page("audits.md"))
    line = next(ln for ln in cron.splitlines() if ln and not ln.startswith("#"))
    assert len(line.split()[:5]) == 5 and "promote audit --publish" in line


def test_every_command_in_the_exit_code_table_exists() -> None:
    table = [ln for ln in page("commands.md").splitlines() if ln.startswith("| `promote ")]
    names = {re.match(r"\| `promote (\w+)", ln).group(1) for ln in table}  # type: ignore[union-attr]
    assert names <= set(cli.list_commands(click.Context(cli)))
    assert {"check", "merge", "test", "bisect", "init"} <= names


def test_pre_commit_hook_id_matches_the_manifest() -> None:
    manifest = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    assert manifest[0]["id"] == "promote-check"
    assert manifest[0]["entry"] == "promote check"
    # A pre-push hook needs its hook type installed; the manual says how.
    assert manifest[0]["stages"] == ["pre-push"]
    assert "pre-commit install --hook-type pre-push" in "".join(blocks("sh", page("ci.md")))
    # Its environment installs the repository alone: the core dependencies, no MLX or mlx-lm.
    assert manifest[0]["language"] == "python"
    assert not any("mlx" in dep for dep in manifest[0].get("additional_dependencies", []))


def shell_line(starting: str, *texts: str) -> str:
    [line] = [ln for text in blocks("sh", *texts) for ln in text.splitlines() if ln.startswith(starting)]
    return line.split("  #")[0].strip()


def test_the_plugin_command_runs_as_written_where_promote_is_installed(tmp_path: Path) -> None:
    (tmp_path / "test_it.py").write_text("def test_it():\n    assert True\n")
    command = shell_line("pytest -p promote.runners.plugin.hooks", page("testing.md"))
    argv = [sys.executable, "-m", *command.replace("DIR", str(tmp_path / "out")).split()]
    done = subprocess.run([*argv, "-p", "no:cacheprovider"], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "already registered" not in done.stderr
    [record] = json.loads((tmp_path / "out" / "results-main.json").read_text())["tests"]
    assert (record["nodeid"], record["outcome"]) == ("test_it.py::test_it", "passed")


def test_the_completion_line_prints_a_bash_completion_function() -> None:
    line = shell_line('eval "$(_PROMOTE_COMPLETE=bash_source promote)"', page("commands.md"))
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
    explained = set(re.findall(r"^\| `([a-z-]+)` \|", page("findings.md"), flags=re.M))
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
    [pyproject] = [text for text in blocks("toml", page("testing.md")) if text.startswith("[project.")]
    [(name, target)] = tomllib.loads(pyproject)["project"]["entry-points"][ENTRY_POINT_GROUP].items()
    module, function = target.split(":")
    [example] = [text for text in blocks("python", page("testing.md")) if "Probe(" in text]
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


def section(text: str, heading: str) -> str:
    """The text under `heading` (a `## ` line), up to the next heading of that level."""
    return text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]


def commands(text: str) -> list[str]:
    """The command lines of the `sh` blocks in `text`, without their comments."""
    return [ln.split("  #")[0].strip() for block in blocks("sh", text) for ln in block.splitlines() if ln.strip()]


def test_the_quick_start_installs_the_dev_extra_and_runs_the_test_command_ci_runs() -> None:
    assert commands(section(README, "Quick start")) == ["pip install -e '.[dev]' && promote demo", "pytest -n auto"]
    assert "dev" in PROJECT["optional-dependencies"] and "demo" in cli.list_commands(click.Context(cli))
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert "pytest -n auto" in ci  # the README's test command is CI's, exactly
    assert commands(section(page("getting-started.md"), "Quick start")) == commands(section(README, "Quick start"))


def test_every_install_line_works_today_from_a_clone_or_a_git_url() -> None:
    lines = [
        ln for text in (README, page("getting-started.md")) for ln in commands(text) if ln.startswith("pip install")
    ]
    assert len(lines) >= 5
    extras = set(PROJECT["optional-dependencies"])
    for line in lines:
        argument = line.split(" && ")[0].removeprefix("pip install").strip().removeprefix("-e").strip().strip("'")
        if argument.startswith("."):  # in a clone: the directory, maybe with extras that exist
            assert re.fullmatch(r"\.(\[[a-z,]+\])?", argument), line
            assert set(re.findall(r"[a-z]+", argument)) <= extras, line
            continue
        # Not the package index: the distribution is not published there yet (and `promote` is another project).
        wanted = Requirement(argument)
        assert wanted.name == PROJECT["name"] and wanted.url is not None, line
        assert wanted.url.startswith("git+https://") and wanted.url.endswith(f"@v{PROJECT['version']}"), line
    for text in (README, page("getting-started.md")):
        # The index name only as what will work once it is published.
        for found in re.finditer(r"pip install promote-release`", text):
            assert "Once it is published" in text[max(0, found.start() - 80) : found.start()], text[
                found.start() - 80 :
            ]


@pytest.mark.slow
def test_the_first_use_on_ones_own_repository_runs_as_written(tmp_path: Path) -> None:
    own = section(README, "Use it on your own repository")
    steps = [c for c in commands(own) if c.startswith("promote ")]
    assert steps == ["promote init", "promote check", "promote test", "promote audit"]
    [package] = blocks("toml", own)
    # Someone's repository: one test, trunk pushed to its one remote.
    origin, work = tmp_path / "origin.git", tmp_path / "app"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(origin))
    work.mkdir()
    git(work, "init", "-q", "-b", "main")
    commit(work, "first", {"tests/test_app.py": "def test_it():\n    assert 1 + 1 == 2\n"})
    git(work, "remote", "add", "origin", str(origin))
    git(work, "push", "-q", "origin", "main")
    env = {**os.environ, **GIT_ENV, "NO_COLOR": "1"}
    promote = str(Path(sys.executable).parent / "promote")
    done = {}
    for step in steps:
        if step == "promote test":  # the README names the tests to run before running them
            with (work / "promote.toml").open("a") as f:
                f.write("\n" + package)
        argv = [promote, *step.split()[1:]]
        done[step] = subprocess.run(argv, cwd=work, capture_output=True, text=True, env=env, timeout=600)

    assert done["promote init"].returncode == 0
    assert config.load(work / "promote.toml").mirrors == ("origin",)  # the remotes are the mirrors
    assert done["promote check"].returncode == 0 and "verdict: promotable" in done["promote check"].stdout
    assert done["promote test"].returncode == 0, done["promote test"].stdout + done["promote test"].stderr
    assert re.search(r"^app\s+1\s+0\s+0\s+0\s+0\s+0\s", done["promote test"].stdout, flags=re.M)
    audit = done["promote audit"]
    # No docs and nothing deployed configured yet: those gates are undecided (exit 3), the others decided.
    assert audit.returncode == 3, audit.stdout + audit.stderr
    assert re.search(r"^PASS\s+Everything E2E Tested$", audit.stdout, flags=re.M)
    assert re.search(r"^UNDECIDED\s+in Docs$", audit.stdout, flags=re.M)
    [evidence] = (work / ".promote" / "runs").glob("*/evidence.md")
    assert "Everything E2E Tested" in evidence.read_text()


def test_the_readme_links_to_pages_that_exist_and_to_every_page_of_the_manual() -> None:
    linked = set(re.findall(r"\]\((docs/[\w.-]+\.md)\)", README))
    assert all((ROOT / link).is_file() for link in linked), sorted(
        link for link in linked if not (ROOT / link).is_file()
    )
    assert {f"docs/{name}" for name in PAGES} == linked
