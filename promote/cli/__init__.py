"""The `promote` command line: parse options, call one core function, print, exit. It owns all terminal text."""

from __future__ import annotations

from promote.cli.app import cli, main

__all__ = ["cli", "main"]
