"""Find the configuration and the repository it governs, and check they fit together."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from promote.config import Config, load_config
from promote.core.errors import ConfigError, GitError, UsageError
from promote.core.git import Repo
from promote.core.redact import redact


@dataclass(frozen=True)
class Workspace:
    """A repository and its validated configuration."""

    repo: Repo
    config: Config
    urls: dict[str, str]
    # What git is given for each mirror configured by URL (the URL itself); other mirrors are remote names.
    targets: dict[str, str] = field(default_factory=dict)

    def mirror_urls(self) -> dict[str, str]:
        """The configured mirrors, in configuration order, with their (redacted) URLs."""
        return {m: self.urls[m] for m in self.config.mirrors or ()}

    def target(self, mirror: str) -> str:
        """What git reads and pushes for `mirror`: its configured URL, or the remote of that name."""
        return self.targets.get(mirror, mirror)


def open_workspace(start: Path, config_path: Path | None = None) -> Workspace:
    """Load the config for `start` (or `config_path`) and validate it against the repository."""
    config = load_config(start, config_path)
    repo = Repo(config.root)
    if repo.shallow:
        raise GitError(
            f"{repo.root} is a shallow clone: ancestry cannot be verified; run `git fetch --unshallow` first"
        )
    urls = repo.remote_urls()
    remotes = sorted(urls)
    key = f"{config.prefix}.mirrors"
    if config.mirrors is None:
        if not remotes:
            raise ConfigError(f"{config.path}: {key}: no mirrors configured and the repository has no remotes")
        config = replace(config, mirrors=tuple(remotes))
    targets = dict(config.mirror_urls)
    for mirror in config.mirrors or ():
        if mirror not in remotes and mirror not in targets:
            known = ", ".join(remotes) or "none"
            raise ConfigError(f"{config.path}: {key}: {mirror!r} is not a git remote of {repo.root} (remotes: {known})")
    # A mirror given by URL is that URL, whatever a remote of the same name points at.
    urls.update((name, redact(url)) for name, url in targets.items())
    return Workspace(repo, config, urls, targets)


def resolve_candidate(ws: Workspace, candidate: str | None) -> tuple[str, str]:
    """The candidate commit and the name it was given; by default the local trunk's head."""
    repo, trunk = ws.repo, ws.config.trunk
    if candidate is not None:
        sha = repo.resolve(candidate)
        if sha is None:
            raise UsageError(f"--candidate {candidate!r} names no commit in {repo.root}")
        return sha, candidate
    current = repo.current_branch()
    if current is None:
        raise UsageError(f"HEAD is detached in {repo.root}; pass --candidate REF to say which commit to promote")
    sha = repo.resolve(f"refs/heads/{trunk}")
    if sha is None:
        if current == trunk:
            raise UsageError(f"branch {trunk!r} has no commits yet (unborn) in {repo.root}")
        raise UsageError(f"no local branch {trunk!r} in {repo.root}; create it or pass --candidate REF")
    return sha, trunk


def require_checked_out(repo: Repo, candidate: str) -> str:
    """The commit `candidate` names, which must be the one checked out: tests run the working tree, not a ref."""
    sha = repo.resolve(candidate)
    if sha is None:
        raise UsageError(f"--candidate {candidate!r} names no commit in {repo.root}")
    head = repo.resolve("HEAD")
    if sha != head:
        at = head[:7] if head else "no commit"
        raise UsageError(
            f"--candidate {candidate!r} is {sha[:7]} but {repo.root} has {at} checked out: "
            "the tests run the working tree, so check the candidate out first"
        )
    return sha
