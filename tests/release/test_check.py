"""`promote check` against real repositories and bare mirrors."""

from __future__ import annotations

from pathlib import Path

from tests.helpers.cli import run, run_json
from tests.helpers.gitrepos import Fleet, commit, git


def test_all_mirrors_behind_is_promotable_and_counts_what_each_lacks(fleet: Fleet) -> None:
    candidate = commit(fleet.work, "feature")
    git(fleet.work, "push", "-q", "mini", "main")
    before = fleet.refs()

    code, report = run_json(fleet.work, "check")

    assert code == 0
    assert report["verdict"] == "promotable"
    assert report["candidate"] == candidate
    assert report["trunk"] == "main"
    by_name = {m["name"]: m for m in report["mirrors"]}
    assert [m["name"] for m in report["mirrors"]] == ["origin", "mini", "station", "laptop"]
    assert by_name["mini"]["status"] == "up-to-date"
    assert (by_name["mini"]["behind"], by_name["mini"]["discard"]) == (0, 0)
    assert by_name["origin"]["status"] == "fast-forward"
    assert (by_name["origin"]["behind"], by_name["origin"]["discard"]) == (2, 0)
    assert report["findings"] == []
    assert report["drift"] is None
    assert fleet.refs() == before, "check must not change any mirror"


def test_diverged_mirror_lists_what_a_push_would_discard(fleet: Fleet) -> None:
    other = fleet.clone_of("station", "bob")
    lost = commit(other, "hotfix on station")
    git(other, "push", "-q", "origin", "main")
    commit(fleet.work, "feature")

    code, report = run_json(fleet.work, "check")

    assert code == 1
    assert report["verdict"] == "blocked"
    station = next(m for m in report["mirrors"] if m["name"] == "station")
    assert station["status"] == "diverged"
    assert station["discard"] == 1
    assert station["discard_commits"] == [
        {
            "sha": lost,
            "short": lost[:7],
            "subject": "hotfix on station",
            "author": "Ada Author <ada@example.com>",
        }
    ]
    assert [(f["check"], f["subject"], f["severity"]) for f in report["findings"]] == [
        ("mirror-diverged", "station", "error")
    ]
    human = run(fleet.work, "check")
    assert f"station would lose {lost[:7]} hotfix on station (Ada Author <ada@example.com>)" in human.stdout
    assert human.stdout.rstrip().endswith("verdict: blocked")


def test_mirror_without_trunk_is_missing(fleet: Fleet) -> None:
    git(fleet.mirrors["laptop"], "update-ref", "-d", "refs/heads/main")
    code, report = run_json(fleet.work, "check")
    assert code == 1
    laptop = next(m for m in report["mirrors"] if m["name"] == "laptop")
    assert laptop["status"] == "missing"
    assert laptop["head"] is None
    assert {f["check"] for f in report["findings"]} == {"mirror-missing"}


def test_unreachable_mirror_is_undecided_with_its_reason(fleet: Fleet, tmp_path: Path) -> None:
    gone = tmp_path / "gone.git"
    fleet.mirrors["laptop"].rename(gone)
    code, report = run_json(fleet.work, "check")
    assert code == 3
    assert report["verdict"] == "undecided"
    laptop = next(m for m in report["mirrors"] if m["name"] == "laptop")
    assert laptop["status"] == "unreachable"
    assert "does not appear to be a git repository" in laptop["reason"]
    assert [f["check"] for f in report["findings"]] == ["mirror-unreachable"]


def test_diverged_beats_unreachable(fleet: Fleet, tmp_path: Path) -> None:
    fleet.mirrors["laptop"].rename(tmp_path / "gone.git")
    other = fleet.clone_of("origin", "bob")
    commit(other, "someone else's work")
    git(other, "push", "-q", "origin", "main")
    code, report = run_json(fleet.work, "check")
    assert (code, report["verdict"]) == (1, "blocked")


def test_mirror_with_unknown_commits_is_fetched_into_a_private_ref(fleet: Fleet) -> None:
    other = fleet.clone_of("origin", "bob")
    theirs = commit(other, "their commit")
    git(other, "push", "-q", "origin", "main")
    users_refs = git(fleet.work, "for-each-ref", "refs/heads", "refs/remotes", "refs/tags")
    code, _ = run_json(fleet.work, "check")
    assert code == 1
    assert git(fleet.work, "rev-parse", "refs/promote/mirrors/origin/main") == theirs
    assert git(fleet.work, "for-each-ref", "refs/heads", "refs/remotes", "refs/tags") == users_refs


def test_explicit_candidate(fleet: Fleet) -> None:
    first = git(fleet.work, "rev-parse", "HEAD~1")
    code, report = run_json(fleet.work, "check", "--candidate", first)
    assert code == 0
    assert report["candidate"] == first
    assert {m["status"] for m in report["mirrors"]} == {"up-to-date"}


def test_deployed_ahead_of_trunk_is_reported_with_the_count(fleet: Fleet) -> None:
    git(fleet.work, "checkout", "-q", "-b", "deployed")
    for i in range(3):
        commit(fleet.work, f"prod fix {i}")
    git(fleet.work, "checkout", "-q", "main")
    fleet.config('deployed = "deployed"\n')
    git(fleet.work, "commit", "-qam", "deployed in config")

    code, report = run_json(fleet.work, "check")

    assert code == 1
    assert report["drift"]["trunk_behind"] == 3
    assert report["drift"]["status"] == "behind"
    assert [f["check"] for f in report["findings"]] == ["trunk-behind-deployed"]
    assert "3 commit(s) on deployed" in report["findings"][0]["message"]


def test_test_only_difference_leaves_the_binary_unchanged(fleet: Fleet) -> None:
    fleet.config('deployed = "deployed"\n')
    git(fleet.work, "commit", "-qam", "deployed in config")
    git(fleet.work, "branch", "deployed")
    commit(fleet.work, "more tests", {"tests/test_more.py": "def test(): pass\n"})
    commit(fleet.work, "a conftest", {"pkg/conftest.py": "\n"})

    code, report = run_json(fleet.work, "check")

    assert code == 0
    drift = report["drift"]
    assert (drift["status"], drift["undeployed"], drift["trunk_behind"]) == ("test-only", 2, 0)
    assert drift["binary_unchanged"] is True
    assert sorted(drift["changed_files"]) == ["pkg/conftest.py", "tests/test_more.py"]
    assert "test files only: binary unchanged" in run(fleet.work, "check").stdout


def test_undeployed_code_change_is_a_warning(fleet: Fleet) -> None:
    fleet.config('deployed = "deployed"\n')
    git(fleet.work, "commit", "-qam", "deployed in config")
    git(fleet.work, "branch", "deployed")
    commit(fleet.work, "new kernel", {"sanctum/kernel.py": "x = 1\n"})

    code, report = run_json(fleet.work, "check")

    assert code == 0
    assert report["drift"]["status"] == "undeployed"
    assert report["drift"]["binary_unchanged"] is False
    assert [(f["check"], f["severity"]) for f in report["findings"]] == [("undeployed-change", "warning")]
    assert "sanctum/kernel.py" in report["findings"][0]["message"]


def test_a_mirror_that_hangs_is_unreachable_after_the_timeout(fleet: Fleet) -> None:
    # A transport that never answers: git runs this "ssh" and waits on it.
    git(fleet.work, "config", "core.sshCommand", "sleep 60 #")
    git(fleet.work, "remote", "set-url", "laptop", "ssh://nowhere.invalid/sanctum.git")
    fleet.config("mirror_timeout_s = 1\n")

    code, report = run_json(fleet.work, "check")

    assert code == 3
    laptop = next(m for m in report["mirrors"] if m["name"] == "laptop")
    assert laptop["status"] == "unreachable"
    assert "did not complete in 1" in laptop["reason"]
    assert {m["status"] for m in report["mirrors"] if m["name"] != "laptop"} == {"fast-forward"}


def test_explicit_empty_mirrors_is_undecided_for_check_merge_and_the_merged_gate(fleet: Fleet) -> None:
    (fleet.work / "promote.toml").write_text('[promote]\ntrunk = "main"\nmirrors = []\n')
    commit(fleet.work, "feature")
    before = fleet.refs()

    code, report = run_json(fleet.work, "check")
    assert (code, report["verdict"], report["mirrors"]) == (3, "undecided", [])
    human = run(fleet.work, "check")
    assert human.exit_code == 3
    assert "no mirrors configured: nothing to verify" in human.stdout.splitlines()

    code, merged = run_json(fleet.work, "merge")
    assert (code, merged["verdict"], merged["mirrors"]) == (3, "undecided", [])
    assert fleet.refs() == before, "nothing may be pushed when no mirror is configured"

    code, audited = run_json(fleet.work, "audit")
    assert code == 3
    merged = audited["gates"]["merged"]
    assert (merged["status"], merged["evidence"]) == ("undecided", ["no mirrors configured"])
    # The other gates are still decided from what they read.
    assert audited["gates"]["deployed"]["status"] == "undecided"
    assert fleet.refs() == before


def test_absent_mirrors_still_means_every_remote(fleet: Fleet) -> None:
    (fleet.work / "promote.toml").write_text('[promote]\ntrunk = "main"\n')
    code, report = run_json(fleet.work, "check")
    assert code == 0
    assert sorted(m["name"] for m in report["mirrors"]) == ["laptop", "mini", "origin", "station"]
