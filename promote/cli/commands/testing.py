"""`promote test`, `bisect` and `stations`: running the test packages and finding causes."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from promote.cli.app import Context, LiveProgress, command_line, emit, hold_lock, json_option, load_config_of
from promote.cli.ci_formats import check_junitxml, format_option, junitxml_option, write_junitxml
from promote.core.errors import EXIT_BLOCKED, EXIT_OK, EXIT_UNDECIDED, UsageError
from promote.core.vocab import RerunVerdict

if TYPE_CHECKING:
    from promote.runners.rerun_verdict import Verdict

# `promote bisect`: a problem found exits 1, nothing to find 0, no answer 3.
BISECT_EXIT: dict[RerunVerdict, int] = {
    "order-dependent": EXIT_BLOCKED,
    "genuine": EXIT_BLOCKED,
    "crashes-alone": EXIT_BLOCKED,
    "flaky": EXIT_BLOCKED,
    "not-reproduced": EXIT_OK,
    "undecided": EXIT_UNDECIDED,
}


@click.command("test")
@click.option("--package", "package", metavar="NAME", default=None, help="Run only this package.")
@click.option(
    "--candidate",
    metavar="REF",
    default=None,
    help="The commit under test; must be the one checked out (default: HEAD).",
)
@json_option
@format_option
@junitxml_option
@click.pass_obj
def test_command(obj: Context, package: str | None, candidate: str | None, as_json: bool) -> None:
    """Run the test packages with isolation; record what ran and what leaked."""
    from datetime import datetime, timezone

    from promote.cli.run_report import run_report
    from promote.config import load_config
    from promote.core.redact import one_line
    from promote.core.state import StateError, new_run_id
    from promote.evidence.ci_places import surveyed
    from promote.evidence.history import HistoryError
    from promote.evidence.store import blamed_elsewhere, head_commit, record_interrupted_run, record_test_run
    from promote.runners.suite import run_tests, write_told

    progress = LiveProgress(live=sys.stderr.isatty())
    config = load_config(obj.directory, obj.config)
    check_junitxml()
    if candidate is not None:
        from promote.config.workspace import require_checked_out
        from promote.core.git import Repo

        require_checked_out(Repo(config.root), candidate)
    run_id, started = new_run_id(), datetime.now(timezone.utc).isoformat(timespec="microseconds")
    with hold_lock(config.root):
        # Read before the tests start: the commit they run on, whatever is committed while they run.
        commit = head_commit(config)
        try:
            result = run_tests(
                config, package=package, on_progress=progress.update, run_id=run_id, on_step=progress.step
            )
        except KeyboardInterrupt:
            progress.close()
            record_interrupted_run(config, run_id, started, command_line(), commit)
            raise
    progress.close()
    # A test no station can run may still run in CI: the workflows say where.
    result = surveyed(config, result)
    try:
        result = blamed_elsewhere(config, result)
        result = record_test_run(config, result, command_line(), commit)
    except HistoryError as e:
        # The run happened and its results stand: a history that cannot take it (another process holding the
        # database, a full disk) is said, and neither the report nor the exit code depends on it.
        print(f"promote: warning: history not recorded: {one_line(str(e))}", file=sys.stderr, flush=True)
    emit(result.to_json(), run_report(result), as_json=as_json)
    if result.unstored is not None:
        raise StateError(f"the run's records were not stored: {result.unstored}")
    if result.told or result.red_streaks:
        write_told(result)
    # After the report: a JUnit file that cannot be written (a full disk) takes nothing from what the run found.
    write_junitxml(result)
    sys.exit(EXIT_OK if result.green else EXIT_BLOCKED)


@click.command("bisect")
@click.argument("test_id")
@click.option("--package", "package", metavar="NAME", default=None, help="The package the test belongs to.")
@json_option
@click.pass_obj
def bisect_command(obj: Context, test_id: str, package: str | None, as_json: bool) -> None:
    """Find which earlier test makes TEST_ID fail: rerun it alone, then bisect what ran before it."""
    from promote.runners.causes.investigate import bisect_by_hand
    from promote.runners.stored_runs import last_run_dir
    from promote.runners.suite import select

    config = load_config_of(obj)
    chosen = select(config, package)
    if len(chosen) > 1:
        names = ", ".join(p.name for p in chosen)
        raise UsageError(f"{test_id}: which package? pass --package NAME (packages: {names})")
    pkg = chosen[0]
    progress = LiveProgress(live=sys.stderr.isatty())
    last_run = last_run_dir(config, pkg.name)
    verdict, finding, invocations = bisect_by_hand(config, pkg, test_id, last_run=last_run, on_step=progress.step)
    progress.close()
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
    emit(data, bisect_text(test_id, verdict, invocations), as_json=as_json)
    sys.exit(BISECT_EXIT[verdict.kind])


def bisect_text(test_id: str, verdict: Verdict, invocations: int) -> str:
    """One line, and below it one line per polluter when there are more than three."""
    named = list(verdict.polluters)
    if len(named) > 3:
        cause = f": caused by {'each of these' if verdict.each else 'these, together,'} {len(named)} tests"
    elif len(named) > 1:
        cause = f": caused by {'each of' if verdict.each else 'together:'} {', '.join(named)}"
    else:
        cause = f": caused by {named[0]}" if named else ""
    detail = f" ({verdict.detail})" if verdict.detail else ""
    text = f"{test_id}: {verdict.kind}{cause}{detail}; {verdict.reruns} reruns, {invocations} pytest runs"
    from promote.cli.terminal import joined

    return joined([text, *(f"  {p}" for p in named)] if len(named) > 3 else [text])


@click.command("stations")
@json_option
@click.pass_obj
def stations_command(obj: Context, as_json: bool) -> None:
    """Show the stations tests may run on: this one as detected, and the configured ones."""
    from promote.cli.render import inventory_report
    from promote.runners.stations import inventory

    fleet = inventory(load_config_of(obj))
    emit(fleet.to_json(), inventory_report(fleet), as_json=as_json)
