"""Run the promote CLI in-process, as a user would type it, and return what it printed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result

from promote.cli import cli


def run(cwd: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, ["-C", str(cwd), *args], catch_exceptions=False)


def run_json(cwd: Path, *args: str) -> tuple[int, dict[str, Any]]:
    result = run(cwd, *args, "--json")
    return result.exit_code, json.loads(result.stdout)
