"""Text from repositories and tests reaches terminals and pages inert: no raw control characters, no secrets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from promote.core.redact import Redactor, clean, current, environ_secrets, printable, redact, secret_name
from tests.helpers.cli import run, run_json
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


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://host/x.git?private_token=glpat-abc123", "http://host/x.git?private_token=***"),
        ("https://h/x.git?ref=main&access_token=zz99zz", "https://h/x.git?ref=main&access_token=***"),
        ("https://h/cb#access_token=abcd1234&state=xyz", "https://h/cb#access_token=***&state=xyz"),
        ("https://blob/c/x?sv=2020-08-04&sig=AbC%2Fdef%3D&se=2030", "https://blob/c/x?sv=2020-08-04&sig=***&se=2030"),
        (
            "https://s3/x?X-Amz-Credential=AK%2F1&X-Amz-Signature=dead",
            "https://s3/x?X-Amz-Credential=***&X-Amz-Signature=***",
        ),
        ("https://h/x?key=k3y&password=pw0rd&api_key=a1", "https://h/x?key=***&password=***&api_key=***"),
        ("https://h/x?page=2&sort=name#top", "https://h/x?page=2&sort=name#top"),
    ],
)
def test_secret_looking_parameters_of_a_url_query_or_fragment_are_hidden(url: str, shown: str) -> None:
    assert redact(f"fatal: unable to access '{url}': 403") == f"fatal: unable to access '{shown}': 403"
    assert Redactor().search(url) is (url != shown)


def test_a_secret_of_several_lines_is_hidden_line_by_line() -> None:
    key = PEM.strip()
    body = key.splitlines()[1:-1]
    shown_by_pytest = "\n".join(f"E     - {line}" for line in key.splitlines())
    out = Redactor([key + "\n"])(f"E   AssertionError: assert {key[:50]!r} == 'x'\n{shown_by_pytest}")
    assert not any(line in out for line in body)
    assert out.splitlines()[1:] == ["E     - ***"] * len(key.splitlines())
    # A line shorter than 4 characters would hide every occurrence of a common word: it stays.
    assert Redactor(["first-line\nab\n"])("ab first-line") == "ab ***"


PEM = """
-----BEGIN OPENSSH PRIVATE KEY-----
b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW
QyNTUxOQAAACDxq3QrGd1+hD4Kf9rX7Jc2mT0pVwYlS8nE6uBzA1oIqwAAAJhk0x3vZNMd
7wAAAAtzc2gtZWQyNTUxOQAAACDxq3QrGd1+hD4Kf9rX7Jc2mT0pVwYlS8nE6uBzA1oIqw
-----END OPENSSH PRIVATE KEY-----
"""

PEM_SUITE = {
    "test_key.py": """
        import os

        def test_the_deploy_key_is_the_expected_one():
            assert os.environ["DEPLOY_KEY_PEM"] == "not the key"
    """,
}


def test_a_pem_key_shown_by_a_failing_assert_is_in_no_output_file_or_page(tmp_path: Path) -> None:
    fleet = make_fleet(tmp_path, names=("origin",))
    write_package(fleet.work, "pkg", PEM_SUITE)
    # A TOML multi-line string: the key, line by line, as a deploy key is pasted into a config.
    fleet.config(
        f'[[promote.packages]]\nname = "pkg"\npath = "pkg"\n[promote.packages.env]\nDEPLOY_KEY_PEM = """{PEM}"""\n'
    )
    commit(fleet.work, "package")
    git(fleet.work, "push", "-q", "origin", "main")
    lines = PEM.strip().splitlines()

    tested = run(fleet.work, "test")
    audited = run(fleet.work, "audit", "--json")

    assert tested.exit_code == 1 and audited.exit_code == 1, tested.output + audited.output
    # The run's own log (a rerun's forked processes show no failure report of their own).
    log = next(p for p in (fleet.work / ".promote").rglob("pytest.log") if "reruns" not in p.parts).read_text()
    assert lines[1] in log, "pytest itself must have shown the key (its log is kept raw) for this test to mean anything"
    files = [p for p in (fleet.work / ".promote").rglob("*") if p.is_file() and p.suffix != ".log"]
    for kind in ("results-", "progress-", "junit.xml", "run.json", "evidence.md", "evidence.html", "history.sqlite"):
        assert any(p.name.startswith(kind) for p in files), kind
    for text in (tested.stdout, tested.stderr, audited.stdout, audited.stderr):
        assert not any(line in text for line in lines)
    for path in files:
        data = path.read_bytes()
        assert not any(line.encode() in data for line in lines), path
    assert "***" in (next((fleet.work / ".promote").rglob("junit.xml"))).read_text()


def test_a_token_in_a_mirror_urls_query_string_is_hidden_in_checks_table_findings_and_json(fleet: Fleet) -> None:
    token = "glpat-Q7mZ2xK9vR4tY8wL"
    # http mirrors nobody answers on (port 9): git names the URL in its complaint, promote in its report.
    (fleet.work / "promote.toml").write_text(
        '[promote]\ntrunk = "main"\nmirror_timeout_s = 10\n'
        f'[promote.mirrors]\norigin = "{fleet.mirrors["origin"]}"\nstation = "http://127.0.0.1:9/s.git?private_token={token}"\n'
        f'laptop = "https://127.0.0.1:9/s.git?ref=main#access_token={token}"\n'
    )
    commit(fleet.work, "feature")

    table = run(fleet.work, "check")
    code, report = run_json(fleet.work, "check")

    assert table.exit_code == code == 3, table.output
    assert token not in table.output and token not in json.dumps(report)
    mirrors = {m["name"]: m for m in report["mirrors"]}
    assert mirrors["station"]["url"] == "http://127.0.0.1:9/s.git?private_token=***"
    assert mirrors["laptop"]["url"] == "https://127.0.0.1:9/s.git?ref=main#access_token=***"
    assert {f["subject"] for f in report["findings"] if f["check"] == "mirror-unreachable"} == {"station", "laptop"}
    assert "private_token=***" in table.stdout


def test_the_current_redactor_follows_the_environment_as_it_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    # The plugin asks for it for every test id: it is cached, but never past a change to the environment.
    secret = "s3cr3t-value-set-by-a-test"
    monkeypatch.delenv("PROMOTE_TEST_TOKEN", raising=False)
    assert current()(f"id[{secret}]") == f"id[{secret}]"
    monkeypatch.setenv("PROMOTE_TEST_TOKEN", secret)
    assert current()(f"id[{secret}]") == "id[***]"
    monkeypatch.setenv("PROMOTE_TEST_TOKEN", "an-0ther-value-entirely")
    assert current()(f"id[{secret}]") == f"id[{secret}]"
    assert current()("id[an-0ther-value-entirely]") == "id[***]"


def test_a_package_env_word_stays_visible_where_a_credential_under_any_name_does_not() -> None:
    env = {
        "PROMOTE_PACKAGE_ENV_NAMES": "MODE,LICENSE_ID,MODEL_DIR",
        "MODE": "idle",
        "LICENSE_ID": "Zq3kP9xw2Lm8",
        "MODEL_DIR": "/models/target",
        "DB_PASSWORD": "hunterxyz",
    }
    assert environ_secrets(env) == {"Zq3kP9xw2Lm8", "hunterxyz"}
    # Masked wherever it appeared, a plain word garbled other words: acceleration-idle became acceleration-***.
    assert Redactor(environ_secrets(env))("acceleration-idle in MODE=idle") == "acceleration-idle in MODE=idle"
