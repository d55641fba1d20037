"""The terminal: colour (never for NO_COLOR or a pipe), -q and -v, --help, the live line during reruns."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
from pathlib import Path
from typing import get_args

import click
import pytest

from promote.cli import cli
from promote.cli.render import table
from promote.cli.terminal import (
    AUDIT_TONES,
    CHECK_TONES,
    EXIT_HELP,
    GATE_TONES,
    MERGE_TONES,
    MIRROR_TONES,
    QUALITY_TONES,
    SEVERITY_TONES,
    STORY_TONES,
    STYLES,
    Tone,
    mark,
    plain,
    shown,
)
from promote.core.vocab import CheckVerdict, MergeVerdict, MirrorState, QualityVerdict, Severity, Status, StoryKind
from tests.helpers.ciclone import team_repository
from tests.helpers.cli import run
from tests.helpers.gitrepos import commit, git, make_fleet
from tests.helpers.packages import write_config, write_package

ESC = "\x1b["
RED, BOLD_RED, GREEN, YELLOW, END = f"{ESC}31m", f"{ESC}31m{ESC}1m", f"{ESC}32m", f"{ESC}33m", f"{ESC}0m"
SGR = re.compile(r"\x1b\[[0-9;]*m")


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


def test_every_value_of_each_vocabulary_has_a_tone_and_every_tone_a_style() -> None:
    tables: list[tuple[dict[str, Tone], object]] = [
        (dict(SEVERITY_TONES), Severity),
        (dict(AUDIT_TONES), Status),
        (dict(GATE_TONES), Status),
        (dict(CHECK_TONES), CheckVerdict),
        (dict(MERGE_TONES), MergeVerdict),
        (dict(MIRROR_TONES), MirrorState),
        (dict(QUALITY_TONES), QualityVerdict),
        (dict(STORY_TONES), StoryKind),
    ]
    for tones, vocabulary in tables:
        assert sorted(tones) == sorted(get_args(vocabulary)), vocabulary
    assert sorted(STYLES) == sorted(get_args(Tone))


def test_a_mark_pads_outside_itself_and_a_table_measures_cells_without_marks() -> None:
    for severity, tone in SEVERITY_TONES.items():
        assert plain(mark(severity, tone, width=7)) == f"{severity:<7}"
    rows = [["origin", mark("up-to-date", "good"), "x"], ["mini", mark("fast-forward", "caution"), "y"]]
    assert [plain(line) for line in table(["MIRROR", "STATUS", ""], rows)] == [
        "MIRROR  STATUS",
        "origin  up-to-date    x",
        "mini    fast-forward  y",
    ]


# What a commit subject or a test's output may hold: promote's own words, escape sequences, and a NUL-framed
# imitation of a mark (it cannot know this process's key).
FORGED = "\x00" + "0" * 16 + "good\x00pass\x00" + "0" * 16 + "\x00"
HOSTILE = f"error pass up-to-date \x1b[32mgreen\x1b[0m {FORGED}"
HOSTILE_SHOWN = (
    "error pass up-to-date \\x1b[32mgreen\\x1b[0m "
    + "\\x00" + "0" * 16 + "good\\x00pass\\x00" + "0" * 16 + "\\x00"
)  # fmt: skip


def test_only_marked_words_are_coloured_and_untrusted_text_is_shown_escaped() -> None:
    text = f"  {mark('error', 'alarm', width=7)} leaked-state  {HOSTILE}\nverdict: {mark('promotable', 'good')}"
    assert shown(text, colour=True) == (
        f"  {BOLD_RED}error{END}   leaked-state  {HOSTILE_SHOWN}\nverdict: {GREEN}promotable{END}"
    )
    assert shown(text, colour=False) == f"  error   leaked-state  {HOSTILE_SHOWN}\nverdict: promotable"


def test_a_secret_across_a_marks_edge_is_redacted_and_then_nothing_is_coloured(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEPLOY_TOKEN", "error   leaked")
    text = f"  {mark('error', 'alarm', width=7)} leaked-state  x"
    assert shown(text, colour=True) == shown(text, colour=False) == "  ***-state  x"


def test_mirror_statuses_a_severity_and_the_verdict_are_coloured_but_a_commit_subject_is_not(tmp_path: Path) -> None:
    fleet = make_fleet(tmp_path)
    other = fleet.clone_of("station", "bob")
    lost = commit(other, HOSTILE.replace("\x00", ""), {"hotfix.txt": "hotfix\n"})  # git keeps no NUL in a message
    git(other, "push", "-q", "origin", "main")
    git(fleet.mirrors["laptop"], "update-ref", "-d", "refs/heads/main")
    deployed = git(fleet.work, "rev-parse", "HEAD")
    git(fleet.work, "branch", "deployed")
    commit(fleet.work, "feature", {"src/app.py": "x = 1\n"})
    fleet.config('deployed = "deployed"\n')
    git(fleet.work, "commit", "-qam", "serve the deployed branch")
    candidate = git(fleet.work, "rev-parse", "HEAD")
    first, subject = fleet.head("origin") or "", HOSTILE_SHOWN.replace("\\x00", "")

    coloured = on_a_terminal(fleet.work, "check").replace("\r\n", "\n")

    assert f"station  {RED}diverged{END}      {lost[:7]}" in coloured
    assert f"origin   {YELLOW}fast-forward{END}  " in coloured
    assert f"laptop   {RED}missing{END}       -" in coloured
    assert f"\n  {BOLD_RED}error{END}   mirror-diverged  station: " in coloured
    assert f"\n  {YELLOW}warning{END} undeployed-change  deployed: " in coloured
    assert coloured.endswith(f"\nverdict: {BOLD_RED}blocked{END}\n")
    assert f"\n  station would lose {lost[:7]} {subject} (Ada Author <ada@example.com>)\n" in coloured
    # Without a terminal the text is what promote printed before colour was marked (main at 2f890d4 printed
    # this, byte for byte, for this input); on one, colour only adds escape sequences to it.
    piped = subprocess.run([sys.executable, "-m", "promote", "check"], cwd=fleet.work, capture_output=True, text=True)
    lose = f"{lost[:7]} {subject} (Ada Author <ada@example.com>)"
    assert piped.stdout == "\n".join(
        [
            f"candidate {candidate[:7]} (main) for main",
            "",
            "MIRROR   STATUS        HEAD     BEHIND  DISCARD",
            f"origin   fast-forward  {first[:7]}  3       0",
            f"mini     fast-forward  {first[:7]}  3       0",
            f"station  diverged      {lost[:7]}  3       1",
            "laptop   missing       -        -       -        no branch main on laptop",
            f"  station would lose {lose}",
            "",
            f"deployed: deployed ({deployed[:7]}, served since 2026-01-01T00:00:00+00:00): 2 commit(s) not deployed, "
            "2 file(s) differ, including non-test files",
            "",
            "findings:",
            "  error   mirror-diverged  station: station/main has 1 commit(s) the candidate lacks; a push would "
            f"discard: {lose}",
            "  error   mirror-missing  laptop: laptop has no branch main",
            "  warning undeployed-change  deployed: 2 commit(s) not deployed on deployed; they change non-test "
            "files: promote.toml, src/app.py",
            "",
            "verdict: blocked",
            "",
        ]
    )
    assert SGR.sub("", coloured) == piped.stdout
    # A refused merge prints the same report, then its own verdict, coloured as the check's.
    merge = on_a_terminal(fleet.work, "merge").replace("\r\n", "\n")
    assert merge.startswith(coloured) and f"\n{BOLD_RED}blocked{END}: nothing pushed\n" in merge


# Test names made of promote's own words: the old colouring by pattern coloured a line by what it looked like.
NAMED_LIKE_VERDICTS = {
    "tests/test_a_pass.py": "import os\n\ndef test_error_pass():\n    os.environ['DRAIN'] = '1'\n",
    "tests/test_b_error.py": "import os\n\ndef test_pass_error():\n    assert 'DRAIN' not in os.environ\n",
}


def test_the_closing_line_and_a_severity_are_coloured_but_test_names_are_not(tmp_path: Path) -> None:
    write_package(tmp_path, "error", NAMED_LIKE_VERDICTS)
    write_config(tmp_path, [{"name": "error", "path": "error", "leaks": "report"}])
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)

    coloured = on_a_terminal(tmp_path, "-q", "test").replace("\r\n", "\n")
    lines = coloured.splitlines()

    assert lines[-1] == f"{RED}not green{END}"
    severities = [ln for ln in lines if ln.startswith("  " + BOLD_RED)]
    assert severities and all(ln.startswith(f"  {BOLD_RED}error{END}   ") for ln in severities), lines
    # Everything else is as a pipe shows it: the package named `error`, the tests named after verdicts.
    rest = [ln for ln in lines[:-1] if ln not in severities]
    assert "  error: tests/test_b_error.py::test_pass_error (failed)" in rest and not any(ESC in ln for ln in rest)
    assert re.fullmatch(r"error    1       1       0       0        0        0        \d+\.\ds  local \(.+\)", rest[3])
    # Piped, the same text without the escape sequences (but for the run's id and times).
    piped = subprocess.run(
        [sys.executable, "-m", "promote", "-q", "test"], cwd=tmp_path, capture_output=True, text=True
    )
    assert ESC not in piped.stdout and piped.stdout.endswith("\nnot green\n")
    assert varying(piped.stdout) == varying(SGR.sub("", coloured))


def varying(report: str) -> str:
    """A run's report with what differs from run to run (its id, the times) blanked."""
    return re.sub(r"\d+\.\ds\b", "T", re.sub(r"\d{8}T\d{6}\.\d+Z-[0-9a-f]+", "ID", report))


@pytest.mark.slow
def test_the_audit_headline_and_each_gates_status_are_coloured(tmp_path: Path) -> None:
    fleet = team_repository(tmp_path)
    # A test that fails under a name of promote's own words, and no word of what production serves.
    red = "def test_pass():\n    assert 'PASS' == 'FAIL'\n"
    config = (fleet.work / "promote.toml").read_text().replace('deployed = "deployed"\n', "")
    commit(
        fleet.work,
        "a red test; production unknown",
        {"packages/proxy/tests/test_proxy.py": red, "promote.toml": config},
    )
    for mirror in fleet.mirrors:
        git(fleet.work, "push", "-q", mirror, "main")

    lines = on_a_terminal(fleet.work, "-q", "audit").replace("\r\n", "\n").splitlines()

    assert re.fullmatch(rf"audit \S+: {re.escape(RED)}fail{re.escape(END)}", lines[0]), lines[0]
    assert f"{BOLD_RED}FAIL{END}      Everything E2E Tested" in lines
    assert f"{GREEN}PASS{END}      in Docs" in lines and f"{GREEN}PASS{END}      Merged" in lines
    assert f"{YELLOW}UNDECIDED{END} And Deployed" in lines
    # The headline and the four gates; nothing else of the audit (its evidence, the pages) is coloured.
    assert sum(ESC in ln for ln in lines) == 5 + sum(ln.startswith(f"  {ESC}") for ln in lines), lines


# An import error whose message carries OSC 52 (clipboard), OSC 0 (title) and CSI sequences.
HOSTILE_IMPORT = "raise ImportError('\\x1b]52;c;cHduZWQ=\\x07 \\x1b]0;owned\\x07 \\x1b[2J gone')\n"


def test_github_annotations_show_control_characters_as_escapes_on_a_terminal(tmp_path: Path) -> None:
    files = {"tests/test_hostile.py": HOSTILE_IMPORT, "tests/test_ok.py": "def test_ok(): pass\n"}
    write_package(tmp_path, "pkg", files)
    write_config(tmp_path, [{"name": "pkg", "path": "pkg"}])
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    shown = on_a_terminal(tmp_path, "test", NO_COLOR="1", GITHUB_ACTIONS="true")
    annotations = [line for line in shown.splitlines() if line.startswith("::")]
    assert annotations and any("\\x1b]52;c;" in line for line in annotations), shown
    for line in annotations:
        assert "\x1b" not in line and "\x07" not in line, line
