"""Test ids that carry a secret: redacted in the progress logs as in the records, and still one id per test."""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers.cli import run
from tests.helpers.gitrepos import commit, make_fleet
from tests.helpers.packages import write_package

TOKENS = ("ghp_" + "A1b2C3d4E5" * 3 + "F6G7H8", "ghp_" + "Z9y8X7w6V5" * 3 + "U4t3S2")
HF = "hf_" + "q" * 34
ENV_SECRET = "correct-horse-battery"
SUITE = {
    "tests/test_ids.py": f"""
import pytest

@pytest.mark.parametrize("token", {list(TOKENS)!r})
def test_scrubbed(token):
    assert token.startswith("ghp_")

@pytest.mark.parametrize("value", [{HF!r}, {ENV_SECRET!r}])
def test_carries(value):
    assert value
""",
}


def test_ids_holding_secrets_are_redacted_everywhere_and_stay_distinct(tmp_path: Path) -> None:
    fleet = make_fleet(tmp_path, names=("origin",))
    write_package(fleet.work, "pkg", SUITE)
    fleet.config(
        f'[[promote.packages]]\nname = "pkg"\npath = "pkg"\nworkers = 2\nenv = {{ DB_PASSWORD = "{ENV_SECRET}" }}\n'
    )
    commit(fleet.work, "package")

    tested = run(fleet.work, "test", "--json")

    assert tested.exit_code == 0, tested.output
    [package] = json.loads(tested.stdout)["packages"]
    assert package["passed"] == 4 and package["failed"] == 0
    files = [p for p in (fleet.work / ".promote").rglob("*") if p.is_file() and p.suffix != ".log"]
    progress = [p for p in files if p.name.startswith("progress-gw")]
    assert progress, files
    for secret in (*TOKENS, HF, ENV_SECRET):
        for path in files:
            assert secret.encode() not in path.read_bytes(), (secret, path)
    started = {
        json.loads(line)["nodeid"]
        for path in progress
        for line in path.read_text().splitlines()
        if '"event":"start"' in line
    }
    assert started == {
        "tests/test_ids.py::test_scrubbed[***1]",
        "tests/test_ids.py::test_scrubbed[***2]",
        "tests/test_ids.py::test_carries[***1]",
        "tests/test_ids.py::test_carries[***2]",
    }
