"""Publish the evidence page into the docs repository: write, commit, and (if asked) push without force."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from promote.config import DocsConfig
from promote.errors import UsageError
from promote.git import Repo


def page_path(docs: DocsConfig, *, run_id: str, commit: str) -> str:
    """The page's path inside the docs repository, from the configured pattern."""
    date = datetime.now(timezone.utc).strftime("%Y-%m-%d")
    path = docs.page.format(date=date, commit=commit[:7], run=run_id)
    if Path(path).is_absolute() or ".." in Path(path).parts:
        raise UsageError(f"[promote.docs] page: {path!r} must be a relative path inside the docs repository")
    return path


def preflight(docs: DocsConfig, *, run_id: str, commit: str) -> str:
    """The page's path, once the docs repository is known to take it; checked before any test runs."""
    repo = Repo(docs.repo)
    rel = page_path(docs, run_id=run_id, commit=commit)
    if repo.out("status", "--porcelain", "--untracked-files=all", "--", rel).strip():
        raise UsageError(
            f"{repo.root / rel} has uncommitted changes in the docs repository; commit or stash them first"
        )
    return rel


def publish(docs: DocsConfig, markdown: str, *, run_id: str, commit: str, verdict: str, push: bool) -> str:
    """Commit the page in the docs repository; refuse when the target has uncommitted changes."""
    repo = Repo(docs.repo)
    rel = preflight(docs, run_id=run_id, commit=commit)
    target = repo.root / rel
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(markdown, encoding="utf-8")
    repo.out("add", "--", rel)
    message = f"promote: evidence for {commit[:7]} ({verdict}), run {run_id}"
    if not repo.run("diff", "--cached", "--quiet", "--", rel).ok:
        # Only the page: whatever else is staged in the docs repository stays staged and uncommitted.
        repo.out("commit", "--quiet", "-m", message, "--", rel)
    done = f"committed {rel} in {repo.root}"
    if push:
        branch = repo.current_branch()
        if branch is None:
            raise UsageError(f"{repo.root}: HEAD is detached; cannot push the evidence commit")
        pushed = repo.run("push", "--porcelain", "--end-of-options", "origin", f"HEAD:refs/heads/{branch}")
        if not pushed.ok:
            raise UsageError(f"push of the evidence commit from {repo.root} was refused: {pushed.reason}")
        done += f"; pushed to origin/{branch}, no force"
    return done
