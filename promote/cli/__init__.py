"""The `promote` command line: parse options, call one core function, print, exit."""

from __future__ import annotations

import gc
import json
import signal
import sys
import threading
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from promote import __version__
from promote.core.errors import (
    EXIT_BLOCKED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_PARTIAL,
    EXIT_UNDECIDED,
    EXIT_USAGE,
    UsageError,
    error_handler,
)

if TYPE_CHECKING:
    from promote.config import Config
    from promote.config.workspace import Workspace

# Verdicts to exit codes, the contract in one table.
EXIT_CODES = {
    "promotable": EXIT_OK,
    "merged": EXIT_OK,
    "would-merge": EXIT_OK,
    "blocked": EXIT_BLOCKED,
    "undecided": EXIT_UNDECIDED,
    "partial": EXIT_PARTIAL,
}

# `promote bisect`: a problem found exits 1, nothing to find 0, no answer 3.
BISECT_EXIT = {
    "order-dependent": EXIT_BLOCKED,
    "genuine": EXIT_BLOCKED,
    "flaky": EXIT_BLOCKED,
    "not-reproduced": EXIT_OK,
    "undecided": EXIT_UNDECIDED,
}

# `promote audit`: every gate passes 0, a gate fails 1, a gate undecided 3.
AUDIT_EXIT = {"pass": EXIT_OK, "fail": EXIT_BLOCKED, "undecided": EXIT_UNDECIDED}

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
    from promote.core.redact import clean, current

    # Secrets redacted; control characters (from commit subjects, test names, output) shown, never sent raw.
    click.echo(json.dumps(current().data(data), indent=2) if as_json else clean(text))


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


@cli.command()
@click.option("--overwrite", is_flag=True, help="Replace an existing promote.toml.")
@click.pass_obj
def init(obj: Context, overwrite: bool) -> None:
    """Write a starter promote.toml from this repository's remotes and branches."""
    from promote.config.starter import init as write_starter

    click.echo(f"wrote {write_starter(obj.directory, overwrite=overwrite)}")


@cli.command()
@candidate_option
@json_option
@click.pass_obj
def check(obj: Context, candidate: str | None, as_json: bool) -> None:
    """Read-only verdict: can trunk be fast-forwarded to the candidate on every mirror?"""
    from promote.cli.render import check_report
    from promote.release.check import check as run_check

    result = run_check(obj.workspace(), candidate)
    emit(result.to_json(), check_report(result), as_json=as_json)
    sys.exit(EXIT_CODES[result.verdict])


@cli.command()
@candidate_option
@click.option("--dry-run", is_flag=True, help="Verify and say what would be pushed; push nothing.")
@json_option
@click.pass_obj
def merge(obj: Context, candidate: str | None, dry_run: bool, as_json: bool) -> None:
    """Verify afresh, then fast-forward trunk on every mirror (never forced)."""
    from promote.cli.render import merge_record
    from promote.release.merge import merge as run_merge

    ws = obj.workspace()
    with hold_lock(ws.config.root):
        result = run_merge(ws, candidate, dry_run=dry_run)
    for note in result.notes:
        click.echo(f"promote: {note}", err=True)
    emit(result.to_json(), merge_record(result), as_json=as_json)
    sys.exit(EXIT_CODES[result.verdict])


@cli.command("test")
@click.option("--package", "package", metavar="NAME", default=None, help="Run only this package.")
@json_option
@click.pass_obj
def test_command(obj: Context, package: str | None, as_json: bool) -> None:
    """Run the test packages with isolation; record what ran and what leaked."""
    from datetime import datetime, timezone

    from promote.config import load_config
    from promote.core.state import new_run_id
    from promote.runners.run import run_tests

    progress = LiveProgress(live=sys.stderr.isatty())
    config = load_config(obj.directory, obj.config)
    commit: list[str | None] = []

    def meanwhile() -> None:
        # While the tests start up (one core is idle then): what is needed only afterwards. The commit
        # is read as the tests start, which is also the commit they ran on.
        import promote.cli.test_report  # noqa: F401
        from promote.evidence.store import head_commit

        commit.append(head_commit(config))

    run_id, started = new_run_id(), datetime.now(timezone.utc).isoformat(timespec="microseconds")
    with hold_lock(config.root):
        try:
            result = run_tests(config, package=package, on_progress=progress.update, meanwhile=meanwhile, run_id=run_id)
        except KeyboardInterrupt:
            progress.close()
            from promote.evidence.store import record_interrupted_run

            record_interrupted_run(config, run_id, started, command_line(), commit[0] if commit else None)
            raise
    progress.close()
    from promote.cli.test_report import run_report
    from promote.evidence.store import record_test_run

    # run_tests calls `meanwhile` once on every run it returns from.
    [head] = commit
    record_test_run(config, result, command_line(), head)
    emit(result.to_json(), run_report(result), as_json=as_json)
    sys.exit(EXIT_OK if result.green else EXIT_BLOCKED)


@cli.command("bisect")
@click.argument("test_id")
@click.option("--package", "package", metavar="NAME", default=None, help="The package the test belongs to.")
@json_option
@click.pass_obj
def bisect_command(obj: Context, test_id: str, package: str | None, as_json: bool) -> None:
    """Find which earlier test makes TEST_ID fail: rerun it alone, then bisect what ran before it."""
    from promote.runners.causes.investigate import bisect_by_hand
    from promote.runners.run import last_run_dir, select

    config = load_config_of(obj)
    chosen = select(config, package)
    if len(chosen) > 1:
        names = ", ".join(p.name for p in chosen)
        raise UsageError(f"{test_id}: which package? pass --package NAME (packages: {names})")
    pkg = chosen[0]
    verdict, finding, invocations = bisect_by_hand(config, pkg, test_id, last_run=last_run_dir(config, pkg.name))
    data = {
        "test": verdict.test,
        "package": pkg.name,
        "verdict": verdict.kind,
        "polluters": list(verdict.polluters),
        "reruns": verdict.reruns,
        "invocations": invocations,
        "detail": verdict.detail,
        "finding": finding.to_json() if finding else None,
    }
    cause = f": caused by {', '.join(verdict.polluters)}" if verdict.polluters else ""
    detail = f" ({verdict.detail})" if verdict.detail else ""
    text = f"{test_id}: {verdict.kind}{cause}{detail}; {verdict.reruns} reruns, {invocations} pytest runs"
    emit(data, text, as_json=as_json)
    sys.exit(BISECT_EXIT[verdict.kind])


@cli.command()
@click.option("--publish", is_flag=True, help="Commit the Markdown page into the docs repository.")
@click.option("--push", is_flag=True, help="With --publish: push that commit (never forced).")
@json_option
@click.pass_obj
def audit(obj: Context, publish: bool, push: bool, as_json: bool) -> None:
    """Check, test, run every check, decide the four gates, and write the evidence pages."""
    from promote.cli.audit_report import audit_report
    from promote.evidence.audit import audit as run_audit

    if push and not publish:
        raise UsageError("--push only makes sense with --publish")
    progress = LiveProgress(live=sys.stderr.isatty())
    ws = obj.workspace()
    with hold_lock(ws.config.root):
        result = run_audit(ws, command=command_line(), publish=publish, push=push, on_progress=progress.update)
    progress.close()
    emit(result.to_json(), audit_report(result), as_json=as_json)
    sys.exit(AUDIT_EXIT[result.verdict])


@cli.command()
@click.argument("run_id", required=False)
@click.option(
    "--limit", default=10, show_default=True, type=click.IntRange(1, 100000), help="How many recent runs to list."
)
@json_option
@click.pass_obj
def history(obj: Context, run_id: str | None, limit: int, as_json: bool) -> None:
    """List recent runs with what changed, or show one run."""
    from promote.cli.history_report import show_history

    data, text = show_history(load_config_of(obj), run_id, limit=limit)
    emit(data, text, as_json=as_json)


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


@cli.command("stations")
@json_option
@click.pass_obj
def stations_command(obj: Context, as_json: bool) -> None:
    """Show the stations tests may run on: this one as detected, and the configured ones."""
    from promote.cli.render import inventory_report
    from promote.runners.stations import inventory

    fleet = inventory(load_config_of(obj))
    emit(fleet.to_json(), inventory_report(fleet), as_json=as_json)


@cli.command("demo")
@click.option(
    "--keep",
    metavar="DIR",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Build the example workspace in DIR (new or empty) and keep it; default: a temporary directory.",
)
def demo_command(keep: Path | None) -> None:
    """Build an example workspace with planted problems and audit it end to end (exit 0: its findings are expected)."""
    from promote.cli.demo_report import demo_report
    from promote.demo.run import demo

    progress = LiveProgress(live=sys.stderr.isatty())
    run = demo(keep, say=lambda line: click.echo(line, err=True), on_progress=progress.update)
    progress.close()
    click.echo(demo_report(run))


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
