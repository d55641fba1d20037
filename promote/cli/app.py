"""The click group, its shared options and helpers, and the entry point: the one place errors become exit codes."""

from __future__ import annotations

import gc
import signal
import sys
import threading
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from promote import __version__
from promote.core.errors import EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, error_handler

if TYPE_CHECKING:
    from promote.config import Config
    from promote.config.workspace import Workspace


candidate_option = click.option(
    "--candidate",
    metavar="REF",
    default=None,
    help="Commit to promote (default: the local trunk's head).",
)

json_option = click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")


class PromoteGroup(click.Group):
    """A click group whose `main` is the one place errors and verdicts become exit codes."""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        kwargs["standalone_mode"] = False
        with error_handler():
            try:
                super().main(*args, **kwargs)
            except click.exceptions.Abort:
                click.echo("promote: interrupted", err=True)
                sys.exit(EXIT_INTERRUPTED)
            except click.ClickException as e:
                e.show()
                sys.exit(e.exit_code if e.exit_code else EXIT_USAGE)
            except click.exceptions.Exit as e:
                sys.exit(e.exit_code)
        sys.exit(EXIT_OK)


class LiveProgress:
    """Tests done / total per package: one live line on a terminal, a line per finished package otherwise."""

    def __init__(self, *, live: bool) -> None:
        self.live = live
        self.state: dict[str, tuple[int, int]] = {}
        self.lock = threading.Lock()

    def update(self, name: str, done: int, total: int, finished: bool) -> None:
        with self.lock:
            self.state[name] = (done, total)
            if self.live:
                line = "  ".join(f"{n} {d}/{t or '?'}" for n, (d, t) in self.state.items())
                click.echo(f"\r\x1b[2K{line}", err=True, nl=False)
            elif finished:
                click.echo(f"{name}: {done}/{total} tests finished", err=True)

    def close(self) -> None:
        if self.live and self.state:
            click.echo("", err=True)


class Context:
    """Global options shared by every subcommand."""

    def __init__(self, directory: Path, config: Path | None) -> None:
        self.directory = directory
        self.config = config

    def workspace(self) -> Workspace:
        from promote.config.workspace import open_workspace

        return open_workspace(self.directory, self.config)


def emit(data: dict[str, object] | None, text: str, *, as_json: bool) -> None:
    from promote.cli.ci_formats import annotate, chosen_format, machine_text
    from promote.core.redact import clean, current

    fmt = chosen_format(as_json)
    # Secrets redacted; control characters (from commit subjects, test names, output) shown, never sent raw.
    shown = current().data(data)
    click.echo(machine_text(shown, fmt) if fmt != "text" else clean(text))
    annotate(shown, fmt)


@click.group(cls=PromoteGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="promote")
@click.option(
    "-C",
    "directory",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("."),
    help="Run as if started in this directory.",
)
@click.option(
    "--config",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Configuration file (default: nearest promote.toml or pyproject.toml).",
)
@click.pass_context
def cli(ctx: click.Context, directory: Path, config: Path | None) -> None:
    """Promote a release safely: verify every mirror, fast-forward without force, prove it."""
    ctx.obj = Context(directory, config)


def command_line() -> str:
    """How promote was invoked, for provenance (arguments only: nothing from the environment)."""
    return " ".join(["promote", *sys.argv[1:]])


def hold_lock(root: Path) -> AbstractContextManager[Path]:
    """One merge, test or audit at a time in this repository (see promote/core/lock.py)."""
    from promote.core.lock import hold

    return hold(root, command_line())


def load_config_of(obj: Context) -> Config:
    from promote.config import load_config

    return load_config(obj.directory, obj.config)


def _terminate(signum: int, frame: object) -> None:
    # SIGTERM takes Ctrl-C's path: children are stopped and the run is recorded as interrupted.
    raise KeyboardInterrupt


def main() -> None:
    """Console-script entry point."""
    signal.signal(signal.SIGTERM, _terminate)
    try:
        cli.main(prog_name="promote")
    finally:
        # Everything the command made is about to go with the process. Frozen objects are left out of
        # the collection the interpreter runs at exit, which took ~10-15 ms of every `promote test`
        # (BENCHMARKS.md); files and databases are closed where they were opened, not left to it.
        gc.freeze()
