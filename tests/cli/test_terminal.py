"""The terminal: colour (never for NO_COLOR or a pipe), -q and -v, --help, the live line during reruns."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

import click

from promote.cli import cli
from promote.cli.terminal import EXIT_HELP
from tests.helpers.cli import run
from tests.helpers.gitrepos import make_fleet
from tests.helpers.packages import write_config, write_package

ESC = "\x1b["


def on_a_terminal(cwd: Path, *args: str, **env: str) -> str:
    """What `promote ARGS` prints with stdout and stderr on a pseudo-terminal."""
    primary, secondary = pty.openpty()
    environment = {k: v for k, v in os.environ.items() if k != "NO_COLOR"} | env
    with subprocess.Popen(
        [sys.executable, "-m", "promote", *args], cwd=cwd, stdout=secondary, stderr=secondary, env=environment
    ) as proc:
        os.close(secondary)
        chunks = []
        while True:
            try:
                chunk = os.read(primary, 4096)
            except OSError:  # the other end closed: the process is done
                break
            if not chunk:
                break
            chunks.append(chunk)
        proc.wait(timeout=60)
    os.close(primary)
    return b"".join(chunks).decode()


def test_verdicts_are_coloured_on_a_terminal_but_not_for_no_color_or_a_pipe(tmp_path: Path) -> None:
    fleet = make_fleet(tmp_path)
    coloured = on_a_terminal(fleet.work, "check")
    assert f"verdict: {ESC}32mpromotable{ESC}0m" in coloured
    assert f"{ESC}32mup-to-date{ESC}0m" in coloured or f"{ESC}33mfast-forward{ESC}0m" in coloured
    assert ESC not in on_a_terminal(fleet.work, "check", NO_COLOR="1")
    piped = subprocess.run([sys.executable, "-m", "promote", "check"], cwd=fleet.work, capture_output=True, text=True)
    assert "verdict: promotable" in piped.stdout and ESC not in piped.stdout


def test_help_shows_every_summary_whole_the_exit_codes_and_an_example() -> None:
    text = " ".join(run(Path("."), "--help").stdout.split())
    ctx = click.Context(cli)
    for name in cli.list_commands(ctx):
        command = cli.get_command(ctx, name)
        assert command is not None, name
        summary = " ".join((command.help or "").split("\n\n")[0].split())
        assert f"{name} {summary}" in text, name
    assert "Exit codes: 0 ok" in text and "_PROMOTE_COMPLETE=bash_source promote" in text
    for name, codes in EXIT_HELP.items():
        own = " ".join(run(Path("."), name, "--help").stdout.split())
        assert f"Exit codes: {codes}" in own and "Example: promote " in own, name


POLLUTED = {
    "tests/test_a_drain.py": "import os\n\ndef test_drain():\n    os.environ['DRAIN'] = '1'\n",
    "tests/test_b_route.py": "import os\n\ndef test_route():\n    assert 'DRAIN' not in os.environ\n",
}


def test_quiet_says_nothing_while_running_and_verbose_shows_each_rerun(tmp_path: Path) -> None:
    write_package(tmp_path, "pkg", POLLUTED)
    write_config(tmp_path, [{"name": "pkg", "path": "pkg", "leaks": "report"}])
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)

    quiet = run(tmp_path, "-q", "test")
    assert quiet.exit_code == 1 and quiet.stderr == ""
    assert "order-dependent" in quiet.stdout

    verbose = run(tmp_path, "-v", "test")
    lines = verbose.stderr.splitlines()
    assert "rerunning failed tests alone 1/1: tests/test_b_route.py::test_route" in lines
    assert any(ln.startswith("bisecting tests/test_b_route.py::test_route: rerun 1/~") for ln in lines), lines

    assert run(tmp_path, "-q", "-v", "test").exit_code == 2


def test_the_live_line_names_the_rerun_on_a_terminal(tmp_path: Path) -> None:
    write_package(tmp_path, "pkg", POLLUTED)
    write_config(tmp_path, [{"name": "pkg", "path": "pkg", "leaks": "report"}])
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    shown = on_a_terminal(tmp_path, "test", NO_COLOR="1")
    assert "\r\x1b[2Kbisecting tests/test_b_route.py::test_route: rerun " in shown
