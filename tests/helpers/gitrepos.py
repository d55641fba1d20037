"""Build real working repositories with bare mirrors, and read their refs back."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from pathlib import Path

GIT_ENV = {
    "GIT_AUTHOR_NAME": "Ada Author",
    "GIT_AUTHOR_EMAIL": "ada@example.com",
    "GIT_COMMITTER_NAME": "Ada Author",
    "GIT_COMMITTER_EMAIL": "ada@example.com",
    "GIT_AUTHOR_DATE": "2026-01-01T00:00:00+00:00",
    "GIT_COMMITTER_DATE": "2026-01-01T00:00:00+00:00",
    "GIT_CONFIG_NOSYSTEM": "1",
}


def git(cwd: Path, *args: str, check: bool = True) -> str:
    """Run git in `cwd` and return its stdout (stripped)."""
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    if check and done.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed in {cwd}: {done.stderr}")
    return done.stdout.strip()


def commit(repo: Path, message: str, files: dict[str, str] | None = None) -> str:
    """Write `files` (default: one file named after the message), commit, return the sha."""
    for name, text in (files or {f"{message.replace(' ', '_')}.txt": message}).items():
        path = repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


@dataclass
class Fleet:
    """A working clone with trunk `main` and bare mirrors, each a git remote of the clone."""

    root: Path
    work: Path
    mirrors: dict[str, Path] = field(default_factory=dict)

    def head(self, mirror: str, branch: str = "main") -> str | None:
        out = git(
            self.mirrors[mirror],
            "rev-parse",
            "--verify",
            "--quiet",
            f"refs/heads/{branch}",
            check=False,
        )
        return out or None

    def refs(self) -> dict[str, str]:
        """Every ref of every mirror: the whole state a push could change."""
        return {name: git(path, "for-each-ref") for name, path in self.mirrors.items()}

    def clone_of(self, mirror: str, name: str) -> Path:
        """A second developer's clone of one mirror, to make commits the candidate lacks."""
        dest = self.root / name
        git(self.root, "clone", "-q", str(self.mirrors[mirror]), str(dest))
        return dest

    def config(self, body: str = "") -> Path:
        names = ", ".join(f'"{m}"' for m in self.mirrors)
        path = self.work / "promote.toml"
        path.write_text(f'[promote]\ntrunk = "main"\nmirrors = [{names}]\n{body}')
        return path

    def hook(self, mirror: str, name: str, script: str) -> Path:
        path = self.mirrors[mirror] / "hooks" / name
        path.write_text("#!/bin/sh\n" + script)
        path.chmod(0o755)
        return path


def make_fleet(root: Path, names: tuple[str, ...] = ("origin", "mini", "station", "laptop")) -> Fleet:
    """A clone with one commit on main, pushed to every mirror; then a candidate commit on top."""
    work = root / "work"
    work.mkdir(parents=True)
    git(work, "init", "-q", "-b", "main")
    fleet = Fleet(root, work)
    commit(work, "first")
    for name in names:
        bare = root / f"{name}.git"
        git(root, "init", "-q", "--bare", "-b", "main", str(bare))
        # Bare repositories keep no reflog unless asked; the tests read it to prove fast-forwards.
        git(bare, "config", "core.logAllRefUpdates", "always")
        git(work, "remote", "add", name, str(bare))
        git(work, "push", "-q", name, "main")
        fleet.mirrors[name] = bare
    fleet.config()
    git(work, "add", "promote.toml")
    git(work, "commit", "-q", "-m", "add promote.toml")
    return fleet
