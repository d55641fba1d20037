"""Untrusted text cannot forge a line: under GitHub Actions, a skip reason or a test id read from a published page
that carries a newline and `::error ...` (or `::add-mask::`) is shown on promote's own line, escaped, never as a
workflow command of its own; only promote's annotations begin with `::`."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from promote.cli.terminal import joined, mark, shown
from promote.core.redact import inert_lines, one_line
from tests.cli.test_terminal import on_a_terminal
from tests.evidence.test_docs_history_robust import page, publish, work  # noqa: F401 (a fixture)
from tests.helpers.gitrepos import commit, git
from tests.helpers.packages import write_config, write_package

FORGED = "\n::error file=promote.toml,line=1::forged\r\n::add-mask::hunter2\n  ::warning::indented"
# promote's own annotations: a kind, promote's properties, then the message (promote/cli/annotations.py).
OWN = re.compile(r"::(error|warning|notice) (file=[^,:]+,)?(line=\d+,)?title=promote [a-z-]+::")
SKIPPING = f"""
import pytest

def test_skipped():
    pytest.skip({"upstream is down" + FORGED!r})

@pytest.mark.skip(reason={"later" + FORGED!r})
def test_marked():
    pass

def test_ok():
    pass
"""


def promote(cwd: Path, *args: str) -> tuple[int, list[str]]:
    """`promote ARGS` as a CI job runs it (GITHUB_ACTIONS=true, output to a pipe): its exit code and every line."""
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"} | {"GITHUB_ACTIONS": "true"}
    done = subprocess.run(
        [sys.executable, "-m", "promote", *args], cwd=cwd, capture_output=True, text=True, env=env, timeout=300
    )
    # The runner splits a job's log at \n, \r and \r\n.
    return done.returncode, re.split(r"\r\n|\r|\n", done.stdout + done.stderr)


def skipping(root: Path) -> None:
    """A repository whose package skips two tests with forged reasons, run until they are `never-ran`."""
    write_package(root, "pkg", {"test_a.py": SKIPPING})
    config = write_config(root, [{"name": "pkg", "path": "pkg"}])
    config.write_text(config.read_text() + "\n[promote.history]\nwindow = 2\nnever_ran_after = 2\n")
    git(root, "init", "-q", "-b", "main")
    commit(root, "start", {})
    for _ in range(2):
        assert promote(root, "-q", "test")[0] == 0


def assert_no_forged_line(lines: list[str]) -> None:
    commands = [line for line in lines if line.lstrip().startswith("::")]
    assert all(OWN.match(line) for line in commands), commands
    assert not any(line.lstrip().startswith("::add-mask::") or "##[" in line for line in lines), lines


def test_a_skip_reason_cannot_forge_a_workflow_command_in_promote_test(tmp_path: Path) -> None:
    skipping(tmp_path)
    code, lines = promote(tmp_path, "test")
    assert code == 0, lines
    assert_no_forged_line(lines)
    # The reason is there, escaped on the finding's own line, and in promote's annotation (as GitHub encodes it).
    [finding] = [line for line in lines if line.startswith("  warning never-ran  test_a.py::test_skipped")]
    assert "upstream is down\\x0a::error file=promote.toml,line=1::forged\\x0d\\x0a::add-mask::hunter2" in finding
    assert any(line.startswith("::warning title=promote never-ran::test_a.py::test_skipped") for line in lines)
    code, lines = promote(tmp_path, "history", "--test", "test_a.py::test_skipped")
    assert code == 0 and len(lines) > 2, lines
    assert_no_forged_line(lines)


def test_a_published_page_cannot_forge_a_workflow_command_in_history_from_docs(work: Path) -> None:  # noqa: F811
    forged_id = "test_a.py::test_x" + FORGED
    tests = [["pkg", forged_id, "failed", "the reason" + FORGED, None, "flaky"]]
    publish(work, {"a.json": page("r1", "2026-08-01T00:00:00", tests), "b.json": page("r2", "2026-08-02T00:00:00", [])})
    for args in (("history", "--tests", "--from-docs"), ("history", "--test", forged_id, "--from-docs")):
        code, lines = promote(work, *args)
        assert code == 0, lines
        assert_no_forged_line(lines)
        assert any("test_a.py::test_x\\x0a::error file=promote.toml" in line for line in lines), lines


def test_on_a_terminal_with_colour_no_line_is_forged_either(tmp_path: Path) -> None:
    skipping(tmp_path)
    lines = on_a_terminal(tmp_path, "test", GITHUB_ACTIONS="true").replace("\r\n", "\n").split("\n")
    assert any("\x1b[" in line for line in lines), lines  # coloured: the marked path of `shown`
    assert_no_forged_line([re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", line) for line in lines])


@pytest.mark.parametrize("colour", [False, True])
def test_shown_lets_no_line_begin_a_workflow_command_however_the_report_was_joined(colour: bool) -> None:
    # A renderer that joined an untrusted piece without `joined`: the backstop still holds.
    text = "\n".join([f"{mark('error', 'alarm')} x: {'reason' + FORGED}", "::error::at the start of a line"])
    lines = shown(text, colour=colour).split("\n")
    assert_no_forged_line([re.sub(r"\x1b\[[0-9;]*m", "", line) for line in lines])
    assert shown("::error::first", colour=colour) == "\\x3a:error::first"


def test_one_line_and_joined_keep_each_line_to_one() -> None:
    assert one_line("a\nb\rc") == "a\\x0ab\\x0dc"
    assert joined(["one", "two\nthree"]) == "one\ntwo\\x0athree"
    assert inert_lines("promote's line\nits next line") == "promote's line\nits next line"
