"""`promote audit --publish` writes only inside the docs repository and reports a commit only once it is read back."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.cli import run
from tests.helpers.gitrepos import Fleet, commit, git, make_fleet


def docs_fleet(tmp_path: Path, page: str = "docs/evidence/latest.md") -> tuple[Fleet, Path]:
    fleet = make_fleet(tmp_path, names=("origin",))
    docs = tmp_path / "docs"
    docs.mkdir()
    git(docs, "init", "-q", "-b", "main")
    commit(docs, "docs", {"docs/index.md": "# Docs\n"})
    fleet.config(f'[promote.docs]\nrepo = "{docs}"\npage = "{page}"\n')
    commit(fleet.work, "docs config")
    git(fleet.work, "push", "-q", "origin", "main")
    return fleet, docs


def test_publish_commits_the_page_and_says_which_commit(tmp_path: Path) -> None:
    fleet, docs = docs_fleet(tmp_path)
    result = run(fleet.work, "audit", "--publish")
    head = git(docs, "rev-parse", "HEAD")
    assert f"published: committed docs/evidence/latest.md in {docs} ({head[:7]})" in result.stdout, result.output
    assert git(docs, "log", "-1", "--format=%s").startswith("promote: evidence for ")
    assert git(docs, "show", "HEAD:docs/evidence/latest.md").startswith("#")


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
