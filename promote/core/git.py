"""The only module that talks to git: every command as an argument list, never through a shell."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from promote.core.errors import GitError
from promote.core.process import Finished, Telling, run_bounded
from promote.core.redact import redact

# Plain, untranslated messages that never wait for a password on a terminal nobody watches.
_ENV = {"GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C", "LANG": "C"}
# Variables that choose a repository, index or object store other than the one a command names: exported by
# the caller (or by git, when promote runs in a hook) they would point promote's git at the wrong repository,
# committing evidence into the product or reading another clone's refs. Every git call names its repository
# by its directory, so these are dropped (git's own `rev-parse --local-env-vars`, plus the namespace).
REPOSITORY_VARS = frozenset({
    "GIT_DIR", "GIT_WORK_TREE", "GIT_IMPLICIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_COMMON_DIR", "GIT_NAMESPACE", "GIT_PREFIX", "GIT_INTERNAL_SUPER_PREFIX",
    "GIT_SHALLOW_FILE", "GIT_GRAFT_FILE", "GIT_NO_REPLACE_OBJECTS", "GIT_REPLACE_REF_BASE", "GIT_QUARANTINE_PATH",
})  # fmt: skip


def git_environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """promote's environment for git: the caller's, less what selects a repository, plus `extra` and _ENV."""
    base = {k: v for k, v in os.environ.items() if k not in REPOSITORY_VARS}
    return {**base, **(extra or {}), **_ENV}


@dataclass(frozen=True)
class Commit:
    """One commit as shown to people: enough to recognise it, nothing to act on."""

    sha: str
    short: str
    subject: str
    author: str

    def to_json(self) -> dict[str, str]:
        return {"sha": self.sha, "short": self.short, "subject": self.subject, "author": self.author}


@dataclass(frozen=True)
class Blob:
    """A file of a committed tree: its path, the object that holds its bytes, and their size."""

    path: str
    oid: str
    size: int


@dataclass(frozen=True)
class GrepHit:
    """One line `git grep` found: the file, its 1-based line number, and the line."""

    path: str
    line: int
    text: str


@dataclass(frozen=True)
class Worktree:
    """One working tree of a repository, as `git worktree list --porcelain` describes it."""

    path: Path
    head: str | None
    # The branch checked out there (a full ref), or the branch a rebase or bisection there is working on.
    branch: str | None
    bare: bool = False
    # HEAD is detached there while a rebase or bisection of `branch` is under way.
    busy: bool = False


# git's own complaints start so; the first of them is the cause, later ones its consequences.
TELLING = Telling(
    starts=("fatal:", "error:", "timeout:", "remote:", "ssh:"), first=True, silent="git exited with status {status}"
)


def run_git(
    cwd: Path, *args: str, timeout: float | None = None, remote: bool = False, env: Mapping[str, str] | None = None
) -> Finished:
    """Run `git ARGS...` in `cwd`; never raises on failure; on timeout, kill git and what it started.

    `remote` commands (talking to a mirror) also die, with everything they started, when promote dies:
    an orphaned push would otherwise still move the mirror with nobody left to record it.
    `env` adds variables (e.g. `GIT_INDEX_FILE`) to promote's own environment, less the caller's
    repository-selecting variables (see REPOSITORY_VARS): the repository is always the one at `cwd`.
    """
    done = run_bounded(
        ["git", *args], cwd=cwd, timeout=timeout, env=git_environment(env), die_with_promote=remote, telling=TELLING
    )
    if done.status is None:
        return replace(done, stdout="", output=b"", stderr=f"timeout: git {args[0]} did not complete in {timeout:g} s")
    return done


class Repo:
    """A local git repository, addressed by its working tree."""

    def __init__(self, path: Path) -> None:
        if not path.is_dir():
            raise GitError(f"{path} is not a directory")
        probe = run_git(path, "rev-parse", "--is-bare-repository", "--is-shallow-repository", "--show-toplevel")
        if not probe.ok:
            if "not a git repository" in probe.stderr:
                raise GitError(f"{path} is not inside a git repository")
            if "work tree" in probe.stderr:
                raise GitError(f"{path} is a bare repository; run promote in a working clone")
            raise GitError(f"cannot read the repository at {path}: {probe.reason}")
        _, shallow, top = probe.stdout.splitlines()[:3]
        self.root = Path(top)
        self.shallow = shallow == "true"

    def run(
        self, *args: str, timeout: float | None = None, remote: bool = False, env: Mapping[str, str] | None = None
    ) -> Finished:
        return run_git(self.root, *args, timeout=timeout, remote=remote, env=env)

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

    def is_ancestor(self, ancestor: str, descendant: str) -> bool:
        result = self.run("merge-base", "--is-ancestor", ancestor, descendant)
        if result.status not in (0, 1):
            raise GitError(f"cannot compare {ancestor[:7]} and {descendant[:7]}: {result.reason}")
        return result.ok

    def left_right(self, left: str, right: str) -> tuple[int, int] | None:
        """(commits only `left` has, commits only `right` has); None when either is not here."""
        result = self.run("rev-list", "--left-right", "--count", f"{left}...{right}", "--")
        if not result.ok:
            return None
        only_left, only_right = result.stdout.split()
        return int(only_left), int(only_right)

    def commits(self, include: str, exclude: str, *, limit: int = 50) -> list[Commit]:
        """The newest `limit` commits `include` has that `exclude` lacks."""
        fmt = "--format=%H%x1f%h%x1f%s%x1f%an <%ae>%x1e"
        text = self.out("log", f"--max-count={limit}", fmt, include, f"^{exclude}", "--")
        found = []
        for record in text.split("\x1e"):
            fields = record.strip("\n").split("\x1f")
            if len(fields) == 4:
                found.append(Commit(*fields))
        return found

    def changed_files(self, old: str, new: str) -> list[str]:
        """Paths whose content differs between two commits' trees."""
        return [p for p in self.out("diff", "--name-only", "-z", "--no-renames", old, new, "--").split("\0") if p]

    def commit_date(self, sha: str) -> str:
        return self.out("show", "-s", "--format=%cI", sha, "--").strip()

    def tree_files(self, ref: str) -> list[str]:
        """Every file path in the committed tree of `ref`."""
        return [p for p in self.out("ls-tree", "-r", "-z", "--name-only", "--end-of-options", ref).split("\0") if p]

    def tracked_files(self) -> list[str]:
        """Every file path git tracks in the working tree (the index), untracked and ignored files left out."""
        return [p for p in self.out("ls-files", "-z").split("\0") if p]

    def blobs(self, ref: str, folder: str) -> list[Blob]:
        """The regular files directly in `folder` ("" for the top) of `ref`'s tree, read by one `git ls-tree`."""
        where = ["--", folder.rstrip("/") + "/"] if folder else []
        found = []
        for record in self.out("ls-tree", "-l", "-z", "--end-of-options", ref, *where).split("\0"):
            meta, _, path = record.partition("\t")
            fields = meta.split()
            if len(fields) == 4 and fields[0] in ("100644", "100755") and fields[1] == "blob":
                found.append(Blob(path, fields[2], int(fields[3])))
        return found

    def read_blobs(self, oids: list[str]) -> dict[str, bytes]:
        """The bytes of each object of `oids`, all read by one `git cat-file --batch`."""
        if not oids:
            return {}
        done = run_bounded(
            ["git", "cat-file", "--batch"], cwd=self.root, env=git_environment(), telling=TELLING,
            stdin="".join(f"{oid}\n" for oid in oids).encode(),
        )  # fmt: skip
        if not done.ok:
            raise GitError(f"git cat-file failed in {self.root}: {done.reason}")
        out, pos, found = done.output, 0, {}
        while (end := out.find(b"\n", pos)) >= 0:
            header = out[pos:end].split()  # `OID TYPE SIZE`, then SIZE bytes and a newline; or `NAME missing`
            pos = end + 1
            if len(header) == 3:
                size = int(header[2])
                found[header[0].decode()] = out[pos : pos + size]
                pos += size + 1
        return found

    def grep(self, ref: str, patterns: list[str], *, fixed: bool) -> list[GrepHit]:
        """Lines of `ref`'s tree matching any pattern (fixed strings, or extended regular expressions)."""
        flags = ["-F"] if fixed else ["-E"]
        args = [arg for p in patterns for arg in ("-e", p)]
        result = self.run("grep", "-z", "-n", "-I", "--no-color", *flags, *args, ref, "--")
        if result.status == 1:  # git grep's "no line matched"
            return []
        if not result.ok:
            raise GitError(f"git grep failed in {self.root}: {result.reason}")
        hits = []
        prefix = f"{ref}:"
        for record in result.stdout.split("\n"):
            fields = record.split("\0", 2)
            if len(fields) == 3 and fields[0].startswith(prefix) and fields[1].isdigit():
                hits.append(GrepHit(fields[0][len(prefix) :], int(fields[1]), fields[2]))
        return hits

    # -- repository state ------------------------------------------------------

    def current_branch(self) -> str | None:
        """The checked-out branch, or None when HEAD is detached."""
        result = self.run("symbolic-ref", "--quiet", "--short", "HEAD")
        return result.stdout.strip() if result.ok else None

    def branches(self) -> list[str]:
        return self.out("for-each-ref", "--format=%(refname:short)", "refs/heads").split()

    def remote_urls(self) -> dict[str, str]:
        """Every remote with its URL (credentials redacted), in one git call."""
        result = self.run("config", "--get-regexp", r"^remote\..*\.url$")
        urls: dict[str, str] = {}
        for line in result.stdout.splitlines():
            key, _, url = line.partition(" ")
            # Remote names may contain dots: strip exactly "remote." and ".url".
            urls.setdefault(key[len("remote.") : -len(".url")], redact(url))
        return urls

    def remotes(self) -> list[str]:
        return sorted(self.remote_urls())

    def worktrees(self) -> list[Worktree]:
        """Every working tree of this repository (the main one and each linked one), with what it has checked out."""
        # -z (git 2.36+) so that a path holding a newline is still one path; older git lists without it.
        listed, sep = self.run("worktree", "list", "--porcelain", "-z"), "\0"
        if not listed.ok:
            listed, sep = self.run("worktree", "list", "--porcelain"), "\n"
        found = []
        for record in listed.stdout.split(sep * 2):
            fields = dict(line.partition(" ")[::2] for line in record.split(sep) if line)
            if "worktree" in fields:
                path = Path(fields["worktree"])
                branch, busy = fields.get("branch"), False
                if branch is None and "bare" not in fields and path.is_dir():
                    branch = _busy_branch(path)
                    busy = branch is not None
                found.append(Worktree(path, fields.get("HEAD"), branch, "bare" in fields, busy))
        return found

    def is_clean(self) -> bool:
        """True when tracked files have no staged or unstaged change (untracked files are fine)."""
        return not self.out("status", "--porcelain", "--untracked-files=no").strip()

    # -- talking to mirrors ----------------------------------------------------

    def ls_remote(self, remote: str, branch: str, *, timeout: float) -> Finished:
        args = ("ls-remote", "--heads", "--end-of-options", remote, f"refs/heads/{branch}")
        return self.run(*args, timeout=timeout, remote=True)

    def fetch(self, remote: str, branch: str, dest: str, *, timeout: float) -> Finished:
        """Fetch a mirror's branch into a private ref of ours (never a user's branch)."""
        # The private ref is ours alone; dropping it first lets a rewritten mirror
        # branch land there without a forced (`+`) refspec. `--refmap=` stops git from
        # also moving the user's remote-tracking branch as it otherwise would.
        self.run("update-ref", "-d", dest)
        return self.run(
            "fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--no-auto-gc", "--refmap=",
            "--no-recurse-submodules", "--end-of-options",
            remote, f"refs/heads/{branch}:{dest}",
            timeout=timeout, remote=True,
        )  # fmt: skip

    def push(self, remote: str, sha: str, branch: str, *, timeout: float) -> Finished:
        """Push `sha` to `branch` on `remote`; git itself refuses anything but a fast-forward."""
        return self.run(
            "push", "--porcelain", "--end-of-options",
            remote, f"{sha}:refs/heads/{branch}",
            timeout=timeout, remote=True,
        )  # fmt: skip

    def update_ref(self, ref: str, new: str, old: str) -> bool:
        """Move a local ref from exactly `old` to `new`; False if it was not at `old`."""
        return self.run("update-ref", "-m", "promote: fast-forward", ref, new, old).ok

    def merge_ff_only(self, sha: str) -> Finished:
        return self.run("merge", "--ff-only", "--quiet", sha)


def _busy_branch(worktree: Path) -> str | None:
    """The branch a rebase or bisection under way in `worktree` (detached meanwhile) will come back to."""
    paths = run_git(worktree, "rev-parse", "--git-path", "rebase-merge/head-name", "--git-path",
                    "rebase-apply/head-name", "--git-path", "BISECT_START")  # fmt: skip
    for i, line in enumerate(paths.stdout.splitlines() if paths.ok else []):
        try:
            name = (worktree / line).read_text(encoding="utf-8", errors="replace").strip()
        except OSError:
            continue
        # BISECT_START holds the short name it started from; a rebase's head-name the full ref.
        return name if i < 2 else f"refs/heads/{name}"
    return None
