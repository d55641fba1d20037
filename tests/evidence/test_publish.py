"""`promote audit --publish` writes only inside the docs repository and reports a commit only once it is read back."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers.cli import run
from tests.helpers.docs import docs_state
from tests.helpers.gitrepos import Fleet, commit, git, make_fleet
from tests.helpers.packages import write_package

# What the workspace's one package runs: its gates then all pass ("pass") or Tested fails ("fail"); with no
# package at all ("undecided") Tested has nothing to decide.
BODIES = {"pass": "def test_ok():\n    pass\n", "fail": "def test_red():\n    assert False\n"}

# What an audit with `page = "docs/evidence/latest.md"` commits: the page, its evidence JSON and the index.
PUBLISHED = "docs/evidence/latest.md, docs/evidence/latest.json, docs/evidence/index.md"


def docs_fleet(tmp_path: Path, page: str = "docs/evidence/latest.md", gates: str = "undecided") -> tuple[Fleet, Path]:
    fleet = make_fleet(tmp_path, names=("origin",))
    docs = tmp_path / "docs"
    docs.mkdir()
    git(docs, "init", "-q", "-b", "main")
    commit(docs, "docs", {"docs/index.md": "# Docs\n"})
    body = f'[promote.docs]\nrepo = "{docs}"\npage = "{page}"\n'
    if gates in BODIES:
        write_package(fleet.work, "pkg", {"test_a.py": BODIES[gates]})
        body = f'deployed = "main"\n[[promote.packages]]\nname = "pkg"\npath = "pkg"\n{body}'
    fleet.config(body)
    commit(fleet.work, "docs config")
    git(fleet.work, "push", "-q", "origin", "main")
    return fleet, docs


def nothing_ran(fleet: Fleet) -> bool:
    """No run was started: no run directory, no history."""
    state = fleet.work / ".promote"
    return not (state / "runs").exists() or not any((state / "runs").iterdir())


def test_publish_commits_the_page_and_says_which_commit(tmp_path: Path) -> None:
    fleet, docs = docs_fleet(tmp_path)
    result = run(fleet.work, "audit", "--publish")
    head = git(docs, "rev-parse", "HEAD")
    assert f"published: committed {PUBLISHED} in {docs} ({head[:7]})" in result.stdout, result.output
    assert git(docs, "log", "-1", "--format=%s").startswith("promote: evidence for ")
    assert git(docs, "show", "HEAD:docs/evidence/latest.md").startswith("---\npromote_evidence: page\n")
    # One commit holds the page and the index that lists it.
    assert git(docs, "show", "--name-only", "--format=", "HEAD").split() == [
        "docs/evidence/index.md",
        "docs/evidence/latest.json",
        "docs/evidence/latest.md",
    ]
    assert "](latest.md)" in git(docs, "show", "HEAD:docs/evidence/index.md")


def test_publish_keeps_the_index_current_and_never_overwrites_a_persons_index(tmp_path: Path) -> None:
    fleet, docs = docs_fleet(tmp_path, page="docs/evidence/{run}.md")
    run(fleet.work, "audit", "--publish")
    run(fleet.work, "audit", "--publish")
    index = git(docs, "show", "HEAD:docs/evidence/index.md")
    rows = [line for line in index.splitlines() if line.startswith("| [")]
    # Newest first: run ids sort by the time they started.
    assert len(rows) == 2 and rows[0].split("](")[1] > rows[1].split("](")[1], rows
    # A page someone wrote where the index would go stays theirs.
    commit(docs, "our own index", {"docs/evidence/index.md": "# Our evidence\n"})
    third = run(fleet.work, "audit", "--publish")
    assert "published: committed docs/evidence/" in third.stdout and "index.md" not in third.stdout, third.output
    assert git(docs, "show", "HEAD:docs/evidence/index.md") == "# Our evidence"


@pytest.mark.parametrize("where", ["page", "directory"])
def test_publish_refuses_a_symlink_in_the_docs_repository(tmp_path: Path, where: str) -> None:
    fleet, docs = docs_fleet(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / "latest.md"
    victim.write_text("precious\n")
    if where == "page":
        (docs / "docs/evidence").mkdir(parents=True)
        (docs / "docs/evidence/latest.md").symlink_to(victim)
    else:
        (docs / "docs/evidence").symlink_to(outside, target_is_directory=True)
    commit(docs, "a link")
    before = git(docs, "rev-parse", "HEAD")

    result = run(fleet.work, "audit", "--publish")

    assert result.exit_code == 2, result.output
    assert "is a symlink in the docs repository; refusing to publish through it" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert victim.read_text() == "precious\n" and sorted(p.name for p in outside.iterdir()) == ["latest.md"]
    assert git(docs, "rev-parse", "HEAD") == before
    assert "published" not in result.stdout


def test_publish_refuses_a_page_inside_git_metadata(tmp_path: Path) -> None:
    fleet, docs = docs_fleet(tmp_path, page=".git/hooks/{run}")
    result = run(fleet.work, "audit", "--publish")
    assert result.exit_code == 2, result.output
    assert "promote.docs.page: expected a relative path pattern" in result.stderr
    assert "(it lies inside git's own metadata (.git))" in result.stderr
    assert not [p for p in (docs / ".git/hooks").iterdir() if not p.name.endswith(".sample")]


@pytest.mark.parametrize(
    ("page", "problem"),
    [
        ("docs/evidence/", "it names a directory, not a file"),
        ("docs/evidence/\\u0000{run}.md", "it holds the control character '\\x00'"),
        ("/srv/evidence/{run}.md", "it is an absolute path"),
        ("theme/.git/{run}.md", "it lies inside git's own metadata (.git)"),
    ],
)
def test_a_page_template_that_cannot_name_a_file_is_refused_before_anything_runs(
    tmp_path: Path, page: str, problem: str
) -> None:
    fleet, docs = docs_fleet(tmp_path, page=page, gates="pass")
    before = docs_state(docs)
    result = run(fleet.work, "audit", "--publish")
    assert result.exit_code == 2, result.output
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert "promote.docs.page: expected a relative path pattern" in result.stderr and f"({problem})" in result.stderr
    assert nothing_ran(fleet) and docs_state(docs) == before


def test_a_page_that_is_a_directory_of_the_docs_repository_is_refused_before_anything_runs(tmp_path: Path) -> None:
    fleet, docs = docs_fleet(tmp_path, page="docs/evidence", gates="pass")
    commit(docs, "evidence so far", {"docs/evidence/2026-01-01.md": "# old\n"})
    before = docs_state(docs)
    result = run(fleet.work, "audit", "--publish")
    assert result.exit_code == 2, result.output
    assert (
        result.stderr == f"promote: error: {docs}/docs/evidence is a directory in the docs repository; "
        "[promote.docs] page must name a file\n"
    )
    assert nothing_ran(fleet) and docs_state(docs) == before


@pytest.mark.parametrize("kind", ["clone", "submodule"])
def test_a_page_inside_a_nested_repository_is_refused_before_anything_runs(tmp_path: Path, kind: str) -> None:
    fleet, docs = docs_fleet(tmp_path, page="theme/evidence/{run}.md", gates="pass")
    theme = tmp_path / "theme-src"
    theme.mkdir()
    git(theme, "init", "-q", "-b", "main")
    commit(theme, "theme", {"layout.html": "<html></html>\n"})
    if kind == "clone":
        # A cloned theme, not a submodule: the docs repository sees only an untracked directory.
        git(docs, "clone", "-q", str(theme), "theme")
    else:
        git(docs, "submodule", "add", "-q", str(theme), "theme")
        git(docs, "commit", "-q", "-m", "theme as a submodule")
    before, theme_before = docs_state(docs), docs_state(docs / "theme")

    result = run(fleet.work, "audit", "--publish")

    assert result.exit_code == 2, result.output
    assert result.stderr.count("\n") == 1
    assert f"lies inside {docs}/theme, a git repository of its own within the docs repository" in result.stderr
    assert "already committed" not in result.output
    assert nothing_ran(fleet) and docs_state(docs) == before and docs_state(docs / "theme") == theme_before
    assert not (docs / "theme" / "evidence").exists()


@pytest.mark.parametrize(("gates", "code"), [("pass", 4), ("fail", 1), ("undecided", 3)])
def test_a_refusing_pre_commit_hook_leaves_the_docs_repository_as_it_was(tmp_path: Path, gates: str, code: int) -> None:
    fleet, docs = docs_fleet(tmp_path, gates=gates)
    hook = docs / ".git" / "hooks" / "pre-commit"
    hook.write_text("#!/bin/sh\necho 'docs-lint: evidence pages need a reviewer' >&2\nexit 1\n")
    hook.chmod(0o755)
    # Someone's work in progress in the docs repository: staged, and not the publisher's to commit.
    (docs / "notes.md").write_text("draft\n")
    git(docs, "add", "notes.md")
    before = docs_state(docs)

    refused = run(fleet.work, "audit", "--publish")

    # The gates' own code when one fails or is undecided; 4 when they all pass but the page did not land.
    assert refused.exit_code == code, refused.output
    cause = f"git commit in the docs repository {docs} was refused (exit 1): docs-lint: evidence pages need a reviewer"
    assert f"published: not published ({cause}); nothing was committed and {docs} is as it was" in refused.stdout
    assert refused.stderr.splitlines()[-1].startswith(f"promote: error: publish: not published ({cause})")
    assert docs_state(docs) == before
    assert not (docs / "docs" / "evidence").exists()

    # The hook fixed, the same day's rerun publishes; the staged notes stay staged and out of the commit.
    hook.unlink()
    again = run(fleet.work, "audit", "--publish")
    assert again.exit_code == {4: 0}.get(code, code), again.output
    head = git(docs, "rev-parse", "HEAD")
    assert f"published: committed {PUBLISHED} in {docs} ({head[:7]})" in again.stdout
    assert git(docs, "show", "--name-only", "--format=", "HEAD").split() == [
        "docs/evidence/index.md",
        "docs/evidence/latest.json",
        "docs/evidence/latest.md",
    ]
    assert git(docs, "status", "--porcelain") == "A  notes.md"


def test_a_commit_that_does_not_hold_the_page_as_written_is_not_published(tmp_path: Path) -> None:
    fleet, docs = docs_fleet(tmp_path, gates="pass")
    # A hook that swaps the page's content in the index being committed: a commit lands, but not with the page.
    hook = docs / ".git" / "hooks" / "pre-commit"
    hook.write_text(
        "#!/bin/sh\nblob=$(echo tampered | git hash-object -w --stdin)\n"
        "git update-index --cacheinfo 100644,$blob,docs/evidence/latest.md\n"
    )
    hook.chmod(0o755)

    result = run(fleet.work, "audit", "--publish")

    assert result.exit_code == 4, result.output
    head = git(docs, "rev-parse", "HEAD")
    assert f"read back and does not count (HEAD {head} does not hold docs/evidence/latest.md)" in result.stdout
    assert git(docs, "show", "HEAD:docs/evidence/latest.md") == "tampered"
    assert "published: committed" not in result.stdout


def test_a_page_the_docs_repository_ignores_is_refused_before_anything_runs(tmp_path: Path) -> None:
    fleet, docs = docs_fleet(tmp_path, gates="pass")
    commit(docs, "ignore generated pages", {".gitignore": "docs/evidence/\n"})
    before = docs_state(docs)
    result = run(fleet.work, "audit", "--publish")
    assert result.exit_code == 2, result.output
    assert result.stderr == (
        f"promote: error: docs/evidence/latest.md is ignored in the docs repository {docs} (.gitignore); "
        "it cannot be committed\n"
    )
    assert nothing_ran(fleet) and docs_state(docs) == before


def test_a_refused_push_after_the_commit_is_not_a_pass(tmp_path: Path) -> None:
    fleet, docs = docs_fleet(tmp_path, gates="pass")
    mirror = tmp_path / "docs-origin.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(mirror))
    git(docs, "remote", "add", "origin", str(mirror))
    git(docs, "push", "-q", "origin", "main")
    hook = mirror / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'docs are frozen for the release' >&2\nexit 1\n")
    hook.chmod(0o755)

    result = run(fleet.work, "audit", "--publish", "--push")

    assert result.exit_code == 4, result.output
    head = git(docs, "rev-parse", "HEAD")
    assert f"committed {PUBLISHED} in {docs} ({head[:7]}); push to origin refused: " in (result.stdout)
    assert "docs are frozen for the release" in result.stderr
    assert git(mirror, "rev-parse", "main") != head


def test_publish_ignores_an_exported_git_dir_and_commits_into_the_docs_repository(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fleet, docs = docs_fleet(tmp_path, gates="pass")
    product_git = fleet.work / ".git"
    product_main, product_index = git(fleet.work, "rev-parse", "main"), (product_git / "index").read_bytes()
    docs_head = git(docs, "rev-parse", "HEAD")
    # What a caller (or a git hook promote runs in) exports: every one points at the product repository.
    for name, value in {
        "GIT_DIR": product_git, "GIT_WORK_TREE": fleet.work, "GIT_INDEX_FILE": product_git / "index",
        "GIT_OBJECT_DIRECTORY": product_git / "objects", "GIT_COMMON_DIR": product_git, "GIT_NAMESPACE": "elsewhere",
        "GIT_CEILING_DIRECTORIES": tmp_path,
    }.items():  # fmt: skip
        monkeypatch.setenv(name, str(value))

    result = run(fleet.work, "audit", "--publish")
    monkeypatch.undo()

    assert result.exit_code == 0, result.output
    head = git(docs, "rev-parse", "HEAD")
    assert head != docs_head and git(docs, "rev-parse", "HEAD~1") == docs_head
    assert f"published: committed {PUBLISHED} in {docs} ({head[:7]})" in result.stdout
    assert git(docs, "show", "--name-only", "--format=", "HEAD").split() == [
        "docs/evidence/index.md",
        "docs/evidence/latest.json",
        "docs/evidence/latest.md",
    ]
    # The product repository's checked-out main and its index did not move.
    assert git(fleet.work, "rev-parse", "main") == product_main
    assert (product_git / "index").read_bytes() == product_index
    assert git(fleet.work, "status", "--porcelain", "--untracked-files=no") == ""


def audit_in_the_docs_hook(tmp_path: Path) -> tuple[Fleet, Path, Path, dict[str, str], subprocess.Popen[str]]:
    """`audit --publish` in its own process group, waited for until the docs pre-commit hook (a sleep) runs."""
    fleet, docs = docs_fleet(tmp_path, gates="pass")
    started = tmp_path / "hook-started"
    hook = docs / ".git" / "hooks" / "pre-commit"
    hook.write_text(f"#!/bin/sh\ntouch {started}\nsleep 30\n")
    hook.chmod(0o755)
    before = docs_state(docs)

    audit = subprocess.Popen(
        [sys.executable, "-m", "promote", "audit", "--publish"], cwd=fleet.work,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while not started.exists():
        assert audit.poll() is None and time.monotonic() < deadline, audit.communicate()
        time.sleep(0.05)
    return fleet, docs, hook, before, audit


def test_sigterm_during_the_docs_pre_commit_hook_leaves_the_docs_repository_as_it_was(tmp_path: Path) -> None:
    fleet, docs, hook, before, audit = audit_in_the_docs_hook(tmp_path)
    audit.send_signal(signal.SIGTERM)
    out, err = audit.communicate(timeout=30)

    assert audit.returncode == 130, (out, err)
    assert "promote: interrupted" in err and "Traceback" not in err
    time.sleep(0.5)  # a commit left running would land now
    assert docs_state(docs) == before
    assert not (docs / "docs" / "evidence").exists()
    assert not list((docs / ".git").glob("promote-publish.index*"))
    # The hook gone, the next publish is not wedged by anything the interrupted one left.
    hook.unlink()
    again = run(fleet.work, "audit", "--publish")
    assert again.exit_code == 0, again.output
    assert f"published: committed {PUBLISHED}" in again.stdout


def test_a_publisher_killed_past_catching_leaves_leftovers_the_next_publish_recognises_as_its_own(
    tmp_path: Path,
) -> None:
    fleet, docs, hook, before, audit = audit_in_the_docs_hook(tmp_path)
    # SIGKILL to the whole group: nothing of promote's runs on this way out, the hook dies with it.
    os.killpg(audit.pid, signal.SIGKILL)
    audit.communicate(timeout=30)
    assert (docs / "docs" / "evidence" / "latest.md").is_file()  # what the killed publisher left
    # Someone's own change beside it is theirs, and stays.
    (docs / "notes.md").write_text("mine\n")
    hook.unlink()

    again = run(fleet.work, "audit", "--publish")

    assert again.exit_code == 0, again.output
    assert f"published: committed {PUBLISHED}" in again.stdout
    assert git(docs, "status", "--porcelain", "--untracked-files=all") == "?? notes.md"
    assert git(docs, "rev-parse", "HEAD~1") == before["head"]
    assert not list((docs / ".git").glob("promote-publish.pending*"))
