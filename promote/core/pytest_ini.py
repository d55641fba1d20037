"""Find and read pytest's ini configuration (addopts, testpaths) the way pytest looks for it.

A package's configuration is outside text: every reading goes through `read_config` (bounded in size) and
`parse_config`, which give an `Ini`, None (no pytest settings in that file) or `PytestConfigError`, nothing else.
"""

from __future__ import annotations

import configparser
import posixpath
import shlex
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from promote.core.capped import Unreadable, read_bounded
from promote.core.errors import PromoteError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

# In the order pytest tries them within one directory (`pytest.toml` and `pytest.ini` count even without a [pytest]
# table or section; `pytest.toml` is pytest 9's).
CANDIDATES = ("pytest.toml", ".pytest.toml", "pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg")
TOML = ("pytest.toml", ".pytest.toml", "pyproject.toml")
# Far beyond any real configuration: a larger file is refused rather than read into memory.
MAX_BYTES = 1 << 20


class PytestConfigError(PromoteError):
    """A pytest configuration file that cannot be read as pytest would read it: which, and why."""


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
    try:
        return read_config(path, posixpath.dirname(rel))
    except PytestConfigError:
        return None


def locate(start: Path) -> tuple[Path, Ini] | None:
    """The file pytest started in `start` would read its settings from (at or above it), and those settings.

    PytestConfigError when the first candidate that exists cannot be read: pytest would stop there too.
    """
    for directory in (start, *start.parents):
        for name in CANDIDATES:
            path = directory / name
            if path.is_file():
                found = read_config(path, str(directory))
                if found is not None:
                    return path, found
    return None


def read_config(path: Path, directory: str) -> Ini | None:
    """The settings in the file at `path` (whose directory is called `directory` in the result), bounded in size."""
    try:
        data = read_bounded(path, MAX_BYTES)
    except Unreadable as e:
        raise PytestConfigError(str(e)) from None
    return parse_config(path.name, data, directory)


def parse_config(name: str, data: bytes, directory: str = "") -> Ini | None:
    """pytest's settings in a file called `name` holding `data`: an Ini, None when it has none, or PytestConfigError."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise PytestConfigError(f"{name}: not UTF-8 text (byte {e.start})") from None
    if name in TOML:
        try:
            document = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise PytestConfigError(f"{name}: not valid TOML: {e}") from None
        except RecursionError:
            # tomllib recurses into nested arrays and inline tables, as the config loader and declared.py say too.
            raise PytestConfigError(f"{name}: not valid TOML: nested too deep to read") from None
        if name == "pyproject.toml":
            return _from_toml(directory, document)
        return _from_table(directory, document.get("pytest"))
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(text)
    except configparser.Error as e:
        raise PytestConfigError(f"{name}: not an ini file pytest can read: {_first_line(str(e))}") from None
    section = {"setup.cfg": "tool:pytest"}.get(name, "pytest")
    if not parser.has_section(section):
        return Ini(directory) if name in ("pytest.ini", ".pytest.ini") else None
    addopts = parser.get(section, "addopts", fallback="")
    testpaths = parser.get(section, "testpaths", fallback="")
    return Ini(directory, tuple(_split(addopts)), tuple(testpaths.split()))


def _from_toml(directory: str, data: dict[str, object]) -> Ini | None:
    """pyproject.toml: `[tool.pytest]` in native TOML (pytest 9), else `[tool.pytest.ini_options]`, else none."""
    tool = data.get("tool")
    pytest_table = tool.get("pytest") if isinstance(tool, dict) else None
    if not isinstance(pytest_table, dict):
        return None
    native = {k: v for k, v in pytest_table.items() if k != "ini_options"}
    table = native or pytest_table.get("ini_options")
    return _from_table(directory, table) if isinstance(table, dict) else None


def _from_table(directory: str, table: object) -> Ini:
    """A TOML table of pytest settings (anything else: a file that counts, with no settings in it)."""
    if not isinstance(table, dict):
        return Ini(directory)
    return Ini(directory, _words(table.get("addopts", ""), split=_split), _words(table.get("testpaths", []), str.split))


def _words(value: object, split: Callable[[str], list[str]]) -> tuple[str, ...]:
    """A setting given as one string (split as pytest splits it) or as a list (anything else: nothing)."""
    if isinstance(value, str):
        return tuple(split(value))
    if isinstance(value, list):
        return tuple(str(v) for v in value)
    return ()


def _split(text: str) -> list[str]:
    try:
        return shlex.split(text)
    except ValueError:
        return text.split()


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else "unreadable"
