"""A repository with test packages bound for an ssh station, and `promote test` run on it as a user would."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import sshd
from tests.helpers.gitrepos import commit, git
from tests.helpers.packages import write_package

SUITE = {
    "test_suite.py": """
        import pytest

        def test_passes():
            pass

        def test_fails():
            assert 1 == 2

        @pytest.mark.skip(reason="not today")
        def test_skipped():
            pass

        @pytest.mark.parametrize("n", range(4))
        def test_param(n):
            assert n != 3
    """,
}


def sshd_or_skip(root: Path) -> Iterator[sshd.Sshd]:
    """A running sshd for a fixture; skips the test (fails, under PROMOTE_REQUIRE_SSHD) when there can be none."""
    try:
        running = sshd.start(root)
    except sshd.SshdUnavailable as e:
        if os.environ.get("PROMOTE_REQUIRE_SSHD"):
            pytest.fail(f"PROMOTE_REQUIRE_SSHD is set but {e}")
        pytest.skip(f"no sshd to test remote stations against: {e}")
    yield running
    sshd.stop(running)


def workspace(tmp_path: Path, packages: dict[str, dict[str, str]], body: str) -> Path:
    """A git repository holding the packages and a promote.toml, all committed (the candidate is HEAD)."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    for name, files in packages.items():
        write_package(repo, name, files)
    (repo / "promote.toml").write_text('[promote]\ntrunk = "main"\n\n' + body)
    commit(repo, "candidate", {})
    return repo


def package(name: str, station: str | None = None, **keys: object) -> str:
    lines = ["[[promote.packages]]", f'name = "{name}"', f'path = "{name}"']
    lines += [f'station = "{station}"'] if station else []
    for key, value in keys.items():
        if isinstance(value, dict):
            value = "{ " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in value.items()) + " }"
        lines.append(f"{key} = {value if isinstance(value, str) else json.dumps(value)}")
    return "\n".join(lines) + "\n\n"


def promote_test(repo: Path) -> tuple[int, dict[str, Any], str]:
    """`promote test --json` in a child process, as a user (or cron) would run it."""
    cmd = [sys.executable, "-m", "promote", "-C", str(repo), "test", "--json"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    return done.returncode, json.loads(done.stdout), done.stderr


def of(report: dict[str, Any], name: str) -> dict[str, Any]:
    return next(p for p in report["packages"] if p["name"] == name)


def station_errors(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [f for f in report["findings"] if f["check"] == "station-error"]


def outcomes(result_dir: Path) -> dict[str, str]:
    found: dict[str, str] = {}
    for path in result_dir.rglob("results-*.json"):
        found.update({t["nodeid"]: t["outcome"] for t in json.loads(path.read_text())["tests"]})
    return found


COUNTS = ("passed", "failed", "errors", "skipped", "blocked", "crashed", "subtests")
