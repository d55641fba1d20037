"""The state of a docs repository that publishing could change, to compare before and after."""

from __future__ import annotations

from pathlib import Path

from tests.helpers.gitrepos import git


def docs_state(docs: Path) -> dict[str, str]:
    """HEAD, the index's entries and the work tree (untracked and ignored files too)."""
    return {
        "head": git(docs, "rev-parse", "HEAD"),
        "index": git(docs, "ls-files", "--stage"),
        # --no-optional-locks: looking must not rewrite the index (it could not, on a full disk).
        "status": git(docs, "--no-optional-locks", "status", "--porcelain", "--untracked-files=all", "--ignored"),
    }
