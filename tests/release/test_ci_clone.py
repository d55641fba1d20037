"""A CI clone: only `origin`, a detached HEAD, `deployed` only as `origin/deployed`; mirrors given by URL."""

from __future__ import annotations

from pathlib import Path

import pytest

from promote.config import load
from promote.core.errors import ConfigError
from tests.helpers.ciclone import ci_clone, team_repository
from tests.helpers.cli import run, run_json
from tests.helpers.gitrepos import commit, git


def test_a_ci_clone_passes_the_audit_of_the_checked_out_commit(tmp_path: Path) -> None:
    fleet = team_repository(tmp_path)
    ci = ci_clone(fleet)

    code, report = run_json(ci, "audit", "--candidate", "HEAD")

    assert {k: g["status"] for k, g in report["gates"].items()} == dict.fromkeys(
        ("tested", "docs", "merged", "deployed"), "pass"
    ), report
    assert code == 0
    # Every mirror was read by its URL, though the clone has no remote called mini.
    assert "all 2 mirrors agree" in " ".join(report["gates"]["merged"]["evidence"])
    # The deployed branch was read from its remote-tracking ref, and the evidence says so.
    deployed = " ".join(report["gates"]["deployed"]["evidence"])
    assert "origin/deployed" in deployed and "no local 'deployed'" in deployed


def test_check_says_which_deployed_ref_it_read_and_test_takes_a_candidate(tmp_path: Path) -> None:
    ci = ci_clone(team_repository(tmp_path))

    checked = run(ci, "check", "--candidate", "HEAD")
    assert checked.exit_code == 0, checked.stderr
    assert "deployed: origin/deployed (" in checked.stdout

    code, tested = run_json(ci, "test", "--candidate", "HEAD")
    assert code == 0
    assert [(p["name"], p["passed"]) for p in tested["packages"]] == [("proxy", 1)]


def test_a_candidate_that_is_not_checked_out_is_refused_for_test_and_audit(tmp_path: Path) -> None:
    fleet = team_repository(tmp_path)
    ci = ci_clone(fleet)
    first = git(ci, "rev-parse", "HEAD~1")
    for command in ("test", "audit"):
        result = run(ci, command, "--candidate", first)
        assert result.exit_code == 2
        assert result.stderr.strip().splitlines() == [
            f"promote: error: --candidate {first!r} is {first[:7]} but {ci} has "
            f"{git(ci, 'rev-parse', '--short=7', 'HEAD')} checked out: "
            "the tests run the working tree, so check the candidate out first"
        ]


def test_a_merge_pushes_to_mirrors_given_by_url(tmp_path: Path) -> None:
    fleet = team_repository(tmp_path)
    ci = ci_clone(fleet)
    git(ci, "checkout", "-q", "-b", "main")
    candidate = commit(ci, "a fix")

    result = run(ci, "merge", "--candidate", "HEAD")

    assert result.exit_code == 0, result.stderr
    assert fleet.head("origin") == fleet.head("mini") == candidate


def test_mirrors_as_a_table_of_urls_and_bad_ones(tmp_path: Path) -> None:
    path = tmp_path / "promote.toml"
    path.write_text(
        '[promote]\ntrunk = "main"\n[promote.mirrors]\n'
        'origin = "git@github.com:team/sanctum.git"\nmini = "ssh://mini.local/srv/sanctum.git"\nnas = "../nas.git"\n'
    )
    config = load(path)
    assert config.mirrors == ("origin", "mini", "nas")
    assert dict(config.mirror_urls) == {
        "origin": "git@github.com:team/sanctum.git",
        "mini": "ssh://mini.local/srv/sanctum.git",
        "nas": str((tmp_path.parent / "nas.git").resolve()),
    }
    path.write_text('[promote]\ntrunk = "main"\n[promote.mirrors]\norigin = "--upload-pack=evil"\n')
    with pytest.raises(ConfigError, match=r"promote\.mirrors\.origin: expected a git URL or path"):
        load(path)
    path.write_text('[promote]\ntrunk = "main"\nmirrors = 3\n')
    with pytest.raises(ConfigError, match=r"promote\.mirrors: expected a list of git remote names, or a table"):
        load(path)
