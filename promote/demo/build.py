"""Build the example workspace: a repository with history, four bare mirrors, a deployed branch, a docs repository."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

from promote.core.errors import UsageError

TEMPLATES = Path(__file__).resolve().parent / "workspace"
SUFFIX = ".tmpl"
REPO = "sanctum"
DOCS = "sanctum-docs"
MIRRORS = ("origin", "mini", "station", "laptop")
BEHIND = "laptop"
EPOCH = datetime(2026, 3, 2, 9, 30, tzinfo=timezone.utc)

MLX = "packages/sanctum-mlx/"
PROXY = "packages/sanctum-proxy/"

# The repository's history, oldest first: (message, files it adds). Every template is in exactly one commit.
HISTORY: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "sanctum-mlx: a tiny llama target, plain greedy decoding, compiled sampler",
        ("README.md", ".gitignore", f"{MLX}pyproject.toml", f"{MLX}sanctum_mlx/__init__.py",
         f"{MLX}sanctum_mlx/model.py", f"{MLX}sanctum_mlx/sampler.py", f"{MLX}sanctum_mlx/decode.py",
         f"{MLX}tests/test_decode.py", f"{MLX}tests/test_model.py", f"{MLX}tests/test_sampler.py"),
    ),
    (
        "sanctum-proxy: a router with a fallback ladder; SANCTUM_PROXY_DRAIN drains backends",
        (f"{PROXY}pyproject.toml", f"{PROXY}sanctum_proxy/__init__.py", f"{PROXY}sanctum_proxy/backends.py",
         f"{PROXY}sanctum_proxy/router.py", f"{PROXY}tests/conftest.py", f"{PROXY}tests/test_fallback.py",
         f"{PROXY}tests/test_routing.py"),
    ),
    (
        "sanctum-mlx: test the context-window refusal against the production checkpoint",
        (f"{MLX}tests/conftest.py", f"{MLX}tests/test_checkpoint.py"),
    ),
    (
        "sanctum-mlx: DFlash2 speculative decoding, kill switch SANCTUM_MLX_DFLASH2",
        (f"{MLX}sanctum_mlx/dflash2.py", f"{MLX}sanctum_mlx/ledger.py", f"{MLX}sanctum_mlx/parity.py",
         f"{MLX}sanctum_mlx/bench.py", f"{MLX}sanctum_mlx/evaluate.py", f"{MLX}sanctum_mlx/yardstick.json",
         f"{MLX}tests/test_dflash2.py"),
    ),
    # The incident: DFlash2 refuses sampled requests by failing them (a fast 503); the proxy reads that as
    # "seat down" and the hosted rung answers under the name the client asked for. No test covers it.
    (
        "sanctum-mlx: the serving box's handler; while DFlash2 is on, sampled requests go to another rung",
        (f"{MLX}sanctum_mlx/serve.py",),
    ),
    ("sanctum-proxy: a sweep of completions through the front door", (f"{PROXY}sweep.py",)),
    ("ci: run both suites on every push; DFlash2 parity on the Mac", (".github/workflows/ci.yml",)),
    ("promote: audit configuration", ("promote.toml",)),
    # Production serves the commit above; everything after it touches tests only.
    ("sanctum-mlx: tests for DFlash2 declining and its kill switch", (f"{MLX}tests/test_dflash2_policy.py",)),
    ("sanctum-mlx: step through DFlash2 verification eagerly", (f"{MLX}tests/test_debug.py",)),
    ("sanctum-proxy: test draining a backend", (f"{PROXY}tests/test_drain.py",)),
)  # fmt: skip
DEPLOYED_AT = 8  # commits of HISTORY in `deployed` (and on the mirror that is behind)

DOCS_HISTORY: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("docs: index and serving", ("docs/index.md", "docs/serving.md")),
    ("docs: the proxy's fallback ladder and draining", ("docs/proxy.md",)),
)


@dataclass(frozen=True)
class Example:
    """Where the built workspace lives."""

    root: Path
    repo: Path
    docs: Path
    mirrors: dict[str, Path]


def templates(name: str) -> dict[str, Path]:
    """The template files of one repository, by their path in it (`dot-x` names `.x`, `.tmpl` dropped)."""
    base = TEMPLATES / name
    found = {}
    for path in sorted(base.rglob(f"*{SUFFIX}")):
        parts = path.relative_to(base).as_posix()[: -len(SUFFIX)].split("/")
        found["/".join("." + p[4:] if p.startswith("dot-") else p for p in parts)] = path
    return found


def git(cwd: Path, *args: str, when: datetime = EPOCH) -> str:
    """Run git with a pinned identity and date, ignoring the user's own configuration."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    stamp = when.isoformat()
    env.update(
        GIT_AUTHOR_NAME="Sanctum Team", GIT_AUTHOR_EMAIL="team@sanctum.example", GIT_AUTHOR_DATE=stamp,
        GIT_COMMITTER_NAME="Sanctum Team", GIT_COMMITTER_EMAIL="team@sanctum.example", GIT_COMMITTER_DATE=stamp,
        GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull, GIT_TERMINAL_PROMPT="0",
    )  # fmt: skip
    pinned = ["-c", "commit.gpgsign=false", "-c", "core.autocrlf=false", "-c", "core.hooksPath=" + os.devnull]
    done = subprocess.run(["git", *pinned, *args], cwd=cwd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise UsageError(f"building the demo workspace: git {' '.join(args)} failed in {cwd}: {done.stderr.strip()}")
    return done.stdout.strip()


def commit_history(repo: Path, name: str, history: tuple[tuple[str, tuple[str, ...]], ...]) -> list[str]:
    """Write each commit's files from the templates and commit them; the shas, oldest first."""
    files = templates(name)
    listed = [f for _, added in history for f in added]
    if sorted(listed) != sorted(files):
        raise UsageError(f"demo templates and history disagree for {name}: {sorted(set(listed) ^ set(files))}")
    git(repo, "init", "-q", "-b", "main")
    shas = []
    for i, (message, added) in enumerate(history):
        for rel in added:
            target = repo / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(files[rel].read_bytes())
        when = EPOCH + timedelta(days=i, hours=i % 3)
        git(repo, "add", "--", *added, when=when)
        git(repo, "commit", "-q", "-m", message, when=when)
        shas.append(git(repo, "rev-parse", "HEAD"))
    return shas


def build(root: Path) -> Example:
    """Build the workspace under `root` (absent or empty)."""
    if root.exists() and any(root.iterdir()):
        raise UsageError(f"{root} is not empty: the demo builds its workspace in a new or empty directory")
    repo, docs = root / REPO, root / DOCS
    repo.mkdir(parents=True)
    docs.mkdir()
    commit_history(docs, DOCS, DOCS_HISTORY)
    shas = commit_history(repo, REPO, HISTORY)
    served = shas[DEPLOYED_AT - 1]
    git(repo, "branch", "deployed", served)
    mirrors = {}
    for name in MIRRORS:
        bare = root / "mirrors" / f"{name}.git"
        bare.mkdir(parents=True)
        git(bare, "init", "-q", "--bare", "-b", "main")
        git(repo, "remote", "add", name, str(bare))
        head = served if name == BEHIND else shas[-1]
        git(repo, "push", "-q", name, f"{head}:refs/heads/main")
        mirrors[name] = bare
    # The serving box and the hosted origin also carry the branch production serves.
    for name in ("origin", "mini"):
        git(repo, "push", "-q", name, "deployed")
    return Example(root, repo, docs, mirrors)
