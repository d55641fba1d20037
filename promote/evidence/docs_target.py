"""Where a published file may go in the docs repository: a file of that repository, reached through no link."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path, PurePosixPath

from promote.config import DocsConfig
from promote.config.pagepath import path_problem
from promote.core.errors import UsageError
from promote.core.git import Repo
from promote.evidence.publish_leftovers import is_leftover


def page_path(docs: DocsConfig, *, run_id: str, commit: str) -> str:
    """The page's path inside the docs repository, from the configured pattern."""
    date = datetime.now(timezone.utc).strftime("%Y-%m-%d")
    path = docs.page.format(date=date, commit=commit[:7], run=run_id)
    problem = path_problem(path)
    if problem is not None:
        raise UsageError(
            f"[promote.docs] page: {path!r} must be a relative path inside the docs repository ({problem})"
        )
    # git names paths with single slashes and no `.` parts; so does every check below.
    return PurePosixPath(path).as_posix()


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


def _nested_repository(repo: Repo, rel: str) -> str | None:
    """The directory on `rel`'s way that is a repository of its own (a clone or a submodule), if any.

    `git add` adds nothing under such a directory, and a commit of the docs repository never holds the file.
    """
    ancestors = [p.as_posix() for p in reversed(PurePosixPath(rel).parents) if p.as_posix() != "."]
    for d in ancestors:
        if (repo.root / d / ".git").exists() or (repo.root / d / ".git").is_symlink():
            return d
    # A submodule not checked out has no `.git` yet, only its gitlink (mode 160000) in the index.
    staged = repo.run("ls-files", "--stage", "-z", "--", *ancestors).stdout if ancestors else ""
    for entry in staged.split("\0"):
        meta, _, path = entry.partition("\t")
        if meta.startswith("160000 ") and path in ancestors:
            return path
    return None


def check_target(repo: Repo, rel: str) -> Path:
    """The file `rel` names in the docs repository, once it is known a commit there can hold it."""
    target = inside(repo.root, rel)
    nested = _nested_repository(repo, rel)
    if nested is not None:
        raise UsageError(
            f"{rel} lies inside {repo.root / nested}, a git repository of its own within the docs repository "
            f"{repo.root}; no commit of the docs repository can hold it"
        )
    if target.is_dir():
        raise UsageError(f"{target} is a directory in the docs repository; [promote.docs] page must name a file")
    if repo.run("check-ignore", "-q", "--", rel).ok:
        raise UsageError(f"{rel} is ignored in the docs repository {repo.root} (.gitignore); it cannot be committed")
    return target


def uncommitted(repo: Repo, rels: list[str]) -> str | None:
    """The first of `rels` with a change the docs repository has not committed (staged, unstaged or untracked)."""
    # --no-optional-locks: reading must not rewrite the index (it cannot, on a full disk, and it is not ours).
    status = repo.run("--no-optional-locks", "status", "--porcelain", "-z", "--untracked-files=all", "--", *rels)
    if not status.ok:
        raise UsageError(f"cannot read the status of the docs repository {repo.root}: {status.reason}")
    changed = [entry[3:] for entry in status.stdout.split("\0") if len(entry) > 3]
    return changed[0] if changed else None


def preflight(docs: DocsConfig, *, run_id: str, commit: str, push: bool = False) -> str:
    """The page's path, once the docs repository is known to take it; checked before anything runs."""
    repo = Repo(docs.repo)
    rel = page_path(docs, run_id=run_id, commit=commit)
    check_target(repo, rel)
    if uncommitted(repo, [rel]) is not None and not is_leftover(repo, rel):
        # A killed publisher's leftover is put back under the publish lock; anything else is someone's work.
        raise UsageError(
            f"{repo.root / rel} has uncommitted changes in the docs repository; commit or stash them first"
        )
    if push and repo.current_branch() is None:
        raise UsageError(f"{repo.root}: HEAD is detached; cannot push the evidence commit")
    return rel
