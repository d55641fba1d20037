"""Bad input gets one clear line and the documented exit code, never a traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.cli import run
from tests.helpers.gitrepos import Fleet, commit, git


def promote(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The real entry point, as a separate process (`python -m promote`)."""
    return subprocess.run(
        [sys.executable, "-m", "promote", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def one_line_error(done: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("promote: error: ")
    return lines[0]


def test_not_a_repository(tmp_path: Path) -> None:
    (tmp_path / "promote.toml").write_text('[promote]\ntrunk = "main"\n')
    done = promote(tmp_path, "check")
    assert done.returncode == 2
    assert one_line_error(done) == f"promote: error: {tmp_path} is not inside a git repository"


def test_unborn_trunk(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q", "-b", "main")
    git(tmp_path, "remote", "add", "origin", str(tmp_path / "o.git"))
    (tmp_path / "promote.toml").write_text('[promote]\ntrunk = "main"\n')
    done = promote(tmp_path, "check")
    assert done.returncode == 2
    assert "branch 'main' has no commits yet (unborn)" in one_line_error(done)


def test_shallow_clone(fleet: Fleet, tmp_path: Path) -> None:
    commit(fleet.work, "second")
    git(fleet.work, "push", "-q", "origin", "main")
    shallow = tmp_path / "shallow"
    git(tmp_path, "clone", "-q", "--depth", "1", f"file://{fleet.mirrors['origin']}", str(shallow))
    done = promote(shallow, "check")
    assert done.returncode == 2
    assert "is a shallow clone" in one_line_error(done)
    assert "git fetch --unshallow" in done.stderr


def test_detached_head_without_candidate(fleet: Fleet) -> None:
    git(fleet.work, "checkout", "-q", "--detach", "HEAD")
    done = promote(fleet.work, "merge")
    assert done.returncode == 2
    assert "HEAD is detached" in one_line_error(done)
    # Naming the candidate explicitly is the way out.
    assert run(fleet.work, "check", "--candidate", "HEAD").exit_code == 0


def test_missing_remote_named_in_config(fleet: Fleet) -> None:
    git(fleet.work, "remote", "remove", "laptop")
    done = promote(fleet.work, "merge")
    assert done.returncode == 2
    assert "'laptop' is not a git remote" in one_line_error(done)


def test_unknown_candidate(fleet: Fleet) -> None:
    done = promote(fleet.work, "check", "--candidate", "no-such-ref")
    assert done.returncode == 2
    assert one_line_error(done).endswith(f"--candidate 'no-such-ref' names no commit in {fleet.work}")


def test_option_like_names_reach_git_as_arguments(fleet: Fleet) -> None:
    done = promote(fleet.work, "check", "--candidate", "--output=/tmp/x")
    assert done.returncode == 2
    assert "names no commit" in one_line_error(done)


def test_deployed_ref_that_does_not_exist(fleet: Fleet) -> None:
    fleet.config('deployed = "production"\n')
    done = promote(fleet.work, "check")
    assert done.returncode == 2
    assert "promote.deployed: 'production' names no commit" in one_line_error(done)


@pytest.mark.parametrize("command", ["check", "merge"])
def test_credentials_never_appear_in_output_json_or_journal(fleet: Fleet, command: str) -> None:
    # Port 9 on loopback refuses at once: an unreachable mirror whose URL carries a token.
    git(
        fleet.work,
        "remote",
        "set-url",
        "laptop",
        "https://deploy-bot:s3cr3t-t0ken@127.0.0.1:9/s.git",
    )
    commit(fleet.work, "feature")

    human = promote(fleet.work, command)
    as_json = promote(fleet.work, command, "--json")

    assert human.returncode == as_json.returncode == 3
    report = json.loads(as_json.stdout)
    mirrors = report["check"]["mirrors"] if command == "merge" else report["mirrors"]
    laptop = next(m for m in mirrors if m["name"] == "laptop")
    assert laptop["status"] == "unreachable"
    assert laptop["url"] == "https://***@127.0.0.1:9/s.git"
    journal = fleet.work / ".promote" / "journal.jsonl"
    everything = human.stdout + human.stderr + as_json.stdout + as_json.stderr
    everything += journal.read_text() if journal.exists() else ""
    assert "127.0.0.1:9" in everything
    assert "s3cr3t-t0ken" not in everything
    assert "deploy-bot" not in everything


def test_rejected_push_to_a_url_with_credentials_is_redacted_in_the_journal(fleet: Fleet) -> None:
    # A file:// URL may carry user-info too; git ignores it, so the push really happens.
    url = f"file://builder:hunter2@{fleet.mirrors['station']}"
    git(fleet.work, "remote", "set-url", "station", url)
    fleet.hook("station", "pre-receive", "exit 1\n")
    commit(fleet.work, "feature")
    done = promote(fleet.work, "merge", "--json")
    assert done.returncode == 4, done.stderr
    journal = (fleet.work / ".promote" / "journal.jsonl").read_text()
    assert '"mirror": "station"' in journal
    assert "hunter2" not in journal + done.stdout + done.stderr
