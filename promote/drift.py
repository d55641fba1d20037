"""Compare the candidate with what production serves (the `deployed` ref)."""

from __future__ import annotations

from dataclasses import dataclass

from promote import paths
from promote.config import Config
from promote.errors import ConfigError
from promote.git import Commit, Repo

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

    @property
    def status(self) -> str:
        """same | test-only | undeployed | behind."""
        if self.trunk_behind:
            return "behind"
        if self.sha == self.candidate:
            return "same"
        return "test-only" if self.test_only else "undeployed"

    @property
    def binary_unchanged(self) -> bool:
        """True when what runs in production is built from the same non-test files as the candidate."""
        return self.status in ("same", "test-only")

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
            "test_only": self.test_only,
            "binary_unchanged": self.binary_unchanged,
        }


def measure(repo: Repo, config: Config, candidate: str) -> Drift | None:
    """The drift between `candidate` and the configured deployed ref; None when none is configured."""
    if config.deployed is None:
        return None
    sha = repo.resolve(config.deployed)
    if sha is None:
        raise ConfigError(
            f"{config.path}: {config.prefix}.deployed: {config.deployed!r} names no commit in "
            f"{repo.root} (fetch it, or name a branch, tag or sha that exists here)"
        )
    changed = tuple(repo.changed_files(sha, candidate)) if sha != candidate else ()
    counts = repo.left_right(sha, candidate)
    if counts is None:
        raise ConfigError(f"{config.path}: {config.prefix}.deployed: cannot compare {config.deployed!r} with trunk")
    trunk_behind, undeployed = counts
    return Drift(
        ref=config.deployed,
        sha=sha,
        candidate=candidate,
        served_since=repo.commit_date(sha),
        trunk_behind=trunk_behind,
        undeployed=undeployed,
        undeployed_commits=tuple(repo.commits(candidate, sha, limit=COMMITS_LISTED)) if undeployed else (),
        changed_files=changed,
        test_only=all(paths.matches(f, config.test_paths) for f in changed),
    )
