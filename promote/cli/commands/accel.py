"""`promote accel` and `promote bench`: accelerated paths earn their promotion."""

from __future__ import annotations

import sys

import click

from promote.cli.app import Context, LiveProgress, command_line, emit, hold_lock, json_option, load_config_of

rounds_option = click.option(
    "--rounds", type=click.IntRange(1, 1000), default=None, help="A/B rounds (default: the configured number; >= 5)."
)


@click.command("accel")
@click.argument("name", required=False)
@click.option("--no-bench", is_flag=True, help="Skip the interleaved A/B (the switch and parity still run).")
@rounds_option
@json_option
@click.pass_obj
def accel_command(obj: Context, name: str | None, no_bench: bool, rounds: int | None, as_json: bool) -> None:
    """Check each accelerated path: kill switch both ways, numeric parity, interleaved A/B, validated OS builds."""
    from promote.accel.store import record
    from promote.accel.verify import run_accelerations
    from promote.cli.accel_report import accel_report
    from promote.core.redact import clean
    from promote.evidence.history import HistoryError
    from promote.evidence.store import head_commit, record_switch_runs

    config = load_config_of(obj)
    progress = LiveProgress(live=sys.stderr.isatty())
    say = None if as_json else (lambda line: click.echo(f"  {line}", err=True))
    with hold_lock(config.root):
        commit = head_commit(config)
        report = run_accelerations(
            config, name, bench=not no_bench, rounds=rounds, on_progress=progress.update, say=say
        )
    progress.close()
    record(config, report, kind="accel")
    try:
        # The switch's test runs print their ids: `promote history ID` shows each one.
        record_switch_runs(config, report, command_line(), commit)
    except HistoryError as e:
        click.echo(f"promote: warning: history not recorded: {clean(str(e))}", err=True)
    emit(report.to_json(), accel_report(report), as_json=as_json)
    sys.exit(report.exit_code)


@click.command("bench")
@click.argument("name")
@click.option("--baseline-ref", metavar="REF", default=None, help="Run the baseline from a git worktree of REF.")
@rounds_option
@json_option
@click.pass_obj
def bench_command(obj: Context, name: str, baseline_ref: str | None, rounds: int | None, as_json: bool) -> None:
    """Time one accelerated path's A/B, arms interleaved (only the bench: no switch or parity runs)."""
    from promote.accel.store import record
    from promote.accel.verify import AccelReport, bench_only
    from promote.cli.accel_report import accel_report

    config = load_config_of(obj)
    say = None if as_json else (lambda line: click.echo(f"  {line}", err=True))
    with hold_lock(config.root):
        result = bench_only(config, name, baseline_ref=baseline_ref, rounds=rounds, say=say)
    report = AccelReport((result,))
    record(config, report, kind="bench")
    emit(report.to_json(), accel_report(report), as_json=as_json)
    sys.exit(report.exit_code)
