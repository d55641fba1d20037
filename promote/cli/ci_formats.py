"""`--format`, `--junitxml` and GitHub annotations: what CI systems read besides promote's own JSON."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from promote.runners.suite import RunResult

FORMAT = "promote.format"
JUNITXML = "promote.junitxml"


def _remember(key: str) -> Any:
    def callback(ctx: click.Context, param: click.Parameter, value: object) -> object:
        if value is not None:
            ctx.meta[key] = value
        return value

    return callback


format_option = click.option(
    "--format",
    type=click.Choice(["text", "json", "sarif"]),
    default=None,
    expose_value=False,
    callback=_remember(FORMAT),
    help="Output: text (default), json (as --json) or sarif (SARIF 2.1.0, one result per finding).",
)

junitxml_option = click.option(
    "--junitxml",
    metavar="PATH",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    expose_value=False,
    callback=_remember(JUNITXML),
    help="Also write the run's JUnit XML (every package) to PATH.",
)


def chosen_format(as_json: bool) -> str:
    """text, json or sarif: `--format` when given, else json for --json."""
    ctx = click.get_current_context(silent=True)
    chosen = ctx.meta.get(FORMAT) if ctx is not None else None
    return str(chosen) if chosen else ("json" if as_json else "text")


def machine_text(data: Any, fmt: str) -> str:
    """What --json or --format sarif prints for `data`."""
    from promote.cli.sarif import sarif

    return json.dumps(sarif(data or {}) if fmt == "sarif" else data, indent=2)


def annotate(data: dict[str, Any] | None, fmt: str) -> None:
    """Under GitHub Actions, one `::error`/`::warning` line per finding (on stderr when stdout is JSON or SARIF)."""
    from promote.cli.annotations import wanted, workflow_commands

    if not wanted():
        return
    for line in workflow_commands(data):
        click.echo(line, err=fmt != "text")
    sys.stdout.flush()


def _junitxml_path() -> Path | None:
    ctx = click.get_current_context(silent=True)
    path = ctx.meta.get(JUNITXML) if ctx is not None else None
    return None if path is None else Path(path)


def check_junitxml() -> None:
    """Before the run: a --junitxml PATH that cannot be written is a usage error now, not a traceback later."""
    from promote.core.errors import UsageError

    path = _junitxml_path()
    if path is None:
        return
    for level in path.parents:
        if level.exists():
            if not level.is_dir():
                raise UsageError(f"--junitxml {path}: {level} is not a directory")
            break
    if path.is_dir():
        raise UsageError(f"--junitxml {path}: is a directory")
    if path.exists():
        try:
            # Opened for writing, not truncated: a file that refuses writing (read-only) says so before the run.
            os.close(os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC))
        except OSError as e:
            raise UsageError(f"--junitxml {path}: cannot be written: {e.strerror or e}") from None


def write_junitxml(result: RunResult) -> None:
    """With --junitxml PATH: the JUnit XML of every package of the run in one file; UsageError if it cannot be."""
    from promote.core.errors import UsageError
    from promote.runners.junit import merge_junit

    path = _junitxml_path()
    if path is not None:
        try:
            merge_junit([p.out_dir / "junit.xml" for p in result.packages], path)
        except OSError as e:  # a full disk, or /dev/full: only writing finds it
            raise UsageError(f"--junitxml {path}: cannot be written: {e.strerror or e}") from None
