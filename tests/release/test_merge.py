"""`promote merge` pushes only fast-forwards, verifies them, and stops cleanly when refused."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

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


def journal_of(fleet: Fleet) -> list[dict[str, Any]]:
    path = fleet.work / ".promote" / "journal.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def test_a_push_that_timed_out_but_landed_is_recorded_as_advanced(fleet: Fleet) -> None:
    # origin takes the push, then its post-receive hook outlives mirror_timeout_s: git's exit code says
    # failure, the mirror says the candidate. The mirror is the record.
    fleet.config("mirror_timeout_s = 1\n")
    fleet.hook("origin", "post-receive", "sleep 3\n")
    candidate = commit(fleet.work, "feature")

    code, report = run_json(fleet.work, "merge")

    assert {fleet.head(m) for m in fleet.mirrors} == {candidate}
    assert (code, report["verdict"]) == (0, "merged")
    origin = next(m for m in report["mirrors"] if m["name"] == "origin")
    assert (origin["status"], origin["after"]) == ("advanced", candidate)
    assert "timeout" in origin["reason"] and "holds the candidate" in origin["reason"]
    done = [e for e in journal_of(fleet) if e["op"] == "push" and e["mirror"] == "origin"]
    assert [(e["status"], e["after"]) for e in done] == [("advanced", candidate)]


def test_promote_state_dir_that_is_a_file_stops_the_merge_before_any_push(fleet: Fleet) -> None:
    commit(fleet.work, "feature")
    (fleet.work / ".promote").write_text("not a directory\n")
    before = fleet.refs()

    result = run(fleet.work, "merge")

    assert result.exit_code == 2
    assert fleet.refs() == before
    assert result.stdout == ""
    [line] = result.stderr.splitlines()
    assert line.startswith("promote: error: cannot use ") and ".promote" in line
    assert "Traceback" not in result.output


def test_unwritable_journal_stops_the_merge_before_any_push(fleet: Fleet) -> None:
    commit(fleet.work, "feature")
    # Tests run as root, whom chmod does not stop: a directory where the journal file goes does.
    (fleet.work / ".promote" / "journal.jsonl").mkdir(parents=True)
    before = fleet.refs()

    result = run(fleet.work, "merge")

    assert result.exit_code == 2
    assert fleet.refs() == before
    [line] = result.stderr.splitlines()
    assert line.startswith("promote: error: cannot write the journal ") and "journal.jsonl" in line


def promote_procs(tmp_path: Path) -> list[str]:
    """Live processes (not zombies) whose command line or working directory is under `tmp_path`."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue
        if state != "Z" and (str(tmp_path) in cmdline or cwd.startswith(str(tmp_path))):
            found.append(f"{pid} {cmdline}")
    return found


def start_merge(fleet: Fleet) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "promote", "merge"],
        cwd=fleet.work,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def wait_for(predicate: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl(PR_SET_PDEATHSIG) is Linux-only")
def test_kill_9_mid_push_leaves_no_git_behind_and_the_next_run_settles_the_push(fleet: Fleet, tmp_path: Path) -> None:
    hook = fleet.hook("origin", "pre-receive", "sleep 3\n")
    old = fleet.head("origin")
    candidate = commit(fleet.work, "feature")
    merging = start_merge(fleet)
    wait_for(lambda: any(e["op"] == "push-intent" for e in journal_of(fleet)), "the intent entry")
    time.sleep(0.7)  # into the hook: the pack is sent, receive-pack would update the ref after it

    merging.kill()
    merging.wait()
    # Well before the hook's 3 s are up: its receive-pack, the hook and git itself are all gone.
    wait_for(lambda: not promote_procs(tmp_path), "promote's children to die", timeout=1)
    time.sleep(3)  # past the hook's sleep: an orphaned receive-pack would have moved origin by now
    assert fleet.head("origin") == old, "no push may land after promote died"
    assert [e["op"] for e in journal_of(fleet)] == ["push-intent"]

    hook.unlink()
    result = run(fleet.work, "merge")

    assert result.exit_code == 0, result.output
    assert {fleet.head(m) for m in fleet.mirrors} == {candidate}
    journal = journal_of(fleet)
    intent, settled = journal[0], journal[1]
    assert (settled["op"], settled["id"], settled["status"], settled["after"]) == (
        "push", intent["id"], "interrupted", old,
    )  # fmt: skip
    assert "settled after an interrupted merge" in settled["reason"]
    assert "settled after an interrupted merge" in result.stderr


def test_a_mirror_that_already_holds_the_candidate_makes_a_blocked_merge_partial(fleet: Fleet) -> None:
    other = fleet.clone_of("laptop", "bob")
    commit(other, "laptop-only work")
    git(other, "push", "-q", "origin", "main")
    candidate = commit(fleet.work, "feature")
    git(fleet.work, "push", "-q", "mini", "main")  # someone pushed the candidate to mini by hand
    before = fleet.refs()

    code, report = run_json(fleet.work, "merge")

    assert fleet.refs() == before
    assert (code, report["verdict"]) == (4, "partial")
    status = {m["name"]: (m["status"], m["after"]) for m in report["mirrors"]}
    assert status["mini"] == ("up-to-date", candidate)
    assert status["laptop"][0] == "not-attempted"
    laptop = next(m for m in report["mirrors"] if m["name"] == "laptop")
    assert laptop["reason"] == "diverged: not pushed"


def test_two_merges_at_once_the_second_waits_or_names_the_holder(fleet: Fleet, monkeypatch: pytest.MonkeyPatch) -> None:
    fleet.hook("origin", "pre-receive", "sleep 2\n")
    candidate = commit(fleet.work, "feature")
    first = start_merge(fleet)
    lock = fleet.work / ".promote" / "lock"
    wait_for(lambda: lock.exists() and f'"pid": {first.pid}' in lock.read_text(), "the first merge's lock")

    monkeypatch.setenv("PROMOTE_LOCK_WAIT_S", "0.3")
    busy = run(fleet.work, "merge")
    assert busy.exit_code == 2
    [line] = busy.stderr.splitlines()
    assert f"pid {first.pid} (`promote merge`, started " in line and "waited 0.3 s" in line

    monkeypatch.setenv("PROMOTE_LOCK_WAIT_S", "20")
    waited = run(fleet.work, "merge")
    assert first.wait(timeout=20) == 0
    assert waited.exit_code == 0, waited.output
    assert waited.stdout.splitlines()[0] == f"main already at {candidate[:7]} on every mirror; nothing pushed"
    assert {fleet.head(m) for m in fleet.mirrors} == {candidate}


def linked_feature(fleet: Fleet) -> tuple[Path, str]:
    """A linked worktree on a new branch `feat` with one commit on top of main; (its path, that commit)."""
    linked = fleet.root / "linked"
    git(fleet.work, "worktree", "add", "-q", "-b", "feat", str(linked))
    return linked, commit(linked, "feature in linked")


def test_merge_from_a_linked_worktree_never_moves_main_under_edits_in_the_main_worktree(fleet: Fleet) -> None:
    linked, candidate = linked_feature(fleet)
    local = git(fleet.work, "rev-parse", "main")
    edited = fleet.work / "first.txt"
    edited.write_text("work in progress\n")

    result = run(linked, "merge", "--candidate", "feat")

    assert result.exit_code == 0, result.output
    assert {fleet.head(m) for m in fleet.mirrors} == {candidate}, "the mirrors still advance"
    assert git(fleet.work, "rev-parse", "main") == local
    assert edited.read_text() == "work in progress\n"
    assert git(fleet.work, "status", "--porcelain", "--untracked-files=no") == "M first.txt"
    assert (
        f"local main left at {local[:7]}: the worktree {fleet.work}, which has main checked out, has changes"
        in result.stdout.splitlines()
    )


def test_a_clean_worktree_that_has_main_checked_out_is_fast_forwarded_there(fleet: Fleet) -> None:
    linked, candidate = linked_feature(fleet)
    local = git(fleet.work, "rev-parse", "main")

    code, report = run_json(linked, "merge", "--candidate", "feat")

    assert (code, report["verdict"]) == (0, "merged")
    assert report["local"] == f"local main fast-forwarded {local[:7]} to {candidate[:7]}"
    assert git(fleet.work, "rev-parse", "main") == candidate
    # Moved by a merge in that worktree, not under it: its index and files are the candidate's.
    assert git(fleet.work, "status", "--porcelain", "--untracked-files=no") == ""
    assert (fleet.work / "feature_in_linked.txt").read_text() == "feature in linked"


def test_main_in_the_middle_of_a_rebase_in_another_worktree_is_left_alone(fleet: Fleet) -> None:
    linked, candidate = linked_feature(fleet)
    local = git(fleet.work, "rev-parse", "main")
    # An interactive rebase stopped to edit main's last commit: HEAD is detached there, main is in use.
    editor = fleet.root / "edit-every-commit"
    editor.write_text('#!/bin/sh\nsed "s/^pick/edit/" "$1" > "$1.new" && mv "$1.new" "$1"\n')
    editor.chmod(0o755)
    env = {**os.environ, "GIT_SEQUENCE_EDITOR": str(editor)}
    subprocess.run(["git", "rebase", "-q", "-i", "HEAD~1"], cwd=fleet.work, env=env, check=True, capture_output=True)

    result = run(linked, "merge", "--candidate", "feat")

    assert result.exit_code == 0, result.output
    assert {fleet.head(m) for m in fleet.mirrors} == {candidate}
    assert git(fleet.work, "rev-parse", "main") == local
    assert f"the worktree {fleet.work}, which has main checked out, is in the middle of a rebase" in result.stdout


def test_a_journal_line_of_non_utf8_bytes_is_skipped_by_merge_and_audit(fleet: Fleet) -> None:
    before = fleet.head("origin")
    assert before is not None
    commit(fleet.work, "feature")
    candidate = git(fleet.work, "rev-parse", "HEAD")
    journal = fleet.work / ".promote" / "journal.jsonl"
    journal.parent.mkdir()
    # A line of bytes that are not UTF-8 (a disk fault, another tool) before the journal's real entries.
    journal.write_bytes(b'{"op": "merge", "trunk": "\xff\xfe main"}\n')

    merged = run(fleet.work, "merge", "--json")

    assert merged.exit_code == 0, merged.output
    assert json.loads(merged.stdout)["verdict"] == "merged"
    assert all(fleet.head(m) == candidate for m in fleet.mirrors)
    audit = run(fleet.work, "audit", "--json")
    assert "Traceback" not in audit.output and "UnicodeDecodeError" not in audit.output
    gate = json.loads(audit.stdout)["gates"]["merged"]
    assert gate["status"] == "pass", gate
    assert gate["evidence"][0] == (
        f"main fast-forwarded `{before[:7]}` to `{candidate[:7]}` on origin, mini, station and laptop, no force"
    )


def symlinked_state(fleet: Fleet, outside: Path) -> dict[Path, bytes]:
    """`.promote/lock` and `.promote/journal.jsonl` as symlinks to files outside the clone; their bytes."""
    outside.mkdir()
    targets = {outside / "victim-lock": b"precious lock\n", outside / "victim-journal": b"precious journal\n"}
    for path, data in targets.items():
        path.write_bytes(data)
    state = fleet.work / ".promote"
    state.mkdir()
    (state / "lock").symlink_to(outside / "victim-lock")
    (state / "journal.jsonl").symlink_to(outside / "victim-journal")
    return targets


@pytest.mark.parametrize("command", ["merge", "test"])
def test_a_committed_promote_directory_of_symlinks_is_refused_and_never_written_through(
    fleet: Fleet, tmp_path: Path, command: str
) -> None:
    targets = symlinked_state(fleet, tmp_path / "outside")
    # As a pull request could carry them: committed (`git add -f`, past .promote's own ignore file).
    git(fleet.work, "add", "-f", ".promote/lock", ".promote/journal.jsonl")
    git(fleet.work, "commit", "-q", "-m", "state")
    before = fleet.refs()

    result = run(fleet.work, command)

    assert result.exit_code == 2, result.output
    assert result.stderr == (
        f"promote: error: {fleet.work}/.promote/journal.jsonl is tracked by git; .promote/ is promote's own state "
        "and must not be committed (`git rm -r --cached .promote`)\n"
    )
    assert {p: p.read_bytes() for p in targets} == targets
    assert fleet.refs() == before


def test_a_symlink_in_the_state_directory_is_refused_not_followed(fleet: Fleet, tmp_path: Path) -> None:
    targets = symlinked_state(fleet, tmp_path / "outside")
    before = fleet.refs()

    result = run(fleet.work, "merge")

    assert result.exit_code == 2, result.output
    [line] = result.stderr.splitlines()
    assert line == f"promote: error: cannot open the lock {fleet.work}/.promote/lock: Too many levels of symbolic links"
    assert {p: p.read_bytes() for p in targets} == targets
    assert fleet.refs() == before
