"""Deployed gate: a branch, a command's answer, a command that hangs or fails; `promote check` and `promote audit`."""

from __future__ import annotations

import json
import shlex
import time
from pathlib import Path

import pytest

from promote import config
from promote.config import Config
from promote.core.git import Repo
from promote.evidence import gates
from promote.release import drift as drift_mod
from promote.release.deployed import audit_deployed
from tests.helpers.cli import run, run_json
from tests.helpers.gitrepos import Fleet, commit, git


def load(fleet: Fleet, body: str) -> Config:
    """Write and commit the configuration, so later commits change only what the test means them to."""
    fleet.config(body)
    git(fleet.work, "commit", "-qam", "configure", check=False)
    return config.load(fleet.work / "promote.toml")


def test_deployed_branch_at_trunk_passes_with_the_served_since_date(fleet: Fleet) -> None:
    cfg = load(fleet, 'deployed = "deployed"\n')
    git(fleet.work, "branch", "deployed")
    head = git(fleet.work, "rev-parse", "HEAD")

    outcome = audit_deployed(Repo(fleet.work), cfg, head)

    assert (outcome.status, outcome.reason) == ("pass", f"production serves main ({head[:7]}) itself")
    assert outcome.evidence == (
        f"production serves deployed = {head[:7]}; served since 2026-01-01T00:00:00+00:00 (source: commit date)",
        f"main ({head[:7]}) and the deployed commit are the same commit",
    )


def test_what_follows_non_test_files_names_only_the_non_test_files(fleet: Fleet) -> None:
    cfg = load(fleet, 'deployed = "deployed"\n')
    git(fleet.work, "branch", "deployed")
    head = commit(
        fleet.work, "kernel and its test", {"sanctum/kernel.py": "x = 1\n", "tests/test_kernel.py": "x = 1\n"}
    )

    outcome = audit_deployed(Repo(fleet.work), cfg, head)
    code, report = run_json(fleet.work, "check")
    drift = drift_mod.measure(Repo(fleet.work), cfg, head)
    assert isinstance(drift, drift_mod.Drift)
    gate = gates.deployed(outcome, drift, "main", "")

    assert outcome.evidence[-1] == "they change 1 non-test file(s): sanctum/kernel.py (and 1 test file(s))"
    assert code == 0
    [finding] = report["findings"]
    assert finding["message"] == "1 commit(s) not deployed on deployed; they change non-test files: sanctum/kernel.py"
    assert sorted(report["drift"]["changed_files"]) == ["sanctum/kernel.py", "tests/test_kernel.py"]
    assert report["drift"]["non_test_files"] == ["sanctum/kernel.py"]
    assert gate.evidence[1].endswith("changing non-test files: not deployed")
    assert gate.details[-2:] == (
        "non-test files changed: `sanctum/kernel.py`",
        "test files changed: `tests/test_kernel.py`",
    )


def test_trunk_ahead_by_test_files_only_keeps_the_binary(fleet: Fleet) -> None:
    cfg = load(fleet, 'deployed = "deployed"\n')
    git(fleet.work, "branch", "deployed")
    head = commit(fleet.work, "more tests", {"tests/test_more.py": "def test_x(): pass\n"})

    outcome = audit_deployed(Repo(fleet.work), cfg, head)

    assert outcome.status == "pass"
    assert outcome.evidence[1] == (
        f"main ({head[:7]}) is 1 commit(s) ahead of the deployed commit, touching only test files "
        "(tests/test_more.py): binary unchanged"
    )


def test_undeployed_code_change_fails_naming_commits_and_files(fleet: Fleet) -> None:
    cfg = load(fleet, 'deployed = "deployed"\n')
    git(fleet.work, "branch", "deployed")
    head = commit(fleet.work, "faster drafter", {"sanctum/dflash.py": "BLOCK = 8\n"})

    outcome = audit_deployed(Repo(fleet.work), cfg, head)

    assert (outcome.status, outcome.reason) == ("fail", "1 commit(s) on main changing non-test files are not deployed")
    assert outcome.evidence[1:] == (
        f"main ({head[:7]}) is 1 commit(s) ahead of the deployed commit, not deployed:",
        f"  {head[:7]} faster drafter (Ada Author <ada@example.com>)",
        "they change 1 non-test file(s): sanctum/dflash.py",
    )
    assert [(f.check, f.severity) for f in outcome.findings] == [("undeployed-change", "warning")]


def test_trunk_behind_deployed_fails_listing_what_it_would_drop(fleet: Fleet) -> None:
    trunk = git(fleet.work, "rev-parse", "HEAD")
    git(fleet.work, "checkout", "-q", "-b", "deployed")
    hotfix = commit(fleet.work, "hotfix in production")
    git(fleet.work, "checkout", "-q", "main")
    cfg = load(fleet, 'deployed = "deployed"\n')

    outcome = audit_deployed(Repo(fleet.work), cfg, trunk)

    assert outcome.status == "fail"
    assert outcome.evidence[1:] == (
        f"main ({trunk[:7]}) lacks 1 commit(s) that production serves:",
        f"  {hotfix[:7]} hotfix in production (Ada Author <ada@example.com>)",
    )
    assert [(f.check, f.severity) for f in outcome.findings] == [("trunk-behind-deployed", "error")]


def test_deployed_command_as_a_list_or_a_string_names_the_commit(fleet: Fleet) -> None:
    head = git(fleet.work, "rev-parse", "HEAD")
    git(fleet.work, "branch", "production")
    (fleet.work / "REVISION").write_text(f"{head}\n")

    by_list_cfg = load(fleet, 'deployed_command = ["git", "rev-parse", "production"]\n')
    by_list = audit_deployed(Repo(fleet.work), by_list_cfg, git(fleet.work, "rev-parse", "production"))
    by_string = audit_deployed(
        Repo(fleet.work),
        load(fleet, 'deployed_command = "cat REVISION"\ndeployed_since_command = ["echo", "2026-02-03 09:00"]\n'),
        head,
    )

    assert by_list.status == "pass"
    assert by_list.evidence[0] == (
        f"production serves {head[:7]}, as `git rev-parse production` reports; "
        "served since 2026-01-01T00:00:00+00:00 (source: commit date)"
    )
    assert by_string.status == "pass"
    assert by_string.evidence[0] == (
        f"production serves {head[:7]}, as `cat REVISION` reports; "
        "served since 2026-02-03 09:00 (source: `echo 2026-02-03 09:00`)"
    )


def test_deployed_command_that_hangs_is_undecided_within_its_timeout(fleet: Fleet) -> None:
    cfg = load(fleet, 'deployed_command = ["sleep", "30"]\ndeployed_timeout_s = 1\n')
    head = git(fleet.work, "rev-parse", "HEAD")

    started = time.monotonic()
    outcome = audit_deployed(Repo(fleet.work), cfg, head)

    assert time.monotonic() - started < 10
    assert (outcome.status, outcome.reason) == (
        "undecided",
        "cannot tell what production serves: `sleep 30` did not finish in 1 s",
    )


def test_failing_or_unknown_answers_are_undecided_and_secrets_stay_out(fleet: Fleet) -> None:
    head = git(fleet.work, "rev-parse", "HEAD")
    leaky = 'deployed_command = ["sh", "-c", "echo fatal: https://bot:s3cret@example.com/x >&2; exit 3"]\n'
    failing = audit_deployed(Repo(fleet.work), load(fleet, leaky), head)
    unknown = audit_deployed(Repo(fleet.work), load(fleet, 'deployed_command = ["echo", "' + "f" * 40 + '"]\n'), head)

    assert failing.status == "undecided"
    assert "s3cret" not in failing.reason
    assert failing.reason.endswith("exited with status 3: fatal: https://***@example.com/x")
    assert unknown.status == "undecided"
    assert f"printed '{'f' * 40}', which names no commit in {fleet.work}" in unknown.reason


def test_nothing_configured_is_undecided(fleet: Fleet) -> None:
    outcome = audit_deployed(Repo(fleet.work), load(fleet, ""), git(fleet.work, "rev-parse", "HEAD"))
    assert (outcome.status, outcome.reason) == (
        "undecided",
        "no deployed ref configured (promote.deployed or promote.deployed_command)",
    )


def test_check_with_a_deployed_command_reports_drift_and_a_failing_one_is_undecided(fleet: Fleet) -> None:
    git(fleet.work, "branch", "deployed")
    fleet.config('deployed_command = "git rev-parse deployed"\n')
    git(fleet.work, "commit", "-qam", "deployed by command")
    for mirror in fleet.mirrors:
        git(fleet.work, "push", "-q", mirror, "main")

    code, report = run_json(fleet.work, "check")

    assert code == 0
    assert (report["drift"]["status"], report["drift"]["source"]) == ("undeployed", "`git rev-parse deployed`")
    assert report["drift"]["changed_files"] == ["promote.toml"]

    fleet.config('deployed_command = ["false"]\n')
    git(fleet.work, "commit", "-qam", "broken command")
    for mirror in fleet.mirrors:
        git(fleet.work, "push", "-q", mirror, "main")

    code, report = run_json(fleet.work, "check")

    assert code == 3
    assert report["verdict"] == "undecided"
    assert report["drift"]["status"] == "undecided"
    assert report["drift"]["reason"] == "`false` exited with status 1"
    assert report["findings"] == []


def counted(log: Path, script: str) -> str:
    """A deployed_command that leaves one line in `log` each time it runs, then runs `script`."""
    return json.dumps(["sh", "-c", f"echo ran >> {shlex.quote(str(log))}; {script}"])


def runs_of(log: Path) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


def test_a_given_drift_is_judged_without_measuring_again(fleet: Fleet, tmp_path: Path) -> None:
    log = tmp_path / "deployed.log"
    git(fleet.work, "branch", "deployed")
    cfg = load(fleet, f"deployed_command = {counted(log, 'git rev-parse deployed')}\n")
    head = git(fleet.work, "rev-parse", "HEAD")
    repo = Repo(fleet.work)

    measured = drift_mod.measure(repo, cfg, head)
    given = audit_deployed(repo, cfg, head, drift=measured)
    assert runs_of(log) == 1
    alone = audit_deployed(repo, cfg, head)
    assert runs_of(log) == 2  # without a drift it still measures on its own

    assert given == alone
    assert (given.status, given.reason) == ("fail", "1 commit(s) on main changing non-test files are not deployed")


def test_a_given_undecided_drift_gives_the_same_undecided_reason(fleet: Fleet, tmp_path: Path) -> None:
    log = tmp_path / "deployed.log"
    cfg = load(fleet, f"deployed_command = {counted(log, 'exit 3')}\n")
    head = git(fleet.work, "rev-parse", "HEAD")
    repo = Repo(fleet.work)

    given = audit_deployed(repo, cfg, head, drift=drift_mod.measure(repo, cfg, head))
    assert runs_of(log) == 1

    assert given == audit_deployed(repo, cfg, head)
    assert given.status == "undecided"
    assert given.reason.startswith("cannot tell what production serves: `sh -c echo ran >> ")
    assert given.reason.endswith("; exit 3` exited with status 3")


def test_a_drift_of_another_commit_is_refused(fleet: Fleet) -> None:
    git(fleet.work, "branch", "deployed")
    cfg = load(fleet, 'deployed = "deployed"\n')
    head = git(fleet.work, "rev-parse", "HEAD")
    parent = git(fleet.work, "rev-parse", "HEAD~1")
    measured = drift_mod.measure(Repo(fleet.work), cfg, parent)

    with pytest.raises(ValueError, match=f"drift was measured for {parent}, not {head}"):
        audit_deployed(Repo(fleet.work), cfg, head, drift=measured)


def test_a_deployed_ref_naming_no_commit_is_undecided_with_the_reason(fleet: Fleet) -> None:
    cfg = load(fleet, 'deployed = "nowhere"\n')

    outcome = audit_deployed(Repo(fleet.work), cfg, git(fleet.work, "rev-parse", "HEAD"))

    assert outcome.status == "undecided"
    assert outcome.reason == (
        f"{fleet.work / 'promote.toml'}: promote.deployed: 'nowhere' names no commit in {fleet.work} "
        "(fetch it, or name a branch, tag or sha that exists here)"
    )


@pytest.mark.parametrize(
    ("script", "status", "first"),
    [
        ("git rev-parse HEAD", "pass", "`{head7}` has served this tree since"),
        ("git rev-parse deployed", "fail", "is 1 commit ahead, changing non-test files: not deployed"),
        ("exit 3", "undecided", "cannot tell what production serves: `sh -c echo ran >> {log}; exit 3` exited"),
    ],
    ids=["same", "undeployed", "failing"],
)
def test_audit_runs_deployed_command_once_and_keeps_the_gate(
    fleet: Fleet, tmp_path: Path, script: str, status: str, first: str
) -> None:
    log = tmp_path / "deployed.log"
    git(fleet.work, "branch", "deployed")
    cfg = load(fleet, f"deployed_command = {counted(log, script)}\n")
    head = git(fleet.work, "rev-parse", "HEAD")
    for mirror in fleet.mirrors:
        git(fleet.work, "push", "-q", mirror, "main")

    code, report = run_json(fleet.work, "audit")

    assert code in (0, 1, 3), report
    assert runs_of(log) == 1
    gate = report["gates"]["deployed"]
    assert gate["status"] == status
    assert first.format(head7=head[:7], log=log) in " ".join(gate["evidence"])
    # The gate the audit decided from check()'s drift is the one the deployed check decides measuring on its own.
    assert gate["status"] == audit_deployed(Repo(fleet.work), cfg, head).status


def test_audit_without_a_deployed_ref_says_none_is_configured(fleet: Fleet) -> None:
    for mirror in fleet.mirrors:
        git(fleet.work, "push", "-q", mirror, "main")

    code, report = run_json(fleet.work, "audit")

    assert code == 3, report  # undecided: the deployed gate cannot be decided
    assert report["gates"]["deployed"] == {
        "status": "undecided",
        "evidence": ["no deployed ref configured (promote.deployed or promote.deployed_command)"],
        "details": [],
        "lead": ["no deployed ref configured (promote.deployed or promote.deployed_command)"],
    }


def test_audit_with_a_deployed_ref_naming_no_commit_stops_with_the_error(fleet: Fleet) -> None:
    load(fleet, 'deployed = "nowhere"\n')
    for mirror in fleet.mirrors:
        git(fleet.work, "push", "-q", mirror, "main")

    result = run(fleet.work, "audit", "--json")

    assert result.exit_code == 2
    assert result.stdout == ""
    assert "promote.deployed: 'nowhere' names no commit in" in result.stderr
