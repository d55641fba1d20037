"""Evaluate pytest `-k` expressions (and, or, not, parentheses) against a test's names."""

from __future__ import annotations

import re
from collections.abc import Sequence

from promote.checks.ci.model import NodeId

# pytest's own identifier characters (src/_pytest/mark/expression.py).
_TOKEN = re.compile(r"\s*(?:(?P<paren>[()])|(?P<ident>(?:\w|:|\+|-|\.|\[|\]|\\|/)+))")
_KEYWORDS = ("and", "or", "not")


class Unsupported(ValueError):
    """The expression uses something this evaluator does not read; the caller says undecided."""


def names_of(test: NodeId, rootdir: str) -> tuple[str, ...]:
    """The node names pytest matches `-k` against: directories below rootdir, module file, classes, test."""
    rel = test.module[len(rootdir) + 1 :] if rootdir and test.module.startswith(rootdir + "/") else test.module
    return (*rel.split("/"), *test.parts)


def matches(expression: str, names: Sequence[str]) -> bool:
    """True when `expression` selects a test with `names` (case-insensitive substring, as pytest does)."""
    tokens = _tokenize(expression)
    if not tokens:
        return True
    lowered = [n.lower() for n in names]
    value, pos = _or(tokens, 0, lowered)
    if pos != len(tokens):
        raise Unsupported(f"unexpected {tokens[pos]!r} in -k {expression!r}")
    return value


def _tokenize(expression: str) -> list[str]:
    tokens = []
    pos = 0
    while pos < len(expression):
        if expression[pos:].isspace():
            break
        m = _TOKEN.match(expression, pos)
        if m is None or m.end() == pos:
            raise Unsupported(f"cannot read -k {expression!r} at {expression[pos:]!r}")
        tokens.append(m.group("paren") or m.group("ident"))
        pos = m.end()
    return tokens


def _or(tokens: list[str], pos: int, names: list[str]) -> tuple[bool, int]:
    value, pos = _and(tokens, pos, names)
    while pos < len(tokens) and tokens[pos] == "or":
        right, pos = _and(tokens, pos + 1, names)
        value = value or right
    return value, pos


def _and(tokens: list[str], pos: int, names: list[str]) -> tuple[bool, int]:
    value, pos = _not(tokens, pos, names)
    while pos < len(tokens) and tokens[pos] == "and":
        right, pos = _not(tokens, pos + 1, names)
        value = value and right
    return value, pos


def _not(tokens: list[str], pos: int, names: list[str]) -> tuple[bool, int]:
    if pos >= len(tokens):
        raise Unsupported("the -k expression ends too early")
    token = tokens[pos]
    if token == "not":
        value, pos = _not(tokens, pos + 1, names)
        return not value, pos
    if token == "(":
        value, pos = _or(tokens, pos + 1, names)
        if pos >= len(tokens) or tokens[pos] != ")":
            raise Unsupported("unbalanced parentheses in -k")
        return value, pos + 1
    if token in _KEYWORDS or token == ")" or token in ("True", "False", "None"):
        raise Unsupported(f"unexpected {token!r} in -k")
    if pos + 1 < len(tokens) and tokens[pos + 1] == "(":
        raise Unsupported(f"keyword arguments ({token}(...)) in -k")
    needle = token.lower()
    return any(needle in name for name in names), pos + 1
