"""The only module that talks to git: a thin, typed wrapper over GitPython."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import git as gitpython

from promote.errors import GitError
from promote.redact import redact

# Plain, untranslated messages that never wait for a password on a terminal nobody watches.
_ENV = {"GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C", "LANG": "C"}


@dataclass(frozen=True)
class Commit:
    """One commit as shown to people: enough to recognise it, nothing to act on."""

    sha: str
    short: str
    subject: str
    author: str


@dataclass(frozen=True)
class Outcome:
    """What one git command did: its exit status and its (redacted) messages."""

    status: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.status == 0

    @property
    def reason(self) -> str:
        """The most telling line of git's complaint, for a one-line report."""
        lines = [ln.strip() for ln in self.stderr.splitlines() if ln.strip()]
        for line in lines:
            if line.startswith(("fatal:", "error:", "Timeout:", "remote:", "ssh:")):
                return line
        return lines[0] if lines else f"git exited with status {self.status}"


class Repo:
    """A local git repository, addressed by its working tree."""

    def __init__(self, path: Path) -> None:
        try:
            self._repo = gitpython.Repo(path, search_parent_directories=True)
        except (gitpython.InvalidGitRepositoryError, gitpython.NoSuchPathError):
            raise GitError(f"{path} is not inside a git repository") from None
        if self._repo.bare or self._repo.working_tree_dir is None:
            raise GitError(f"{path} is a bare repository; run promote in a working clone")
        self.root = Path(self._repo.working_tree_dir)

    def run(self, *args: str, timeout: float | None = None) -> Outcome:
        """Run `git ARGS...` (arguments as a list, never a shell); never raises on failure."""
        status, out, err = self._repo.git.execute(
            ["git", *args],
            with_extended_output=True,
            with_exceptions=False,
            kill_after_timeout=timeout,
            env={**os.environ, **_ENV},
            istream=subprocess.DEVNULL,
        )
        return Outcome(int(status), str(out), redact(str(err)))

    def out(self, *args: str) -> str:
        """Run a git command that must succeed and return its stdout."""
        result = self.run(*args)
        if not result.ok:
            raise GitError(f"git {' '.join(args[:2])} failed in {self.root}: {result.reason}")
        return result.stdout

    # -- refs and commits ------------------------------------------------------

    def resolve(self, ref: str) -> str | None:
        """The commit `ref` names, or None when it names none."""
        result = self.run("rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}")
        return result.stdout.strip() if result.ok else None

    def has_commit(self, sha: str) -> bool:
        return self.run("cat-file", "-e", f"{sha}^{{commit}}").ok

    def is_ancestor(self, ancestor: str, descendant: str) -> bool:
        result = self.run("merge-base", "--is-ancestor", ancestor, descendant)
        if result.status not in (0, 1):
            raise GitError(f"cannot compare {ancestor[:7]} and {descendant[:7]}: {result.reason}")
        return result.ok

    def count(self, include: str, exclude: str) -> int:
        """How many commits `include` has that `exclude` lacks."""
        return int(self.out("rev-list", "--count", include, f"^{exclude}").strip())

    def commits(self, include: str, exclude: str, *, limit: int = 50) -> list[Commit]:
        """The newest `limit` commits `include` has that `exclude` lacks."""
        text = self.out(
            "log",
            f"--max-count={limit}",
            "--format=%H%x1f%h%x1f%s%x1f%an <%ae>%x1e",
            include,
            f"^{exclude}",
        )
        found = []
        for record in text.split("\x1e"):
            fields = record.strip("\n").split("\x1f")
            if len(fields) == 4:
                found.append(Commit(*fields))
        return found

    def changed_files(self, old: str, new: str) -> list[str]:
        """Paths whose content differs between two commits' trees."""
        return [p for p in self.out("diff", "--name-only", "-z", "--no-renames", old, new).split("\0") if p]

    def short(self, sha: str) -> str:
        return self.out("rev-parse", "--short", sha).strip()

    def commit_date(self, sha: str) -> str:
        return self.out("show", "-s", "--format=%cI", sha).strip()

    # -- repository state ------------------------------------------------------

    def is_shallow(self) -> bool:
        return self.out("rev-parse", "--is-shallow-repository").strip() == "true"

    def current_branch(self) -> str | None:
        """The checked-out branch, or None when HEAD is detached."""
        result = self.run("symbolic-ref", "--quiet", "--short", "HEAD")
        return result.stdout.strip() if result.ok else None

    def branches(self) -> list[str]:
        return self.out("for-each-ref", "--format=%(refname:short)", "refs/heads").split()

    def remotes(self) -> list[str]:
        return self.out("remote").split()

    def remote_url(self, remote: str) -> str:
        return redact(self.out("remote", "get-url", "--", remote).strip())

    def is_clean(self) -> bool:
        """True when tracked files have no staged or unstaged change (untracked files are fine)."""
        return not self.out("status", "--porcelain", "--untracked-files=no").strip()

    # -- talking to mirrors ----------------------------------------------------

    def ls_remote(self, remote: str, branch: str, *, timeout: float) -> Outcome:
        return self.run(
            "ls-remote",
            "--heads",
            "--end-of-options",
            remote,
            f"refs/heads/{branch}",
            timeout=timeout,
        )

    def fetch(self, remote: str, branch: str, dest: str, *, timeout: float) -> Outcome:
        """Fetch a mirror's branch into a private ref of ours (never a user's branch)."""
        # The private ref is ours alone; dropping it first lets a rewritten mirror
        # branch land there without a forced (`+`) refspec. `--refmap=` stops git from
        # also moving the user's remote-tracking branch as it otherwise would.
        self.run("update-ref", "-d", dest)
        return self.run(
            "fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--no-auto-gc", "--refmap=",
            "--no-recurse-submodules", "--end-of-options",
            remote, f"refs/heads/{branch}:{dest}",
            timeout=timeout,
        )  # fmt: skip

    def push(self, remote: str, sha: str, branch: str, *, timeout: float) -> Outcome:
        """Push `sha` to `branch` on `remote`; git itself refuses anything but a fast-forward."""
        return self.run(
            "push", "--porcelain", "--end-of-options",
            remote, f"{sha}:refs/heads/{branch}",
            timeout=timeout,
        )  # fmt: skip

    def update_ref(self, ref: str, new: str, old: str) -> bool:
        """Move a local ref from exactly `old` to `new`; False if it was not at `old`."""
        return self.run("update-ref", "-m", "promote: fast-forward", ref, new, old).ok

    def merge_ff_only(self, sha: str) -> Outcome:
        return self.run("merge", "--ff-only", "--quiet", sha)
