"""`promote audit`, `history` and `demo`: the evidence commands."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from promote.cli.app import (
    Context,
    LiveProgress,
    candidate_option,
    command_line,
    emit,
    hold_lock,
    json_option,
    load_config_of,
)
from promote.cli.ci_formats import format_option
from promote.core.errors import EXIT_BLOCKED, EXIT_OK, EXIT_PARTIAL, EXIT_UNDECIDED, UsageError
from promote.core.vocab import Status

# `promote audit`: every gate passes 0, a gate fails 1, a gate undecided 3.
AUDIT_EXIT: dict[Status, int] = {"pass": EXIT_OK, "fail": EXIT_BLOCKED, "undecided": EXIT_UNDECIDED}
# Every gate passes but --publish (or --push) did not land: the audit stands, its page is not in the docs.
# A failing or undecided gate keeps its own code: a refused publish never hides it.
EXIT_UNPUBLISHED = EXIT_PARTIAL


@click.command()
@click.option("--publish", is_flag=True, help="Commit the Markdown page into the docs repository.")
@click.option("--push", is_flag=True, help="With --publish: push that commit (never forced).")
@click.option("--bench", is_flag=True, help="Also run each accelerated path's interleaved A/B (long).")
@candidate_option
@json_option
@format_option
@click.pass_obj
def audit(obj: Context, publish: bool, push: bool, bench: bool, candidate: str | None, as_json: bool) -> None:
    """Check, test, run every check, decide the four gates, and write the evidence pages."""
    from promote.cli.audit_report import audit_report
    from promote.evidence.audit import audit as run_audit

    if push and not publish:
        raise UsageError("--push only makes sense with --publish")
    progress = LiveProgress(live=sys.stderr.isatty())
    ws = obj.workspace()
    if candidate is not None:
        from promote.config.workspace import require_checked_out

        require_checked_out(ws.repo, candidate)
    with hold_lock(ws.config.root):
        result = run_audit(
            ws,
            command=command_line(),
            publish=publish,
            push=push,
            on_progress=progress.update,
            on_step=progress.step,
            candidate=candidate,
            bench=bench,
        )
    progress.close()
    emit(result.to_json(), audit_report(result), as_json=as_json)
    if result.unstored:
        from promote.cli.audit_report import unstored_line
        from promote.core.state import StateError

        # After the report: what the audit decided is printed; what a full disk refused is the last line, exit 2.
        raise StateError(unstored_line(result.unstored, publish=publish))
    code = AUDIT_EXIT[result.verdict]
    if result.published is not None and not result.published.ok:
        from promote.cli.audit_report import published_line
        from promote.core.redact import one_line

        click.echo(f"promote: error: publish: {one_line(published_line(result.published))}", err=True)
        code = code if code != EXIT_OK else EXIT_UNPUBLISHED
    sys.exit(code)


@click.command()
@click.argument("run_id", required=False)
@click.option(
    "--limit", default=10, show_default=True, type=click.IntRange(1, 100000), help="How many recent runs to list."
)
@click.option(
    "--tests", "tests", is_flag=True, help="List the tests with a story over the window: flaky, never ran, red, gone."
)
@click.option(
    "--test", "test_id", metavar="ID", default=None, help="Show one test's timeline: run, commit, outcome, why."
)
@click.option(
    "--from-docs", "from_docs", is_flag=True,
    help="With --tests or --test: read the stories from the evidence pages published in the docs repository.",
)  # fmt: skip
@json_option
@click.pass_obj
def history(
    obj: Context, run_id: str | None, limit: int, tests: bool, test_id: str | None, from_docs: bool, as_json: bool
) -> None:
    """List recent runs with what changed, or show one run; --tests and --test tell each test's story."""
    if sum((run_id is not None, test_id is not None, tests)) > 1:
        raise UsageError("give one of RUN, --tests or --test ID")
    if from_docs and not tests and test_id is None:
        raise UsageError("--from-docs goes with --tests or --test ID")
    config = load_config_of(obj)
    if tests or test_id is not None:
        from promote.cli.stories_report import show_stories, show_timeline

        if tests:
            data, text = show_stories(config, from_docs=from_docs)
        else:
            data, text = show_timeline(config, str(test_id), from_docs=from_docs)
    else:
        from promote.cli.history_report import show_history

        data, text = show_history(config, run_id, limit=limit)
    emit(data, text, as_json=as_json)


@click.command("demo")
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
    from promote.demo.planted import demo

    progress = LiveProgress(live=sys.stderr.isatty())
    run = demo(keep, say=lambda line: click.echo(line, err=True), on_progress=progress.update)
    progress.close()
    click.echo(demo_report(run))
