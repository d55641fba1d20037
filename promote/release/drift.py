"""Compare the candidate with what production serves (the `deployed` ref, or `deployed_command`'s answer)."""

from __future__ import annotations

from dataclasses import dataclass

from promote.config import Config
from promote.core import paths
from promote.core.errors import ConfigError
from promote.core.external import failure, run_command
from promote.core.git import Commit, Repo
from promote.core.vocab import DriftStatus, Undecided, binary_unchanged

# Listed by name in reports; counts are always exact.
COMMITS_LISTED = 20


@dataclass(frozen=True)
class Drift:
    """How far the candidate is from the deployed commit, and whether the difference matters."""

    ref: str
    sha: str
    candidate: str
    served_since: str
    trunk_behind: int
    undeployed: int
    undeployed_commits: tuple[Commit, ...]
    changed_files: tuple[str, ...]
    test_only: bool
    source: str = "ref"  # "ref", or the deployed_command that named the commit
    served_since_source: str = "commit date"
    # The changed files that match no `test_paths` pattern: what a sentence about non-test changes may list.
    non_test_files: tuple[str, ...] = ()

    @property
    def status(self) -> DriftStatus:
        """same | test-only | undeployed | behind."""
        if self.trunk_behind:
            return "behind"
        if self.sha == self.candidate:
            return "same"
        return "test-only" if self.test_only else "undeployed"

    @property
    def binary_unchanged(self) -> bool:
        """True when what runs in production is built from the same non-test files as the candidate."""
        return binary_unchanged(self.status)

    def to_json(self) -> dict[str, object]:
        return {
            "deployed": self.ref,
            "deployed_sha": self.sha,
            "served_since": self.served_since,
            "status": self.status,
            "trunk_behind": self.trunk_behind,
            "undeployed": self.undeployed,
            "undeployed_commits": [c.to_json() for c in self.undeployed_commits],
            "changed_files": list(self.changed_files),
            "non_test_files": list(self.non_test_files),
            "test_only": self.test_only,
            "binary_unchanged": self.binary_unchanged,
            "source": self.source,
            "served_since_source": self.served_since_source,
            "reason": None,
        }


@dataclass(frozen=True)
class DriftUndecided:
    """The deployed commit could not be learned: its command failed, timed out, or named no commit here."""

    ref: str
    reason: str
    source: str
    sha: None = None
    status: Undecided = "undecided"
    binary_unchanged: bool = False

    def to_json(self) -> dict[str, object]:
        return {
            "deployed": self.ref,
            "deployed_sha": None,
            "served_since": None,
            "status": self.status,
            "trunk_behind": None,
            "undeployed": None,
            "undeployed_commits": [],
            "changed_files": [],
            "non_test_files": [],
            "test_only": None,
            "binary_unchanged": False,
            "source": self.source,
            "served_since_source": None,
            "reason": self.reason,
        }


def measure(repo: Repo, config: Config, candidate: str) -> Drift | DriftUndecided | None:
    """The drift between `candidate` and the deployed commit; None when nothing deployed is configured."""
    if config.deployed_command is not None:
        result = run_command(config.deployed_command, cwd=config.root, timeout=config.deployed_timeout_s)
        source = f"`{result.shown}`"
        error = failure(result)
        if error is not None:
            return DriftUndecided("deployed_command", error, source)
        lines = [ln.strip() for ln in result.stdout.splitlines() if ln.strip()]
        answer = lines[0] if len(lines) == 1 and len(lines[0].split()) == 1 else None
        if answer is None:
            return DriftUndecided("deployed_command", f"{source} printed {result.stdout[:80]!r}, not one ref", source)
        sha = repo.resolve(answer)
        if sha is None:
            why = f"{source} printed {answer!r}, which names no commit in {repo.root} (fetch it first)"
            return DriftUndecided(answer, why, source)
        return compare(repo, config, answer, sha, candidate, source=source)
    if config.deployed is None:
        return None
    found = deployed_ref(repo, config.deployed)
    if found is None:
        raise ConfigError(
            f"{config.path}: {config.prefix}.deployed: {config.deployed!r} names no commit in "
            f"{repo.root} (fetch it, or name a branch, tag or sha that exists here)"
        )
    return compare(repo, config, found[0], found[1], candidate, source="ref")


def deployed_ref(repo: Repo, name: str) -> tuple[str, str] | None:
    """(the ref used, its sha): `name` itself, else a remote-tracking branch of that name, origin's first.

    A CI clone has no local branch but the deployed branch as fetched (`origin/deployed`); the ref shown
    says which one was read.
    """
    sha = repo.resolve(name)
    if sha is not None:
        return name, sha
    for remote in sorted(repo.remote_urls(), key=lambda r: (r != "origin", r)):
        sha = repo.resolve(f"refs/remotes/{remote}/{name}")
        if sha is not None:
            return f"{remote}/{name}", sha
    return None


def compare(repo: Repo, config: Config, ref: str, sha: str, candidate: str, *, source: str) -> Drift:
    """How `candidate` differs from the deployed commit `sha` (named `ref`)."""
    changed = tuple(repo.changed_files(sha, candidate)) if sha != candidate else ()
    non_test = tuple(f for f in changed if not paths.matches(f, config.test_paths))
    counts = repo.left_right(sha, candidate)
    if counts is None:
        raise ConfigError(f"{config.path}: {config.prefix}.deployed: cannot compare {ref!r} with trunk")
    trunk_behind, undeployed = counts
    since, since_source = _served_since(repo, config, sha)
    return Drift(
        ref=ref,
        sha=sha,
        candidate=candidate,
        served_since=since,
        trunk_behind=trunk_behind,
        undeployed=undeployed,
        undeployed_commits=tuple(repo.commits(candidate, sha, limit=COMMITS_LISTED)) if undeployed else (),
        changed_files=changed,
        test_only=not non_test,
        source=source,
        served_since_source=since_source,
        non_test_files=non_test,
    )


def _served_since(repo: Repo, config: Config, sha: str) -> tuple[str, str]:
    """(when production started serving `sha`, where that date came from)."""
    if config.deployed_since_command is None:
        return repo.commit_date(sha), "commit date"
    result = run_command(config.deployed_since_command, cwd=config.root, timeout=config.deployed_timeout_s)
    lines = [ln.strip() for ln in result.stdout.splitlines() if ln.strip()]
    error = failure(result)
    if error is None and lines:
        return lines[0], f"`{result.shown}`"
    why = error or f"`{result.shown}` printed nothing"
    return repo.commit_date(sha), f"commit date ({why})"
