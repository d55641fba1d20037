"""pytest's `-k` and `-m`, evaluated with pytest's own expression module against a test's names and markers."""

from __future__ import annotations

import ast
from collections.abc import Collection
from functools import lru_cache
from pathlib import Path

from _pytest.mark import expression as pytest_expression

from promote.checks.ci.terms import NodeId

# pytest 8.0 raises its own ParseError for a malformed expression; later versions raise SyntaxError.
_PARSE_ERRORS: tuple[type[Exception], ...] = (SyntaxError, getattr(pytest_expression, "ParseError", SyntaxError))
# Hooks and calls through which a conftest.py or the module itself adds markers while collecting.
_DYNAMIC = ("add_marker", "pytest_collection_modifyitems", "pytest_itemcollected", "pytest_pycollect_makeitem")


class Unsupported(ValueError):
    """The expression cannot be decided for this test; the caller says undecided."""


def names_of(test: NodeId, rootdir: str) -> tuple[str, ...]:
    """The node names pytest matches `-k` against: directories below rootdir, module file, classes, test."""
    rel = test.module[len(rootdir) + 1 :] if rootdir and test.module.startswith(rootdir + "/") else test.module
    return (*rel.split("/"), *test.parts)


def evaluate(option: str, text: str, names: Collection[str], exact: bool) -> bool:
    """Whether `-k text` (substring of any name, case-insensitive) or `-m text` (a marker name) selects a test."""
    try:
        compiled = pytest_expression.Expression.compile(text)
    except _PARSE_ERRORS as e:
        raise Unsupported(f'{option} "{text}" is not an expression pytest accepts ({e})') from e
    lowered = [n.lower() for n in names]

    def matcher(name: str, /, **kwargs: object) -> bool:
        if kwargs:
            raise Unsupported(f'{option} "{text}" compares marker arguments, which the audit does not read')
        if exact:
            return name in names
        return any(name.lower() in n for n in lowered)

    return bool(compiled.evaluate(matcher))


def markers_of(test: NodeId, root: Path) -> frozenset[str] | str:
    """The marker names a test carries, read from its module's source; a string says why they cannot be known."""
    path = root / test.module
    try:
        stamp = path.stat().st_mtime_ns
    except OSError:
        return f"{test.module} is not in the checkout"
    for conftest in _conftests(root, test.module):
        if any(word in conftest for word in _DYNAMIC):
            return "a conftest.py adds markers while collecting"
    found = _module_markers(str(path), stamp)
    if isinstance(found, str):
        return found
    name = test.parts[-1].split("[")[0] if test.parts else ""
    owners = [
        "",
        *(".".join(test.parts[: i + 1]) for i in range(len(test.parts) - 1)),
        ".".join((*test.parts[:-1], name)),
    ]
    marks: set[str] = set()
    for owner in owners:
        got = found.get(owner, frozenset())
        if "?" in got:
            return f"a marker of {owner or test.module} is applied in a way the audit cannot read"
        marks |= got
    return frozenset(marks)


def _conftests(root: Path, module: str) -> list[str]:
    texts = []
    parts = module.split("/")[:-1]
    for i in range(len(parts) + 1):
        path = root.joinpath(*parts[:i], "conftest.py")
        try:
            texts.append(path.read_text(errors="replace"))
        except OSError:
            continue
    return texts


@lru_cache(maxsize=512)
def _module_markers(path: str, stamp: int) -> dict[str, frozenset[str]] | str:
    """Markers per owner ("" the module, "Class", "Class.test"); "?" among them marks one that cannot be read."""
    try:
        text = Path(path).read_text()
        tree = ast.parse(text)
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return "the module cannot be parsed"
    if any(word in text for word in _DYNAMIC):
        return "the module adds markers while collecting"
    aliases = {
        t.id: m
        for node in tree.body
        if isinstance(node, ast.Assign) and (m := _mark_name(node.value, {})) is not None
        for t in node.targets
        if isinstance(t, ast.Name)
    }
    out: dict[str, frozenset[str]] = {"": _pytestmark(tree.body, aliases)}

    def visit(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                owner = f"{prefix}{node.name}"
                marks = {m for d in node.decorator_list if (m := _mark_name(d, aliases)) is not None}
                if any(_marks_in_params(d) for d in node.decorator_list):
                    marks.add("?")
                if isinstance(node, ast.ClassDef):
                    marks |= _pytestmark(node.body, aliases)
                    visit(node.body, f"{owner}.")
                out[owner] = frozenset(marks)

    visit(tree.body, "")
    return out


def _pytestmark(body: list[ast.stmt], aliases: dict[str, str]) -> frozenset[str]:
    marks: set[str] = set()
    for node in body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets):
            values = node.value.elts if isinstance(node.value, (ast.List, ast.Tuple)) else [node.value]
            for value in values:
                name = _mark_name(value, aliases)
                marks.add(name if name is not None else "?")
    return frozenset(marks)


def _mark_name(node: ast.expr, aliases: dict[str, str]) -> str | None:
    """`x` for `pytest.mark.x`, `mark.x`, `pytest.mark.x(...)` or a module-level alias of one; else None."""
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Name):
        return aliases.get(node.id)
    if isinstance(node, ast.Attribute):
        base = node.value
        if isinstance(base, ast.Attribute) and base.attr == "mark" and isinstance(base.value, ast.Name):
            return node.attr if base.value.id == "pytest" else None
        if isinstance(base, ast.Name) and base.id == "mark":
            return node.attr
    return None


def _marks_in_params(node: ast.expr) -> bool:
    """A `parametrize` whose cases carry their own marks (`pytest.param(..., marks=...)`)."""
    return isinstance(node, ast.Call) and any(isinstance(n, ast.keyword) and n.arg == "marks" for n in ast.walk(node))
