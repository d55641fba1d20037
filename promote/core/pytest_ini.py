"""Find and read pytest's ini configuration (addopts, testpaths) the way pytest looks for it."""

from __future__ import annotations

import configparser
import posixpath
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

# In the order pytest tries them within one directory (`pytest.ini` counts even without a [pytest] section).
CANDIDATES = ("pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg")


@dataclass(frozen=True)
class Ini:
    """The pytest settings the audit and reruns need, and the directory (pytest's rootdir) they came from."""

    directory: str
    addopts: tuple[str, ...] = ()
    testpaths: tuple[str, ...] = ()


def find_ini(root: Path, cwd: str, args: list[str | None]) -> Ini | None:
    """The first pytest configuration at or above the common directory of `args` (or `cwd`), within the repo."""
    dirs = []
    for rel in args:
        if rel is None:
            continue
        dirs.append(rel if (root / rel).is_dir() else posixpath.dirname(rel))
    start = posixpath.commonpath(dirs) if dirs and all(dirs) else ("" if dirs else cwd)
    directory = start
    while True:
        for name in CANDIDATES:
            found = read_ini(root, posixpath.join(directory, name) if directory else name)
            if found is not None:
                return found
        if not directory:
            return None
        directory = posixpath.dirname(directory)


def read_ini(root: Path, rel: str) -> Ini | None:
    """pytest's settings in the repo-relative file `rel`; None when it holds none (or cannot be read)."""
    path = root / rel
    if not path.is_file():
        return None
    directory = posixpath.dirname(rel)
    try:
        if path.name == "pyproject.toml":
            return _from_toml(directory, tomllib.loads(path.read_text()))
        parser = configparser.ConfigParser(interpolation=None)
        parser.read_string(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError, configparser.Error):
        return None
    section = {"setup.cfg": "tool:pytest"}.get(path.name, "pytest")
    if not parser.has_section(section):
        return Ini(directory) if path.name in ("pytest.ini", ".pytest.ini") else None
    addopts = parser.get(section, "addopts", fallback="")
    testpaths = parser.get(section, "testpaths", fallback="")
    return Ini(directory, tuple(_split(addopts)), tuple(testpaths.split()))


def _from_toml(directory: str, data: dict[str, Any]) -> Ini | None:
    table = data.get("tool", {}).get("pytest", {}).get("ini_options")
    if not isinstance(table, dict):
        return None
    addopts = table.get("addopts", "")
    testpaths = table.get("testpaths", [])
    opts = _split(addopts) if isinstance(addopts, str) else [str(a) for a in addopts]
    paths = testpaths.split() if isinstance(testpaths, str) else [str(p) for p in testpaths]
    return Ini(directory, tuple(opts), tuple(paths))


def _split(text: str) -> list[str]:
    try:
        return shlex.split(text)
    except ValueError:
        return text.split()
