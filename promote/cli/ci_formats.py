"""`--format`, `--junitxml` and GitHub annotations: what CI systems read besides promote's own JSON."""

from __future__ import annotations

import json
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


def write_junitxml(result: RunResult) -> None:
    """With --junitxml PATH: the JUnit XML of every package of the run in one file."""
    from promote.runners.junit import merge_junit

    ctx = click.get_current_context(silent=True)
    path = ctx.meta.get(JUNITXML) if ctx is not None else None
    if path is not None:
        merge_junit([p.out_dir / "junit.xml" for p in result.packages], Path(path))
