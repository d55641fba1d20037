"""Text from repositories and tests reaches terminals and pages inert: no raw control characters, no secrets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from promote.core.redact import Redactor, clean, printable, redact, secret_name
from tests.helpers.cli import run
from tests.helpers.gitrepos import Fleet, commit, git, make_fleet
from tests.helpers.packages import write_package

TITLE = "\x1b]0;pwned\x07"
CLEAR = "\x1b[2J"
RAW = ("\x1b", "\x07", "\x9b")


def hostile_mirror(tmp_path: Path) -> Fleet:
    fleet = make_fleet(tmp_path, names=("origin", "mini"))
    other = fleet.clone_of("mini", "other")
    git(other, "commit", "-q", "--allow-empty", "-m", f"fix {TITLE}title{CLEAR}cleared \x9bC1")
    git(other, "push", "-q", "origin", "main")
    return fleet


def assert_inert(text: str) -> None:
    assert not any(c in text for c in RAW), repr(text)


def test_a_commit_subject_with_escapes_reaches_check_and_the_pages_inert(tmp_path: Path) -> None:
    fleet = hostile_mirror(tmp_path)
    result = run(fleet.work, "check")
    assert result.exit_code == 1, result.output
    assert_inert(result.stdout)
    assert "would lose" in result.stdout and "fix \\x1b]0;pwned\\x07title\\x1b[2Jcleared \\x9bC1" in result.stdout

    audit = run(fleet.work, "audit", "--json")
    pages = json.loads(audit.stdout)["pages"]
    for kind in ("md", "html", "json"):
        text = Path(pages[kind]).read_text(encoding="utf-8")
        assert_inert(text)
        assert "pwned" in text, kind


def test_printable_shows_controls_but_keeps_newlines_and_tabs() -> None:
    assert printable("a\x1b[2Jb\tc\nd\x7f\x85\r") == "a\\x1b[2Jb\tc\nd\\x7f\\x85\\x0d"
    assert printable("plain") == "plain"


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("DB_PASS", True), ("GITHUB_PAT", True), ("HF_TOKEN", True), ("AWS_SECRET_ACCESS_KEY", True),
        ("OPENAI_API_KEY", True), ("SESSION_COOKIE", True), ("DBPASSWORD", True), ("MY_CREDENTIALS", True),
        ("PATH", False), ("PWD", False), ("OLDPWD", False), ("PYTHONPATH", False), ("TOKENIZERS_PARALLELISM", False),
        ("MONKEY", False), ("SSH_AUTH_SOCK", False), ("XDG_SESSION_TYPE", False), ("HOME", False),
    ],
)  # fmt: skip
def test_secret_names_are_whole_words_of_the_name(name: str, secret: bool) -> None:
    assert secret_name(name) is secret


def test_token_shapes_values_and_url_credentials_are_redacted() -> None:
    tokens = [
        "ghp_" + "A1" * 18, "github_pat_11AB" + "c" * 30, "hf_" + "x" * 34, "sk-proj-" + "y" * 40,
        "AKIAIOSFODNN7EXAMPLE", "xoxb-1234567890-abcdefghij", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.abcdefghijklmn",
    ]  # fmt: skip
    text = " ".join(tokens) + " https://user:pw@host/x hunter22-secret hf_hub_download task-" + "z" * 30
    out = redact(text, values=["hunter22-secret", "abc"])
    assert not any(t in out for t in tokens)
    assert "https://***@host/x" in out and "hunter22-secret" not in out
    assert out.endswith("hf_hub_download task-" + "z" * 30)
    # Too short or too common to redact by value: it would hide every occurrence of a word.
    assert Redactor(["abc", "true", "None"])("abc true None") == "abc true None"
    assert clean("hunter22-secret\x1b") == "hunter22-secret\\x1b"


PAT = "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz"
LEAKY = {
    "test_leaky.py": f"""
        import os

        def test_leaks_a_token():
            os.environ["GITHUB_PAT"] = "{PAT}"

        def test_prints_the_package_secret():
            assert os.environ["DB_PASS"] == "something else"

        def test_prints_the_parent_secret():
            assert os.environ["MY_SERVICE_TOKEN"] == "x", os.environ["GITHUB_PAT"]
    """,
}


def test_secrets_appear_in_no_output_file_page_or_history(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_SERVICE_TOKEN", "parent-token-value-42")
    fleet = make_fleet(tmp_path, names=("origin",))
    write_package(fleet.work, "pkg", LEAKY)
    fleet.config(
        '[[promote.packages]]\nname = "pkg"\npath = "pkg"\nleaks = "report"\nenv = { DB_PASS = "hunter22-secret" }\n'
    )
    commit(fleet.work, "package")
    git(fleet.work, "push", "-q", "origin", "main")
    secrets = ("hunter22-secret", PAT, "parent-token-value-42")

    tested = run(fleet.work, "test")
    audited = run(fleet.work, "audit", "--json")
    assert tested.exit_code == 1 and audited.exit_code == 1, tested.output + audited.output
    report = json.loads(audited.stdout)
    assert any(f["check"] == "leaked-state" and "GITHUB_PAT" in f["message"] for f in report["findings"])

    outputs = [tested.stdout, tested.stderr, audited.stdout, audited.stderr]
    # pytest.log is pytest's own terminal output, kept raw as the package printed it.
    files = [p for p in (fleet.work / ".promote").rglob("*") if p.is_file() and p.suffix != ".log"]
    assert any(p.name == "run.json" for p in files) and any(p.name.startswith("results-") for p in files)
    assert any(p.name == "junit.xml" for p in files) and any(p.name == "evidence.html" for p in files)
    assert any(p.name.startswith("history.sqlite") for p in files)
    for secret in secrets:
        assert not any(secret in text for text in outputs), secret
        for path in files:
            assert secret.encode() not in path.read_bytes(), (secret, path)
    assert "***" in tested.stdout
