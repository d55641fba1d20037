"""Run the promote CLI in-process, as a user would type it, and return what it printed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result

from promote.cli import cli


def run(cwd: Path, *args: str) -> Result:
    try:
        # click 8.1 mixes stderr into stdout unless told not to; 8.2 keeps them apart and dropped the switch.
        runner = CliRunner(mix_stderr=False)  # type: ignore[call-arg]
    except TypeError:
        runner = CliRunner()
    return runner.invoke(cli, ["-C", str(cwd), *args], catch_exceptions=False)


def run_json(cwd: Path, *args: str) -> tuple[int, dict[str, Any]]:
    result = run(cwd, *args, "--json")
    return result.exit_code, json.loads(result.stdout)
