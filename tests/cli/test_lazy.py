"""Each command imports what it uses: `promote check` (a pre-push hook) loads nothing of the audit, runners or demo."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import click

from promote.cli import cli
from promote.cli.app import COMMANDS
from promote.cli.terminal import epilog
from tests.helpers.gitrepos import make_fleet

# What `promote check` has no use for: the layers above release, and its siblings.
NOT_FOR_CHECK = ("promote.evidence", "promote.runners", "promote.accel", "promote.checks", "promote.demo")
OTHER_COMMANDS = ("promote.cli.commands.testing", "promote.cli.commands.evidence", "promote.cli.commands.accel")

# Runs the CLI as the console script does, then writes the modules the process ended with to $MODULES.
DRIVER = """
import json, os, sys
from promote.cli import main
sys.argv = ["promote", *sys.argv[1:]]
try:
    main()
finally:
    with open(os.environ["MODULES"], "w") as f:
        json.dump(sorted(sys.modules), f)
"""


def imported_by(*args: str, cwd: Path) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """Run `python -X importtime -m promote ARGS` in a fresh interpreter: what it printed, and each module imported."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "promote", *args], cwd=cwd, capture_output=True, text=True
    )
    modules = re.findall(r"^import time:\s+\d+ \|\s+\d+ \| +(\S+)$", done.stderr, flags=re.M)
    return done, modules


def of(modules: list[str], prefixes: tuple[str, ...]) -> list[str]:
    return [m for m in modules if m.startswith(prefixes)]


def test_check_help_imports_only_the_check_command(tmp_path: Path) -> None:
    done, modules = imported_by("check", "--help", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Read-only verdict" in done.stdout
    # The lazily loaded module itself is seen: the guard below looks at a list that holds it.
    assert "promote.cli.commands.release" in modules
    assert of(modules, NOT_FOR_CHECK + OTHER_COMMANDS) == []


def test_a_real_check_imports_config_core_and_release_and_nothing_of_the_rest(tmp_path: Path) -> None:
    fleet = make_fleet(tmp_path)
    record = tmp_path / "modules.json"
    done = subprocess.run(
        [sys.executable, "-c", DRIVER, "check", "--json"],
        cwd=fleet.work,
        capture_output=True,
        text=True,
        env={**os.environ, "MODULES": str(record)},
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["verdict"] == "promotable"
    modules = json.loads(record.read_text())
    assert {"promote.release.check", "promote.config", "promote.core.git"} <= set(modules)
    assert of(modules, NOT_FOR_CHECK + OTHER_COMMANDS) == []


def test_help_lists_every_command_and_imports_none(tmp_path: Path) -> None:
    done, modules = imported_by("--help", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    listed = re.findall(r"^  (\w+) {2,}", done.stdout, flags=re.M)
    assert listed == sorted(COMMANDS)
    assert of(modules, ("promote.cli.commands.",)) == []


def test_each_summary_in_the_group_is_the_commands_own() -> None:
    ctx = click.Context(cli)
    for name, lazy in COMMANDS.items():
        command = cli.get_command(ctx, name)
        assert isinstance(command, click.Command), name
        assert command.name == name
        assert command.get_short_help_str(limit=1000) == lazy.summary, name
        assert command.epilog == epilog(name), name


def test_an_unknown_command_is_a_usage_error(tmp_path: Path) -> None:
    done, _ = imported_by("chek", cwd=tmp_path)
    assert done.returncode == 2
    assert "No such command 'chek'" in done.stderr
    assert "Traceback" not in done.stderr
