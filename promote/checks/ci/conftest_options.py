"""Command-line options a repository adds to pytest (`parser.addoption` in its conftest files), as pytest learns
them before it reads the command line: which of them take a value, so that value is not read as a path."""

from __future__ import annotations

import ast
import posixpath
from collections.abc import Iterable
from pathlib import Path

from promote.checks.ci.terms import normalize

# argparse actions that take no value.
_FLAG_ACTIONS = {"store_true", "store_false", "store_const", "append_const", "count", "help", "version"}
MAX_FILES = 64
MAX_BYTES = 512_000


def valued_options(root: Path, rootdir: str, anchors: Iterable[str]) -> frozenset[str]:
    """Long options taking a value that the initial conftest files of `anchors` (the paths pytest is given,
    repository-relative) declare, with the plugin modules their `pytest_plugins` name."""
    files = [posixpath.join(d, "conftest.py") for d in _conftest_dirs(root, rootdir, anchors)]
    found: set[str] = set()
    seen: set[str] = set()
    while files and len(seen) < MAX_FILES:
        rel = files.pop(0)
        if rel in seen:
            continue
        seen.add(rel)
        tree = _parse(root / rel)
        if tree is None:
            continue
        found |= _declared(tree)
        files += [m for m in (_module_file(root, name) for name in _plugins(tree)) if m is not None]
    return frozenset(found)


def _conftest_dirs(root: Path, rootdir: str, anchors: Iterable[str]) -> list[str]:
    """Where pytest looks for conftest files before parsing the command line: each anchor's directory and its
    parents up to the rootdir, and the `test*` directories right under it."""
    dirs: list[str] = []
    for anchor in anchors:
        base = anchor if (root / anchor).is_dir() else posixpath.dirname(anchor)
        here = base
        while True:
            dirs.append(here)
            if here in ("", rootdir) or not here.startswith(rootdir):
                break
            here = posixpath.dirname(here)
        try:
            dirs += sorted(posixpath.join(base, p.name) for p in (root / base).glob("test*") if p.is_dir())
        except OSError:
            continue
    return list(dict.fromkeys(dirs))


def _parse(path: Path) -> ast.Module | None:
    try:
        if not path.is_file() or path.stat().st_size > MAX_BYTES:
            return None
        return ast.parse(path.read_text(errors="replace"))
    except (OSError, SyntaxError, ValueError):
        return None


def _declared(tree: ast.Module) -> set[str]:
    """The long names of each `addoption(...)` call whose action takes a value."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        if node.func.attr != "addoption":
            continue
        names = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        kwargs = {k.arg: k.value for k in node.keywords if k.arg}
        action = kwargs.get("action")
        nargs = kwargs.get("nargs")
        if isinstance(action, ast.Constant) and action.value in _FLAG_ACTIONS:
            continue
        if isinstance(nargs, ast.Constant) and nargs.value == 0:
            continue
        out |= {n for n in names if n.startswith("--")}
    return out


def _plugins(tree: ast.Module) -> list[str]:
    """The module names a `pytest_plugins = ...` assignment at the top of the module lists."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "pytest_plugins" for t in node.targets
        ):
            value = node.value
            items = value.elts if isinstance(value, (ast.List, ast.Tuple)) else [value]
            return [i.value for i in items if isinstance(i, ast.Constant) and isinstance(i.value, str)]
    return []


def _module_file(root: Path, name: str) -> str | None:
    """A dotted module name as a file of the repository (`tests.optional` -> tests/optional.py), if it is one."""
    base = name.replace(".", "/")
    for rel in (f"{base}.py", f"{base}/__init__.py"):
        path = normalize(rel, "")
        if path is not None and (root / path).is_file():
            return path
    return None
