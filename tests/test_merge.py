"""`promote merge` pushes only fast-forwards, verifies them, and stops cleanly when refused."""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers.cli import run, run_json
from tests.helpers.gitrepos import Fleet, commit, git


def reflog(bare: Path) -> list[tuple[str, str]]:
    """(old, new) for every update of main recorded in a mirror's reflog."""
    text = (bare / "logs" / "refs" / "heads" / "main").read_text()
    return [tuple(line.split()[:2]) for line in text.splitlines()]  # type: ignore[misc]


def test_merge_fast_forwards_every_mirror_and_the_reflogs_prove_it(fleet: Fleet) -> None:
    old = fleet.head("origin")
    candidate = commit(fleet.work, "feature")

    result = run(fleet.work, "merge")

    assert result.exit_code == 0, result.output
    for name in fleet.mirrors:
        assert fleet.head(name) == candidate
        last_old, last_new = reflog(fleet.mirrors[name])[-1]
        assert (last_old, last_new) == (old, candidate)
        assert git(fleet.work, "merge-base", "--is-ancestor", last_old, last_new) == ""
    assert result.stdout.splitlines()[:2] == [
        f"main fast-forwarded {old[:7]} to {candidate[:7]} on origin, mini, station, laptop, no force",
        "all 4 mirrors agree; each verified an ancestor first",
    ]
    journal = [json.loads(x) for x in (fleet.work / ".promote" / "journal.jsonl").read_text().splitlines()]
    # Each push: its intent first (written before git runs), then its completion with what was read back.
    assert [(e["op"], e.get("mirror"), e.get("status")) for e in journal] == [
        *[
            step
            for name in ("origin", "mini", "station", "laptop")
            for step in (("push-intent", name, None), ("push", name, "advanced"))
        ],
        ("merge", None, None),
    ]
    assert all(e["after"] == candidate for e in journal if e["op"] == "push")
    assert all(e["before"] == old and e["candidate"] == candidate for e in journal if e["op"] == "push-intent")
    assert journal[-1]["verdict"] == "merged"
    assert git(fleet.work, "status", "--porcelain") == "", ".promote/ must not show as untracked"


def test_merge_json_shape(fleet: Fleet) -> None:
    candidate = commit(fleet.work, "feature")
    git(fleet.work, "push", "-q", "mini", "main")
    code, report = run_json(fleet.work, "merge")
    assert code == 0
    assert report["verdict"] == "merged"
    assert report["candidate"] == candidate
    statuses = {m["name"]: (m["status"], m["after"]) for m in report["mirrors"]}
    assert statuses["mini"] == ("up-to-date", candidate)
    assert statuses["origin"] == ("advanced", candidate)
    assert all(set(m) >= {"name", "before", "after", "status"} for m in report["mirrors"])


def test_one_diverged_mirror_blocks_and_no_ref_changes_anywhere(fleet: Fleet) -> None:
    other = fleet.clone_of("laptop", "bob")
    commit(other, "laptop-only work")
    git(other, "push", "-q", "origin", "main")
    commit(fleet.work, "feature")
    before = fleet.refs()

    result = run(fleet.work, "merge")

    assert result.exit_code == 1
    assert fleet.refs() == before
    assert "blocked: nothing pushed" in result.stdout
    assert "laptop would lose" in result.stdout


def test_unreachable_mirror_is_undecided_and_nothing_is_pushed(fleet: Fleet, tmp_path: Path) -> None:
    commit(fleet.work, "feature")
    git(fleet.work, "remote", "set-url", "station", str(tmp_path / "nowhere.git"))
    before = fleet.refs()
    result = run(fleet.work, "merge")
    assert result.exit_code == 3
    assert fleet.refs() == before


def test_dry_run_pushes_nothing(fleet: Fleet) -> None:
    candidate = commit(fleet.work, "feature")
    before = fleet.refs()
    result = run(fleet.work, "merge", "--dry-run")
    assert result.exit_code == 0
    assert fleet.refs() == before
    assert result.stdout.strip() == (
        f"dry run: would fast-forward main to {candidate[:7]} on origin, mini, station, laptop, "
        "no force; nothing pushed"
    )


def test_mirror_advanced_between_check_and_push_is_refused_not_forced(fleet: Fleet) -> None:
    # A real race: as soon as origin accepts our push, someone pushes to station.
    racer = fleet.clone_of("station", "racer")
    racer_commit = commit(racer, "pushed in between")
    fleet.hook(
        "origin",
        "post-receive",
        f"unset GIT_DIR GIT_QUARANTINE_PATH\ncd {racer} && git push -q origin main >/dev/null 2>&1\n",
    )
    old = fleet.head("origin")
    candidate = commit(fleet.work, "feature")

    code, report = run_json(fleet.work, "merge")

    assert code == 4
    assert report["verdict"] == "partial"
    status = {m["name"]: m for m in report["mirrors"]}
    assert (status["origin"]["status"], status["origin"]["after"]) == ("advanced", candidate)
    assert status["station"]["status"] == "rejected"
    assert status["station"]["after"] == racer_commit
    assert (status["mini"]["status"], status["laptop"]["status"]) == ("advanced", "not-attempted")
    assert fleet.head("station") == racer_commit, "the racer's commit must survive"
    assert (fleet.head("mini"), fleet.head("laptop")) == (candidate, old)

    # Reconcile: bring the racer's commit into the candidate, then rerun to resume.
    (fleet.mirrors["origin"] / "hooks" / "post-receive").unlink()
    git(fleet.work, "pull", "-q", "--no-rebase", "--no-edit", "station", "main")
    reconciled = git(fleet.work, "rev-parse", "HEAD")
    rerun = run(fleet.work, "merge")
    assert rerun.exit_code == 0, rerun.output
    assert {fleet.head(m) for m in fleet.mirrors} == {reconciled}


def test_pre_receive_hook_refusal_is_partial_and_a_rerun_completes(fleet: Fleet) -> None:
    hook = fleet.hook("station", "pre-receive", "echo 'frozen for release' >&2\nexit 1\n")
    old = fleet.head("origin")
    candidate = commit(fleet.work, "feature")

    result = run(fleet.work, "merge")

    assert result.exit_code == 4
    assert [fleet.head(m) for m in fleet.mirrors] == [candidate, candidate, old, old]
    assert result.stdout.splitlines() == [
        f"partial: main advanced to {candidate[:7]} on some mirrors only; nothing was forced",
        f"  origin: advanced {old[:7]} -> {candidate[:7]}",
        f"  mini: advanced {old[:7]} -> {candidate[:7]}",
        f"  station: rejected {old[:7]} -> {old[:7]} "
        "([remote rejected] (pre-receive hook declined): frozen for release)",
        f"  laptop: not-attempted {old[:7]} -> {old[:7]} (not pushed: station did not take the candidate)",
        "reconcile the refused mirror(s), then rerun `promote merge` to resume",
    ]

    # The hook still refuses: the mirrors are still split, so the rerun is partial again, not blocked.
    again = run(fleet.work, "merge")
    assert again.exit_code == 4, again.output
    assert again.stdout.splitlines()[0].startswith("partial: ")
    assert "station: rejected" in again.stdout and "frozen for release" in again.stdout
    assert [fleet.head(m) for m in fleet.mirrors] == [candidate, candidate, old, old]

    hook.unlink()
    rerun = run(fleet.work, "merge")
    assert rerun.exit_code == 0, rerun.output
    assert {fleet.head(m) for m in fleet.mirrors} == {candidate}
    assert rerun.stdout.splitlines()[0] == (
        f"main fast-forwarded {old[:7]} to {candidate[:7]} on station, laptop, no force"
    )


def test_refusal_on_the_first_push_is_blocked_with_nothing_pushed(fleet: Fleet) -> None:
    fleet.hook("origin", "pre-receive", "exit 1\n")
    commit(fleet.work, "feature")
    before = fleet.refs()
    code, report = run_json(fleet.work, "merge")
    assert (code, report["verdict"]) == (1, "blocked")
    assert fleet.refs() == before


def test_local_trunk_is_fast_forwarded_when_the_tree_is_clean(fleet: Fleet) -> None:
    candidate = commit(fleet.work, "feature")
    git(fleet.work, "reset", "-q", "--hard", "HEAD~1")
    result = run(fleet.work, "merge", "--candidate", candidate)
    assert result.exit_code == 0
    assert git(fleet.work, "rev-parse", "main") == candidate
    assert "local main fast-forwarded" in result.stdout


def test_local_trunk_with_changes_is_left_alone(fleet: Fleet) -> None:
    candidate = commit(fleet.work, "feature")
    git(fleet.work, "reset", "-q", "--hard", "HEAD~1")
    (fleet.work / "promote.toml").write_text((fleet.work / "promote.toml").read_text() + "# edited\n")
    local = git(fleet.work, "rev-parse", "main")
    result = run(fleet.work, "merge", "--candidate", candidate)
    assert result.exit_code == 0
    assert git(fleet.work, "rev-parse", "main") == local
    assert "the working tree has changes" in result.stdout
    assert (fleet.work / "promote.toml").read_text().endswith("# edited\n")


def test_local_trunk_not_checked_out_is_moved_by_ref(fleet: Fleet) -> None:
    candidate = commit(fleet.work, "feature")
    git(fleet.work, "checkout", "-q", "-b", "topic")
    git(fleet.work, "branch", "-f", "main", "HEAD~1")
    result = run(fleet.work, "merge", "--candidate", "topic")
    assert result.exit_code == 0, result.output
    assert git(fleet.work, "rev-parse", "main") == candidate
    assert git(fleet.work, "rev-parse", "--abbrev-ref", "HEAD") == "topic"
