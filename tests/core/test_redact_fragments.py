"""A secret cut short by pytest's truncated repr or by a diff is still that secret: its fragments are hidden."""

from __future__ import annotations

from pathlib import Path

from promote.core.redact import Redactor, redact
from tests.helpers.cli import run
from tests.helpers.gitrepos import commit, make_fleet
from tests.helpers.packages import write_package

LONG = "".join(f"{i:03d}Qz" for i in range(60))  # 300 characters, no token shape
MIN_FRAGMENT_CHARS = 8  # the rule docs/faults.md states (promote.core.redact.MIN_FRAGMENT_CHARS)
PASSWORD = "hunter22-correct-horse-battery"
SUITE = {
    "tests/test_cut.py": """
import os

def test_long_token_repr_is_truncated():
    assert os.environ["API_TOKEN"] == "nope"

def test_password_diff_shows_its_tail():
    assert os.environ["DB_PASSWORD"] == "hunter22-correct-horse-staple"
""",
}


def test_a_token_shape_cut_by_a_repr_is_hidden_whole() -> None:
    assert redact("got 'ghp_A1b2C3d4...2M3n4O5p6Q7r8' here") == "got '***' here"
    assert redact("hf_abcd...wxyz and sk-proj...") == "*** and ***"


def test_fragments_of_known_values_from_either_end_are_hidden_but_not_short_runs() -> None:
    r = Redactor([PASSWORD])
    assert r(f"'{PASSWORD[:12]}...{PASSWORD[-9:]}'") == "'***...***'"
    assert r(PASSWORD[-MIN_FRAGMENT_CHARS:]) == "***"
    assert r(PASSWORD[: MIN_FRAGMENT_CHARS - 1] + " hunter") == PASSWORD[: MIN_FRAGMENT_CHARS - 1] + " hunter"


def test_a_truncated_repr_and_a_diff_leave_no_fragment_in_results_progress_or_junit(tmp_path: Path) -> None:
    fleet = make_fleet(tmp_path, names=("origin",))
    write_package(fleet.work, "pkg", SUITE)
    fleet.config(
        '[[promote.packages]]\nname = "pkg"\npath = "pkg"\n'
        f'env = {{ API_TOKEN = "{LONG}", DB_PASSWORD = "{PASSWORD}" }}\n'
    )
    commit(fleet.work, "package")

    tested = run(fleet.work, "test")

    assert tested.exit_code == 1, tested.output
    log = "".join(p.read_text() for p in (fleet.work / ".promote").rglob("pytest*.log"))
    assert LONG[:40] in log and PASSWORD[-MIN_FRAGMENT_CHARS:] in log, "pytest itself must have shown both"
    files = [p for p in (fleet.work / ".promote").rglob("*") if p.is_file() and p.suffix != ".log"]
    for kind in ("results-", "progress-", "junit.xml"):
        assert any(p.name.startswith(kind) for p in files), kind
    fragments = (LONG[:MIN_FRAGMENT_CHARS], LONG[-MIN_FRAGMENT_CHARS:], PASSWORD[-MIN_FRAGMENT_CHARS:], "horse-battery")
    for text in (tested.stdout, tested.stderr, *(p.read_text(errors="replace") for p in files)):
        assert not any(f in text for f in fragments), text[:2000]
