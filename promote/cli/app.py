"""The click group, its shared options and helpers, and the entry point: the one place errors become exit codes."""

from __future__ import annotations

import gc
import os
import signal
import sys
import threading
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from promote import __version__
from promote.cli.terminal import GROUP_EPILOG, color_wanted, epilog, shown
from promote.core.errors import EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, error_handler

if TYPE_CHECKING:
    from promote.config import Config
    from promote.config.workspace import Workspace
    from promote.runners.causes.investigate import Step


candidate_option = click.option(
    "--candidate",
    metavar="REF",
    default=None,
    help="Commit to promote (default: the local trunk's head).",
)

json_option = click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")


@dataclass(frozen=True)
class Lazy:
    """Where a subcommand lives, and its one-line summary: `promote --help` lists it without importing it."""

    module: str  # under promote.cli.commands
    function: str
    summary: str  # the first line of the command's docstring (tests/cli/test_lazy.py holds them equal)


# Each command's module is imported on first use, so `promote check` (a pre-push hook) never loads
# what only `test`, `audit` or `accel` need: click's "Lazily Loading Subcommands" pattern.
COMMANDS = {
    "accel": Lazy(
        "accel",
        "accel_command",
        "Check each accelerated path: kill switch both ways, numeric parity, interleaved A/B, validated OS builds.",
    ),
    "audit": Lazy(
        "evidence", "audit", "Check, test, run every check, decide the four gates, and write the evidence pages."
    ),
    "bench": Lazy(
        "accel",
        "bench_command",
        "Time one accelerated path's A/B, arms interleaved (only the bench: no switch or parity runs).",
    ),
    "bisect": Lazy(
        "testing",
        "bisect_command",
        "Find which earlier test makes TEST_ID fail: rerun it alone, then bisect what ran before it.",
    ),
    "check": Lazy(
        "release", "check", "Read-only verdict: can trunk be fast-forwarded to the candidate on every mirror?"
    ),
    "demo": Lazy(
        "evidence",
        "demo_command",
        "Build an example workspace with planted problems and audit it end to end (exit 0: its findings are expected).",
    ),
    "history": Lazy(
        "evidence",
        "history",
        "List recent runs with what changed, or show one run; --tests and --test tell each test's story.",
    ),
    "init": Lazy(
        "release",
        "init",
        "Write a starter promote.toml from this repository's remotes and branches, proposing its test packages.",
    ),
    "merge": Lazy("release", "merge", "Verify afresh, then fast-forward trunk on every mirror (never forced)."),
    "stations": Lazy(
        "testing",
        "stations_command",
        "Show the stations tests may run on: this one as detected, and the configured ones.",
    ),
    "test": Lazy("testing", "test_command", "Run the test packages with isolation; record what ran and what leaked."),
}


class PromoteGroup(click.Group):
    """A click group that imports a command's module on first use, and whose `main` maps errors to exit codes."""

    def add_command(self, cmd: click.Command, name: str | None = None) -> None:
        # Every command's --help ends with its exit codes and an example.
        cmd.epilog = cmd.epilog or epilog(name or cmd.name or "")
        super().add_command(cmd, name)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            lazy = COMMANDS[cmd_name]
            # importlib.import_module would do the same, but unseen by `python -X importtime` (the measure
            # of what each command costs to start, BENCHMARKS.md): it bypasses the import statement's path.
            module = __import__(f"promote.cli.commands.{lazy.module}", fromlist=[lazy.function])
            command = getattr(module, lazy.function)
            if not isinstance(command, click.Command):
                raise TypeError(f"promote.cli.commands.{lazy.module}.{lazy.function} is not a click command")
            self.add_command(command, cmd_name)
        return self.commands.get(cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """Each command with its whole one-line summary (wrapped, never cut off with "..."), none imported."""
        rows = []
        for name in self.list_commands(ctx):
            loaded = self.commands.get(name)
            summary = loaded.get_short_help_str(limit=1000) if loaded is not None else COMMANDS[name].summary
            rows.append((name, summary))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

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
        root = click.get_current_context(silent=True)
        obj = root.find_root().obj if root is not None else None
        # -q: no progress at all; -v: every rerun on its own line even when stderr is not a terminal.
        self.verbosity = obj.verbosity if isinstance(obj, Context) else 0
        self.live = live and self.verbosity >= 0
        self.state: dict[str, tuple[int, int]] = {}
        self.lock = threading.Lock()
        self.stepped = False

    def update(self, name: str, done: int, total: int, finished: bool) -> None:
        with self.lock:
            self.state[name] = (done, total)
            if self.live:
                # color=True: clearing the line is cursor control, kept under NO_COLOR (which drops colour only).
                line = "  ".join(f"{n} {d}/{t or '?'}" for n, (d, t) in self.state.items())
                click.echo(f"\r\x1b[2K{line}", err=True, nl=False, color=True)
            elif finished and self.verbosity >= 0:
                click.echo(f"{name}: {done}/{total} tests finished", err=True)

    def step(self, step: Step) -> None:
        """A rerun starting: what it does, for which test, k of n (reruns and bisection take seconds each)."""
        from promote.core.redact import one_line

        test = one_line(step.test)
        if step.action == "alone":
            line = f"rerunning failed tests alone {step.k}/{step.n}: {test}"
        elif step.action == "unrestored":
            line = f"running {step.before} test(s) from {test} on again, nothing restored {step.k}/{step.n}"
        else:
            side = f", {step.side} selections" if step.side > 1 else ""
            line = f"bisecting {test}: rerun {step.k}/~{step.n}, after up to {step.before} test(s){side}"
        with self.lock:
            if self.live:
                self.stepped = True
                click.echo(f"\r\x1b[2K{line}", err=True, nl=False, color=True)
            elif self.verbosity > 0:
                click.echo(line, err=True)

    def close(self) -> None:
        if self.live and (self.state or self.stepped):
            click.echo("", err=True)


class Context:
    """Global options shared by every subcommand."""

    def __init__(self, directory: Path, config: Path | None, verbosity: int = 0) -> None:
        self.directory = directory
        self.config = config
        self.verbosity = verbosity  # -1 quiet, 0 normal, 1 verbose

    def workspace(self) -> Workspace:
        from promote.config.workspace import open_workspace

        return open_workspace(self.directory, self.config)


def emit(data: dict[str, object] | None, text: str, *, as_json: bool) -> None:
    from promote.cli.ci_formats import annotate, chosen_format, machine_text
    from promote.core.redact import current

    fmt = chosen_format(as_json)
    # Secrets redacted; control characters (from commit subjects, test names, output) shown, never sent raw;
    # colour only on the words the report marked, so it is promote's alone.
    redacted = current().data(data)
    click.echo(machine_text(redacted, fmt) if fmt != "text" else shown(text, colour=color_wanted(sys.stdout)))
    annotate(redacted, fmt)


@click.group(
    cls=PromoteGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 120},
    epilog=GROUP_EPILOG,
)
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
@click.option("-q", "--quiet", is_flag=True, help="No progress lines; only the report and errors.")
@click.option("-v", "--verbose", is_flag=True, help="Every rerun and bisection step on its own line.")
@click.pass_context
def cli(ctx: click.Context, directory: Path, config: Path | None, quiet: bool, verbose: bool) -> None:
    """Promote a release safely: verify every mirror, fast-forward without force, prove it."""
    if quiet and verbose:
        raise click.UsageError("-q and -v contradict each other; pass one")
    if os.environ.get("NO_COLOR"):
        ctx.color = False
    ctx.obj = Context(directory, config, -1 if quiet else 1 if verbose else 0)


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
