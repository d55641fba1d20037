"""`promote init`, `check` and `merge`: the release commands."""

from __future__ import annotations

import sys

import click

from promote.cli.app import Context, candidate_option, emit, hold_lock, json_option
from promote.cli.ci_formats import format_option
from promote.core.errors import EXIT_BLOCKED, EXIT_OK, EXIT_PARTIAL, EXIT_UNDECIDED
from promote.core.vocab import CheckVerdict, MergeVerdict

# Verdicts to exit codes, the contract in one table.
EXIT_BY_VERDICT: dict[CheckVerdict | MergeVerdict, int] = {
    "promotable": EXIT_OK,
    "merged": EXIT_OK,
    "would-merge": EXIT_OK,
    "blocked": EXIT_BLOCKED,
    "undecided": EXIT_UNDECIDED,
    "partial": EXIT_PARTIAL,
}


@click.command()
@click.option("--overwrite", is_flag=True, help="Replace an existing promote.toml.")
@click.pass_obj
def init(obj: Context, overwrite: bool) -> None:
    """Write a starter promote.toml from this repository's remotes and branches, proposing its test packages."""
    from promote.config.starter import init as write_starter
    from promote.evidence.proposal import propose
    from promote.runners.environments import LOOKED_IN

    written = write_starter(obj.directory, overwrite=overwrite, propose=propose)
    click.echo(f"wrote {written.path}")
    for p in written.proposed:
        if p.python is None:
            # Counted by an interpreter that may not import the project: a low count may be that, not the tests.
            click.echo(
                f"promote: {p.name}: no environment of its own found ({', '.join(LOOKED_IN)}), so its tests were "
                f"counted by promote's own Python ({p.counted_by}): {p.count} collected, {p.failed} test module(s) "
                f'failed to import; set python = "..." in its [[promote.packages]] table',
                err=True,
            )


@click.command()
@candidate_option
@json_option
@format_option
@click.pass_obj
def check(obj: Context, candidate: str | None, as_json: bool) -> None:
    """Read-only verdict: can trunk be fast-forwarded to the candidate on every mirror?"""
    from promote.cli.render import check_report
    from promote.release.check import check as run_check

    result = run_check(obj.workspace(), candidate)
    emit(result.to_json(), check_report(result), as_json=as_json)
    sys.exit(EXIT_BY_VERDICT[result.verdict])


@click.command()
@candidate_option
@click.option("--dry-run", is_flag=True, help="Verify and say what would be pushed; push nothing.")
@json_option
@click.pass_obj
def merge(obj: Context, candidate: str | None, dry_run: bool, as_json: bool) -> None:
    """Verify afresh, then fast-forward trunk on every mirror (never forced)."""
    from promote.cli.render import merge_report
    from promote.release.merge import merge as run_merge

    ws = obj.workspace()
    with hold_lock(ws.config.root):
        result = run_merge(ws, candidate, dry_run=dry_run)
    for note in result.notes:
        click.echo(f"promote: {note}", err=True)
    emit(result.to_json(), merge_report(result), as_json=as_json)
    sys.exit(EXIT_BY_VERDICT[result.verdict])
