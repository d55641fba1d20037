"""Publish the evidence page into the docs repository: write, commit, and (if asked) push without force."""

from __future__ import annotations

import os
from datetime import datetime, timezone
from pathlib import Path

from promote.config import DocsConfig
from promote.core.errors import UsageError
from promote.core.git import Repo


def page_path(docs: DocsConfig, *, run_id: str, commit: str) -> str:
    """The page's path inside the docs repository, from the configured pattern."""
    date = datetime.now(timezone.utc).strftime("%Y-%m-%d")
    path = docs.page.format(date=date, commit=commit[:7], run=run_id)
    parts = Path(path).parts
    if Path(path).is_absolute() or ".." in parts or not parts or parts[0].lower() == ".git":
        raise UsageError(f"[promote.docs] page: {path!r} must be a relative path inside the docs repository")
    return path


def inside(root: Path, rel: str) -> Path:
    """`root / rel`, refusing a symlink on the way (the page or any directory) and anything that leaves `root`.

    A symlink in the docs repository would have the page written wherever it points, outside the repository.
    """
    target = root
    for part in Path(rel).parts:
        target = target / part
        if target.is_symlink():
            raise UsageError(f"{target} is a symlink in the docs repository; refusing to publish through it")
    resolved = target.resolve()
    if not resolved.is_relative_to(root.resolve()):
        raise UsageError(f"{target} resolves to {resolved}, outside the docs repository {root}; refusing to publish")
    return target


def preflight(docs: DocsConfig, *, run_id: str, commit: str) -> str:
    """The page's path, once the docs repository is known to take it; checked before any test runs."""
    repo = Repo(docs.repo)
    rel = page_path(docs, run_id=run_id, commit=commit)
    inside(repo.root, rel)
    if repo.out("status", "--porcelain", "--untracked-files=all", "--", rel).strip():
        raise UsageError(
            f"{repo.root / rel} has uncommitted changes in the docs repository; commit or stash them first"
        )
    return rel


def _write(target: Path, text: str) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    # O_NOFOLLOW: a symlink put in place since the check is refused by the kernel rather than followed.
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)


def publish(docs: DocsConfig, markdown: str, *, run_id: str, commit: str, verdict: str, push: bool) -> str:
    """Commit the page in the docs repository; refuse when the target has uncommitted changes."""
    repo = Repo(docs.repo)
    rel = preflight(docs, run_id=run_id, commit=commit)
    target = inside(repo.root, rel)
    _write(target, markdown)
    # Checked again after the directories were made: none of them may have been a link either.
    inside(repo.root, rel)
    before = repo.resolve("HEAD")
    repo.out("add", "--", rel)
    message = f"promote: evidence for {commit[:7]} ({verdict}), run {run_id}"
    if repo.run("diff", "--cached", "--quiet", "--", rel).ok:
        done = f"{rel} in {repo.root} is unchanged (already committed); nothing to commit"
    else:
        # Only the page: whatever else is staged in the docs repository stays staged and uncommitted.
        repo.out("commit", "--quiet", "-m", message, "--", rel)
        done = _committed(repo, before, rel)
    if push:
        branch = repo.current_branch()
        if branch is None:
            raise UsageError(f"{repo.root}: HEAD is detached; cannot push the evidence commit")
        pushed = repo.run("push", "--porcelain", "--end-of-options", "origin", f"HEAD:refs/heads/{branch}")
        if not pushed.ok:
            raise UsageError(f"push of the evidence commit from {repo.root} was refused: {pushed.reason}")
        done += f"; pushed to origin/{branch}, no force"
    return done


def _committed(repo: Repo, before: str | None, rel: str) -> str:
    """The report of the commit, once read back: HEAD moved and holds the page."""
    after = repo.resolve("HEAD")
    if after is None or after == before or not repo.run("cat-file", "-e", f"HEAD:{rel}").ok:
        raise UsageError(f"the evidence commit of {rel} in {repo.root} cannot be read back; nothing was committed")
    return f"committed {rel} in {repo.root} ({after[:7]})"
