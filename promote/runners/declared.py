"""What a package declares it depends on: its pyproject.toml's `[project]` dependencies and extras, read bounded.

A test skipped for a module the package declares in an extra (or nowhere) is an optional dependency, not a
broken environment; a module among its own dependencies missing is. Distribution names are compared with
import names after normalising both (PEP 503), with a few well-known renamings.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

from promote.core.capped import Unreadable, read_bounded, read_capped
from promote.core.vocab import Declaration

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

PYPROJECT = "pyproject.toml"
MAX_BYTES = 1 << 20  # a pyproject.toml larger than 1 MiB is not one promote reads
# Distributions whose import name is not their own (normalised): the common ones a test suite skips for.
IMPORTED_AS = {
    "pyyaml": "yaml",
    "scikit_learn": "sklearn",
    "pillow": "pil",
    "opencv_python": "cv2",
    "opencv_python_headless": "cv2",
    "beautifulsoup4": "bs4",
    "python_dateutil": "dateutil",
    "attrs": "attr",
    "protobuf": "google",
}
_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


class DeclaredError(Exception):
    """The package's pyproject.toml could not be read as one (too large, not UTF-8, not TOML, nested too deep)."""


def normalised(name: str) -> str:
    """A distribution or module name as both are compared: lower case, runs of `-_.` as one `_`."""
    plain = re.sub(r"[-_.]+", "_", name).lower()
    return IMPORTED_AS.get(plain, plain)


@dataclass(frozen=True)
class Declared:
    """The dependencies one pyproject.toml declares, as import-comparable names; None: dynamic (not in the file)."""

    path: Path
    required: frozenset[str] | None
    extras: tuple[tuple[str, frozenset[str]], ...] | None
    shown: str = PYPROJECT  # the file as a finding names it: relative to the repository root

    def of(self, module: str) -> tuple[Declaration, str | None]:
        """How `module` is declared: required, in an extra (named), undeclared, or unknown (a dynamic part)."""
        name = normalised(module)
        if self.required is not None and name in self.required:
            return "required", None
        extra = next((e for e, names in self.extras or () if name in names), None)
        if extra is not None:
            return "extra", extra
        return ("unknown", None) if self.required is None or self.extras is None else ("undeclared", None)


def find_pyproject(start: Path) -> tuple[Path, str] | None:
    """The nearest pyproject.toml at or above `start` with a `[project]` table, not above the repository; with its
    path relative to the repository root (the directory holding `.git`; else its own name)."""
    found = None
    for directory in (start, *start.parents):
        path = directory / PYPROJECT
        if found is None and path.is_file() and b"[project]" in (read_capped(path, MAX_BYTES) or b"[project]"):
            found = path
        if (directory / ".git").exists():
            return None if found is None else (found, found.relative_to(directory).as_posix())
    # Outside a repository, nothing above the package is its own.
    return (found, PYPROJECT) if found is not None and found.parent == start else None


def read_declared(path: Path, shown: str = PYPROJECT) -> Declared:
    """The `[project]` dependencies of the pyproject.toml at `path`; DeclaredError when it cannot be read as one."""
    try:
        document = tomllib.loads(read_bounded(path, MAX_BYTES).decode("utf-8"))
    except Unreadable as e:
        raise DeclaredError(str(e)) from None
    except UnicodeDecodeError as e:
        raise DeclaredError(f"{path}: not UTF-8 text (byte {e.start})") from None
    except tomllib.TOMLDecodeError as e:
        raise DeclaredError(f"{path}: not valid TOML: {e}") from None
    except RecursionError:
        raise DeclaredError(f"{path}: arrays or inline tables nested too deeply to read") from None
    project = document.get("project")
    if not isinstance(project, dict):
        raise DeclaredError(f"{path}: has no [project] table")
    dynamic = project.get("dynamic", [])
    dynamic = dynamic if isinstance(dynamic, list) else []
    required = None if "dependencies" in dynamic else _names(project.get("dependencies", []), path, "dependencies")
    extras: tuple[tuple[str, frozenset[str]], ...] | None = None
    if "optional-dependencies" not in dynamic:
        table = project.get("optional-dependencies", {})
        if not isinstance(table, dict):
            raise DeclaredError(f"{path}: [project.optional-dependencies] is not a table")
        extras = tuple((str(k), _names(v, path, f"optional-dependencies.{k}")) for k, v in table.items())
    return Declared(path, required, extras, shown)


def _names(value: object, path: Path, key: str) -> frozenset[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise DeclaredError(f"{path}: [project] {key} is not a list of requirement strings")
    return frozenset(normalised(m[1]) for v in value if (m := _NAME.match(v)) is not None)


def declared_for(package: Path) -> Declared | DeclaredError | None:
    """What the package at `package` declares (None: no pyproject.toml with a [project] table), or why it cannot
    be read: one typed error, never a traceback."""
    try:
        found = find_pyproject(package)
        return None if found is None else read_declared(*found)
    except (DeclaredError, OSError) as e:
        return e if isinstance(e, DeclaredError) else DeclaredError(f"{package}: {e}")
