"""Evaluate GitHub Actions `if:` expressions as far as the checkout can tell; the rest is unknown."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from promote.core import bounded_json

_TOKEN = re.compile(
    r"\s*(?:(?P<str>'(?:[^']|'')*')|(?P<num>-?\d+(?:\.\d+)?)|(?P<op>==|!=|<=|>=|&&|\|\||[!<>(),\[\].*])"
    r"|(?P<name>[A-Za-z_][A-Za-z0-9_-]*))"
)
MAX_DEPTH = 64
MAX_TOKENS = 4096
_WRAPPED = re.compile(r"\s*\$\{\{(.*)\}\}\s*", re.S)
# One `${{ ... }}` in a text, quotes respected (a `}}` inside a string does not end it).
EXPRESSION = re.compile(r"\$\{\{(?:[^}']|'(?:[^']|'')*'|\}(?!\}))*\}\}")
# A job-level status function, as in a normal run where everything before it succeeded.
_STATUS = {"success": True, "always": True, "cancelled": False, "failure": False}


class _Unknown:
    def __init__(self, why: str) -> None:
        self.why = why


# Lists and mappings come from the matrix and from fromJSON; comparisons and functions read them as GitHub does.
Value = str | float | bool | None | list[Any] | dict[str, Any] | _Unknown


@dataclass(frozen=True)
class Truth:
    """An `if:` answer: True, False or None (unknown, with `why`); `repository` if it hinged on the repo name."""

    value: bool | None
    why: str = ""
    repository: bool = False


class _Parser:
    def __init__(
        self, text: str, repository: str | None, matrix: Mapping[str, Any] | None = None, event: str | None = None
    ) -> None:
        self.tokens: list[str] = []
        pos = 0
        while pos < len(text) and not text[pos:].isspace():
            m = _TOKEN.match(text, pos)
            if m is None:
                raise ValueError(f"cannot read {text[pos:]!r}")
            self.tokens.append(m.group(m.lastgroup or 0))
            pos = m.end()
        depth = most = 0
        for token in self.tokens:
            depth += (token in ("(", "[")) - (token in (")", "]"))
            most = max(most, depth)
        if most > MAX_DEPTH or len(self.tokens) > MAX_TOKENS or "!" * MAX_DEPTH in text.replace(" ", ""):
            # Each level is a frame of the parser: a hostile workflow must not exhaust the stack.
            raise ValueError(f"nested deeper than {MAX_DEPTH} levels or longer than {MAX_TOKENS} tokens")
        self.pos = 0
        self.repository = repository
        self.matrix = matrix
        self.event = event
        self.used_repository = False

    def peek(self) -> str | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self, expected: str | None = None) -> str:
        token = self.peek()
        if token is None or (expected is not None and token != expected):
            raise ValueError(f"expected {expected or 'more'}, got {token!r}")
        self.pos += 1
        return token

    def binary(self, level: int) -> Value:
        ops = (("||",), ("&&",), ("==", "!="), ("<", "<=", ">", ">="))
        if level == len(ops):
            return self.unary()
        left = self.binary(level + 1)
        while self.peek() in ops[level]:
            op = self.take()
            left = _apply(op, left, self.binary(level + 1))
        return left

    def unary(self) -> Value:
        if self.peek() == "!":
            self.take()
            value = self.unary()
            return value if isinstance(value, _Unknown) else not _truthy(value)
        return self.primary()

    def primary(self) -> Value:
        token = self.take()
        if token == "(":
            value = self.binary(0)
            self.take(")")
            return value
        if token.startswith("'"):
            return token[1:-1].replace("''", "'")
        if token[0].isdigit() or token[0] == "-":
            return float(token)
        if token in ("true", "false"):
            return token == "true"
        if token == "null":
            return None
        if self.peek() == "(":
            self.take("(")
            args = []
            while self.peek() != ")":
                args.append(self.binary(0))
                if self.peek() == ",":
                    self.take()
            self.take(")")
            return self.call(token, args)
        path = token
        keys: list[Value] = []
        while self.peek() in (".", "["):
            if self.take() == ".":
                key: Value = self.take()
                path += f".{key}"
            else:
                key = self.binary(0)
                self.take("]")
                path += f"[{key!r}]"
            keys.append(key)
        if token == "matrix" and self.matrix is not None:
            return _index(dict(self.matrix), keys)
        return self.context(path)

    def context(self, path: str) -> Value:
        if path == "github.event_name" and self.event is not None:
            return self.event
        if path in ("github.repository", "github.repository_owner"):
            self.used_repository = True
            if self.repository is None:
                return _Unknown("the repository's name is not known (set [promote.ci] repository)")
            return self.repository if path == "github.repository" else self.repository.split("/")[0]
        return _Unknown(f"`{path}` is only known when the workflow runs")

    def call(self, name: str, args: list[Value]) -> Value:
        if name in _STATUS and not args:
            return _STATUS[name]
        if name == "case":
            return _case(args)
        unknown = next((a for a in args if isinstance(a, _Unknown)), None)
        if unknown is not None:
            return unknown
        return _function(name, args)


def _function(name: str, args: list[Value]) -> Value:
    """GitHub's functions on known values; one the audit does not evaluate is unknown, by name."""
    if name == "contains" and len(args) == 2 and isinstance(args[0], list):
        return any(_equal(item, args[1]) for item in args[0])
    if name in ("contains", "startsWith", "endsWith") and len(args) == 2:
        hay, needle = (_str(a).casefold() for a in args)
        return {"contains": needle in hay, "startsWith": hay.startswith(needle), "endsWith": hay.endswith(needle)}[name]
    if name == "fromJSON" and len(args) == 1 and isinstance(args[0], str):
        try:
            loaded = bounded_json.loads(args[0])
        except bounded_json.JsonRejected as e:
            return _Unknown(f"fromJSON({args[0][:80]!r}) is not read: {e}")
        return float(loaded) if isinstance(loaded, int) and not isinstance(loaded, bool) else loaded
    if name == "format" and args and isinstance(args[0], str):
        text = args[0]
        for i, arg in enumerate(args[1:]):
            text = text.replace("{" + str(i) + "}", _str(arg))
        return text
    if name == "join" and args and isinstance(args[0], list):
        return (_str(args[1]) if len(args) > 1 else ",").join(_str(a) for a in args[0])
    return _Unknown(f"`{name}(...)` is not evaluated by the audit")


def _case(args: list[Value]) -> Value:
    """`case(pred1, value1, ..., default)`: the value of the first true predicate, else the default."""
    if len(args) < 3 or len(args) % 2 == 0:
        return _Unknown("`case(...)` takes pairs of a condition and a value, then a default")
    for pred, value in zip(args[0:-1:2], args[1:-1:2], strict=True):
        if isinstance(pred, _Unknown):
            return pred
        if _truthy(pred):
            return value
    return args[-1]


def _index(value: Value, keys: list[Value]) -> Value:
    """`matrix.a.b` or `matrix['a']`: a missing key is null, as GitHub reads it."""
    for key in keys:
        if isinstance(key, _Unknown):
            return key
        if isinstance(value, dict):
            value = value.get(_str(key))
        elif isinstance(value, list) and isinstance(key, float) and 0 <= key < len(value):
            value = value[int(key)]
        else:
            return None
    return float(value) if isinstance(value, int) and not isinstance(value, bool) else value


def _str(value: Value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else str(value)
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    return "" if value is None or isinstance(value, _Unknown) else value


def _number(value: Value) -> float | None:
    """GitHub's coercion to a number when the two sides of a comparison differ in type."""
    if isinstance(value, bool):
        return float(value)
    if value is None:
        return 0.0
    if isinstance(value, float):
        return value
    if isinstance(value, str):
        try:
            return float(value) if value.strip() else 0.0
        except ValueError:
            return None  # NaN: equal to nothing
    return None


def _equal(left: Value, right: Value) -> bool:
    if isinstance(left, str) and isinstance(right, str):
        return left.casefold() == right.casefold()
    if type(left) is type(right):
        return bool(left == right)
    a, b = _number(left), _number(right)
    return a is not None and b is not None and a == b


def _truthy(value: Value) -> bool:
    return value not in (False, 0, "", None)


def _apply(op: str, left: Value, right: Value) -> Value:
    if op == "&&":
        if not isinstance(left, _Unknown):
            return right if _truthy(left) else left
        return False if not isinstance(right, _Unknown) and not _truthy(right) else left
    if op == "||":
        if not isinstance(left, _Unknown):
            return left if _truthy(left) else right
        return True if not isinstance(right, _Unknown) and _truthy(right) else left
    if isinstance(left, _Unknown):
        return left
    if isinstance(right, _Unknown):
        return right
    if op in ("==", "!="):
        same = _equal(left, right)
        return same if op == "==" else not same
    a, b = (left, right) if isinstance(left, float) and isinstance(right, float) else (_number(left), _number(right))
    if isinstance(a, float) and isinstance(b, float):
        return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]
    return _Unknown(f"comparing {left!r} {op} {right!r}")


def evaluate_if(
    condition: object,
    repository: str | None,
    matrix: Mapping[str, Any] | None = None,
    events: Sequence[str] = (),
) -> Truth:
    """Whether a job or step with `if: condition` runs in `repository` (owner/name, None when unknown), for one
    matrix entry (`matrix`; None where the matrix context does not exist), for some event of `events` (the ones
    that start the workflow for a change to trunk: `github.event_name` is known for each)."""
    if events:
        each = [_one(condition, repository, matrix, event) for event in events]
        return next((t for t in each if t.value is True), next((t for t in each if t.value is None), each[0]))
    return _one(condition, repository, matrix, None)


def _one(condition: object, repository: str | None, matrix: Mapping[str, Any] | None, event: str | None) -> Truth:
    if condition is None:
        return Truth(True)
    if isinstance(condition, bool):
        return Truth(condition)
    text = str(condition)
    m = _WRAPPED.fullmatch(text)
    if m:
        text = m.group(1)
    elif "${{" in text:
        return Truth(None, f"`if: {condition}` mixes text and expressions")
    try:
        parser = _Parser(text, repository, matrix, event)
        value = parser.binary(0)
        if parser.peek() is not None:
            raise ValueError(f"unexpected {parser.peek()!r}")
    except ValueError as e:
        return Truth(None, f"`if: {condition}` cannot be read ({e})")
    if isinstance(value, _Unknown):
        return Truth(None, f"`if: {condition}`: {value.why}", parser.used_repository)
    return Truth(_truthy(value), f"`if: {condition}`", parser.used_repository)


def evaluate_value(text: str, repository: str | None, matrix: Mapping[str, Any] | None) -> tuple[Any, str]:
    """The value of a whole `${{ expression }}` (a `runs-on`, say) and "", or (None, why it is unknown)."""
    m = _WRAPPED.fullmatch(text)
    if m is None:
        return None, f"`{text}` is not one expression"
    try:
        parser = _Parser(m.group(1), repository, matrix)
        value = parser.binary(0)
        if parser.peek() is not None:
            raise ValueError(f"unexpected {parser.peek()!r}")
    except ValueError as e:
        return None, f"`{text}` cannot be read ({e})"
    if isinstance(value, _Unknown):
        return None, f"`{text}`: {value.why}"
    return _str(value) if isinstance(value, (float, bool)) else value, ""
