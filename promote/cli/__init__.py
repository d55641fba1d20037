"""The `promote` command line: parse options, call one core function, print, exit. It owns all terminal text."""

from __future__ import annotations

from promote.cli.app import cli, main
from promote.cli.commands import accel, evidence, release, testing  # noqa: F401  (registers the subcommands)

__all__ = ["cli", "main"]
