"""A project's own Python environment, found as its tools would find it: a virtualenv in the tree, the one hatch or
poetry made for it, the active one.

Promote's own interpreter cannot import a project it is not installed beside: counted with it, a package's tests
fail to collect and look like none at all. Every tool asked is optional and bounded in time: one missing, failing or
slow is skipped.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from promote.core.process import run_bounded

# What the places looked in are called, in the order they are looked in.
DOT_VENV, VENV, HATCH, POETRY, ACTIVE = ".venv", "venv", "hatch", "poetry", "VIRTUAL_ENV"
LOOKED_IN = (DOT_VENV, VENV, HATCH, POETRY, ACTIVE)
TOOL_TIMEOUT_S = 10.0  # `hatch env find` and `poetry env info -p` only read: far longer is a tool that hangs


@dataclass(frozen=True)
class Environment:
    """A Python environment found for a project: its interpreter, and where it was found (one of LOOKED_IN)."""

    python: Path  # the environment's own bin/python, never resolved (a venv is known by that path, not its target)
    source: str


def interpreter(env_dir: Path) -> Path | None:
    """The Python of the environment at `env_dir`, if there is one there."""
    for candidate in (env_dir / "bin" / "python", env_dir / "Scripts" / "python.exe"):
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


def _in_tree(project: Path, top: Path) -> Environment | None:
    """`.venv` (uv's default, and most people's) or `venv`, in the project's directory or one above it up to `top`."""
    here = project.absolute()
    for d in (here, *(p for p in here.parents if p.is_relative_to(top.absolute()))):
        for name in (DOT_VENV, VENV):
            python = interpreter(d / name)
            if python is not None:
                return Environment(python, name)
    return None


def _uses(project: Path, tool: str) -> bool:
    """Whether the project says it is managed by `tool`: its pyproject table, or the tool's own file."""
    own = {HATCH: ("hatch.toml",), POETRY: ("poetry.lock", "poetry.toml")}[tool]
    if any((project / name).is_file() for name in own):
        return True
    try:
        text = (project / "pyproject.toml").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    return f"[tool.{tool}" in text


def _asked(project: Path, tool: str, argv: list[str], env: Mapping[str, str]) -> Environment | None:
    """The environment `tool` names for the project (the last line it prints), when it has one."""
    exe = shutil.which(argv[0], path=env.get("PATH"))
    if exe is None or not _uses(project, tool):
        return None
    try:
        done = run_bounded([exe, *argv[1:]], cwd=project, env=env, timeout=TOOL_TIMEOUT_S, die_with_promote=True)
    except OSError:
        return None
    lines = done.stdout.strip().splitlines()
    if done.status != 0 or not lines:
        return None
    python = interpreter(Path(lines[-1].strip()))
    return Environment(python, tool) if python is not None else None


def find(project: Path, top: Path, environ: Mapping[str, str] | None = None) -> Environment | None:
    """The project's environment: in the tree, else hatch's or poetry's for it, else the active virtualenv."""
    env = dict(os.environ if environ is None else environ)
    found = _in_tree(project, top)
    found = found or _asked(project, HATCH, ["hatch", "env", "find"], env)
    found = found or _asked(project, POETRY, ["poetry", "env", "info", "-p"], env)
    if found is None and env.get(ACTIVE):
        python = interpreter(Path(env[ACTIVE]))
        found = Environment(python, ACTIVE) if python is not None else None
    return found


def written(python: Path, package: Path, top: Path) -> str:
    """`python` as a package's `python` key says it: relative to the package's directory when it is inside the
    repository at `top` (the configuration then travels with the clone), else absolute."""
    absolute = python.absolute()
    if not absolute.is_relative_to(top.absolute()):
        return str(absolute)
    rel = os.path.relpath(absolute, package.absolute())
    # A key without "/" would be looked up on PATH (PackageConfig.interpreter): a relative path keeps one.
    return rel if "/" in rel else f"./{rel}"
