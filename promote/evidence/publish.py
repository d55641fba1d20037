"""Publish a set of files into the docs repository as one commit, or not at all; push it (if asked) without force.

The commit is built in an index of its own (`GIT_INDEX_FILE`), so the docs repository's index is touched only
once the commit has landed and been read back; until then a refusal (a hook, a full disk, a lock) takes back
the files written into the work tree and leaves the repository as it was.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from promote.core.errors import PromoteError
from promote.core.git import Repo
from promote.core.lock import hold_file, wait_default
from promote.core.process import Finished
from promote.core.vocab import PublishStatus, PushStatus
from promote.evidence import publish_leftovers as leftovers
from promote.evidence.docs_target import check_target, page_path, preflight, uncommitted

__all__ = ["PublishResult", "page_path", "preflight", "publish"]

# Held in the docs repository's git directory while one publisher commits: two audits into one docs
# repository take turns instead of meeting at git's index.lock or HEAD.lock.
LOCK_NAME = "promote-publish.lock"
INDEX_NAME = "promote-publish.index"
# A docs hook may lint the whole site; the other publisher waits for it rather than give up.
LOCK_WAIT_S = 120.0
COMMIT_TIMEOUT_S = 600.0
# `git status` and editors hold the docs repository's index.lock for moments at a time.
INDEX_WAIT_S = 10.0


@dataclass(frozen=True)
class PublishResult:
    """What publishing did, as read back from the docs repository."""

    status: PublishStatus
    repo: Path
    files: tuple[str, ...]
    # The commit that holds every file (committed, unchanged), read back; or the one that should have (unverified).
    commit: str | None = None
    # Why nothing was published (refused), or what the read-back found missing (unverified): git's telling line.
    cause: str | None = None
    push: PushStatus | None = None
    branch: str | None = None
    push_cause: str | None = None
    # Committed, but the docs repository's own index could not be brought up to date afterwards.
    index_cause: str | None = None
    # Refused, and what could not be put back as it was (read back after taking the files back).
    left_behind: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """True when a commit read back holds every file and any push asked for landed."""
        return self.status in ("committed", "unchanged") and self.push != "refused"

    def to_json(self) -> dict[str, object]:
        return {
            "status": self.status,
            "repo": str(self.repo),
            "files": list(self.files),
            "commit": self.commit,
            "cause": self.cause,
            "push": self.push,
            "branch": self.branch,
            "push_cause": self.push_cause,
            "index_cause": self.index_cause,
            "left_behind": list(self.left_behind),
        }


class _Refused(PromoteError):
    """A step of the publishing transaction failed; what was written is taken back."""


def publish(
    docs_repo: Path, files: Mapping[str, str] | Callable[[], Mapping[str, str]], message: str, *, push: bool = False
) -> PublishResult:
    """Commit `files` (paths relative to the docs repository -> text) in one commit, or none; never raises.

    `files` may be a function, called once the lock is held: what it reads of the docs repository (an index of
    the evidence pages) then includes every other publisher's commit.
    """
    rels: tuple[str, ...] = () if callable(files) else tuple(files)
    try:
        repo = Repo(docs_repo)
        lock = Path(repo.out("rev-parse", "--path-format=absolute", "--git-common-dir").strip()) / LOCK_NAME
        wait = wait_default() if "PROMOTE_LOCK_WAIT_S" in os.environ else LOCK_WAIT_S
        with hold_file(lock, "promote audit --publish", wait_s=wait):
            if callable(files):
                files = files()
                rels = tuple(files)
            result = _commit(repo, files, message)
            return _push(repo, result) if push and result.ok else result
    except (PromoteError, OSError) as e:
        return PublishResult("refused", docs_repo, rels, cause=_line(e))


def _line(e: BaseException) -> str:
    if isinstance(e, OSError) and e.strerror:
        return f"{e.strerror}: {e.filename}" if e.filename else e.strerror
    return str(e)


def _commit(repo: Repo, files: Mapping[str, str], message: str) -> PublishResult:
    rels = tuple(files)
    targets = {rel: check_target(repo, rel) for rel in rels}
    pending = leftovers.note_path(repo)
    leftovers.recover(repo, pending)
    dirty = uncommitted(repo, list(rels))
    if dirty is not None:
        raise _Refused(f"{repo.root / dirty} has uncommitted changes in the docs repository; commit or stash them")
    before = repo.resolve("HEAD")
    index = Path(repo.out("rev-parse", "--path-format=absolute", "--git-path", INDEX_NAME).strip())
    undo = _Undo()
    try:
        leftovers.note(pending, {rel: text.encode("utf-8") for rel, text in files.items()})
        for rel, text in files.items():
            undo.write(targets[rel], text.encode("utf-8"))
        blobs = {rel: _hash(repo, rel) for rel in rels}
        if before is not None and all(_blob_at(repo, before, rel) == blob for rel, blob in blobs.items()):
            leftovers.done(pending)
            return PublishResult("unchanged", repo.root, rels, commit=before)
        _stage(repo, index, before, blobs)
        done = repo.run(
            "commit", "--quiet", "-m", message, env={"GIT_INDEX_FILE": str(index)}, timeout=COMMIT_TIMEOUT_S
        )
        after = repo.resolve("HEAD")
        if after == before:
            status = "timed out" if done.status is None else f"exit {done.status}"
            raise _Refused(f"git commit in the docs repository {repo.root} was refused ({status}): {done.reason}")
    except (PromoteError, OSError) as e:
        return _taken_back(repo, rels, before, undo, _line(e), pending)
    except BaseException:
        # Interrupted (SIGTERM, Ctrl-C), the commit killed with its hook: all or nothing on this way out too.
        _taken_back(repo, rels, before, undo, "interrupted", pending)
        raise
    finally:
        index.unlink(missing_ok=True)
    result = _read_back(repo, before, after, blobs)
    leftovers.done(pending)
    return result


def _taken_back(
    repo: Repo, rels: tuple[str, ...], before: str | None, undo: _Undo, cause: str, pending: Path
) -> PublishResult:
    """Refused: the files written are taken back, and the repository read again to see that it is as it was."""
    left = undo.take_back()
    try:
        dirty = uncommitted(repo, list(rels))
    except PromoteError as e:
        left.append(str(e))
    else:
        left += [dirty] if dirty is not None else []
    if repo.resolve("HEAD") != before:
        left.append(f"HEAD is no longer {before}")
    leftovers.done(pending)
    return PublishResult("refused", repo.root, rels, cause=cause, left_behind=tuple(left))


def _hash(repo: Repo, rel: str) -> str:
    """The blob of the file as written, stored as `git add` would store it (the path's attributes and filters)."""
    return repo.out("hash-object", "-w", "--", rel).strip()


def _blob_at(repo: Repo, commit: str, rel: str) -> str | None:
    found = repo.run("rev-parse", "--verify", "--quiet", f"{commit}:{rel}")
    return found.stdout.strip() if found.ok else None


def _stage(repo: Repo, index: Path, before: str | None, blobs: Mapping[str, str]) -> None:
    """The commit's index: HEAD's tree plus the files, in `index`; the repository's own index is not touched."""
    env = {"GIT_INDEX_FILE": str(index)}
    # Ours alone while the publish lock is held: a lock file left by a publisher killed mid-commit is a leftover
    # of promote's own, not another git at work, and would refuse every later publish.
    index.with_name(index.name + ".lock").unlink(missing_ok=True)
    index.unlink(missing_ok=True)
    steps = [
        ("read-tree", before) if before is not None else ("read-tree", "--empty"),
        ("update-index", "--add", *(a for rel, b in blobs.items() for a in ("--cacheinfo", f"100644,{b},{rel}"))),
    ]
    for step in steps:
        done = repo.run(*step, env=env)
        if not done.ok:
            raise _Refused(f"cannot prepare the commit in the docs repository {repo.root}: {done.reason}")


def _read_back(repo: Repo, before: str | None, after: str | None, blobs: Mapping[str, str]) -> PublishResult:
    """Published only when HEAD is a new commit that holds every file as written and changes nothing else."""
    rels = tuple(blobs)
    missing = [rel for rel, blob in blobs.items() if after is None or _blob_at(repo, after, rel) != blob]
    if after is None or missing:
        return PublishResult(
            "unverified", repo.root, rels, commit=after, cause=f"HEAD {after} does not hold {', '.join(missing)}"
        )
    # Someone else's commit landing between `before` and ours would be undone by our tree (built on `before`).
    parent = _parent(repo, after)
    others = (
        sorted(set(repo.changed_files(parent, after)) - set(rels)) if parent is not None and parent != before else []
    )
    if others:
        cause = f"HEAD {after} also changes {', '.join(others)} of {parent}, which landed during the commit"
        return PublishResult("unverified", repo.root, rels, commit=after, cause=cause)
    # The commit holds the files; the repository's index catches up (git status would show them deleted).
    update = _update_index(repo, rels)
    return PublishResult("committed", repo.root, rels, commit=after, index_cause=None if update.ok else update.reason)


def _update_index(repo: Repo, rels: tuple[str, ...]) -> Finished:
    """Stage the committed files in the repository's own index, waiting out another git's brief index.lock."""
    deadline = time.monotonic() + INDEX_WAIT_S
    while True:
        update = repo.run("update-index", "--add", "--", *rels)
        if update.ok or "index.lock" not in update.stderr or time.monotonic() >= deadline:
            return update
        time.sleep(0.05)


def _parent(repo: Repo, commit: str) -> str | None:
    found = repo.run("rev-parse", "--verify", "--quiet", f"{commit}^1")
    return found.stdout.strip() if found.ok else None


def _push(repo: Repo, result: PublishResult) -> PublishResult:
    branch = repo.current_branch()
    if branch is None:
        return replace(result, push="refused", push_cause=f"HEAD is detached in {repo.root}")
    pushed = repo.run("push", "--porcelain", "--end-of-options", "origin", f"HEAD:refs/heads/{branch}")
    if not pushed.ok:
        return replace(result, push="refused", branch=branch, push_cause=pushed.reason)
    return replace(result, push="pushed", branch=branch)


class _Undo:
    """The work tree as it was before publishing: files put back (or removed), directories made removed."""

    def __init__(self) -> None:
        self.files: list[tuple[Path, bytes | None]] = []
        self.dirs: list[Path] = []

    def write(self, target: Path, data: bytes) -> None:
        for d in [d for d in reversed(target.parents) if not d.exists()]:
            try:
                d.mkdir()
            except OSError as e:
                raise _Refused(f"cannot make the directory {d}: {e.strerror or e}") from None
            self.dirs.append(d)
        self.files.append((target, target.read_bytes() if target.exists() else None))
        try:
            # O_NOFOLLOW: a symlink put in place since the check is refused by the kernel rather than followed.
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o644)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
        except OSError as e:
            raise _Refused(f"cannot write {target}: {e.strerror or e}") from None

    def take_back(self) -> list[str]:
        """Put everything back; what could not be, each as `path: why`."""
        failed = []
        for target, old in reversed(self.files):
            try:
                if old is None:
                    target.unlink(missing_ok=True)
                else:
                    with open(target, "r+b") as f:
                        f.write(old)
                        f.truncate()
            except OSError as e:
                failed.append(f"{target}: {e.strerror or e}")
        for d in reversed(self.dirs):
            try:
                d.rmdir()
            except OSError as e:
                failed.append(f"{d}: {e.strerror or e}")
        return failed
