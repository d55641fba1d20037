"""Find the configuration and the repository it governs, and check they fit together."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from promote.config import Config, load_config
from promote.core.errors import ConfigError, GitError, UsageError
from promote.core.git import Repo


@dataclass(frozen=True)
class Workspace:
    """A repository and its validated configuration."""

    repo: Repo
    config: Config
    urls: dict[str, str]

    def mirror_urls(self) -> dict[str, str]:
        """The configured mirrors, in configuration order, with their (redacted) URLs."""
        return {m: self.urls[m] for m in self.config.mirrors or ()}


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
    for mirror in config.mirrors or ():
        if mirror not in remotes:
            known = ", ".join(remotes) or "none"
            raise ConfigError(f"{config.path}: {key}: {mirror!r} is not a git remote of {repo.root} (remotes: {known})")
    return Workspace(repo, config, urls)


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
