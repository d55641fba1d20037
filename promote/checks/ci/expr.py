"""Evaluate GitHub Actions `if:` expressions as far as the checkout can tell; the rest is unknown."""

from __future__ import annotations

import re
from dataclasses import dataclass

_TOKEN = re.compile(
    r"\s*(?:(?P<str>'(?:[^']|'')*')|(?P<num>-?\d+(?:\.\d+)?)|(?P<op>==|!=|<=|>=|&&|\|\||[!<>(),\[\].*])"
    r"|(?P<name>[A-Za-z_][A-Za-z0-9_-]*))"
)
_WRAPPED = re.compile(r"\s*\$\{\{(.*)\}\}\s*", re.S)
# A job-level status function, as in a normal run where everything before it succeeded.
_STATUS = {"success": True, "always": True, "cancelled": False, "failure": False}


class _Unknown:
    def __init__(self, why: str) -> None:
        self.why = why


Value = str | float | bool | None | _Unknown


@dataclass(frozen=True)
class Truth:
    """An `if:` answer: True, False or None (unknown, with `why`); `repository` if it hinged on the repo name."""

    value: bool | None
    why: str = ""
    repository: bool = False


class _Parser:
    def __init__(self, text: str, repository: str | None) -> None:
        self.tokens: list[str] = []
        pos = 0
        while pos < len(text) and not text[pos:].isspace():
            m = _TOKEN.match(text, pos)
            if m is None:
                raise ValueError(f"cannot read {text[pos:]!r}")
            self.tokens.append(m.group(m.lastgroup or 0))
            pos = m.end()
        self.pos = 0
        self.repository = repository
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
        while self.peek() in (".", "["):
            if self.take() == ".":
                path += "." + self.take()
            else:
                index = self.binary(0)
                self.take("]")
                path += f"[{index!r}]"
        return self.context(path)

    def context(self, path: str) -> Value:
        if path in ("github.repository", "github.repository_owner"):
            self.used_repository = True
            if self.repository is None:
                return _Unknown("the repository's name is not known (set [promote.ci] repository)")
            return self.repository if path == "github.repository" else self.repository.split("/")[0]
        return _Unknown(f"`{path}` is only known when the workflow runs")

    def call(self, name: str, args: list[Value]) -> Value:
        if name in _STATUS and not args:
            return _STATUS[name]
        unknown = next((a for a in args if isinstance(a, _Unknown)), None)
        if unknown is not None:
            return unknown
        if name in ("contains", "startsWith", "endsWith") and len(args) == 2:
            hay, needle = (str(a).casefold() for a in args)
            return {"contains": needle in hay, "startsWith": hay.startswith(needle), "endsWith": hay.endswith(needle)}[
                name
            ]
        return _Unknown(f"`{name}(...)` is not evaluated by the audit")


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
        both_text = isinstance(left, str) and isinstance(right, str)
        same = str(left).casefold() == str(right).casefold() if both_text else left == right
        return same if op == "==" else not same
    if isinstance(left, float) and isinstance(right, float):
        return {"<": left < right, "<=": left <= right, ">": left > right, ">=": left >= right}[op]
    return _Unknown(f"comparing {left!r} {op} {right!r}")


def evaluate_if(condition: object, repository: str | None) -> Truth:
    """Whether a job or step with `if: condition` runs in `repository` (owner/name, None when unknown)."""
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
    parser = _Parser(text, repository)
    try:
        value = parser.binary(0)
        if parser.peek() is not None:
            raise ValueError(f"unexpected {parser.peek()!r}")
    except ValueError as e:
        return Truth(None, f"`if: {condition}` cannot be read ({e})")
    if isinstance(value, _Unknown):
        return Truth(None, f"`if: {condition}`: {value.why}", parser.used_repository)
    return Truth(_truthy(value), f"`if: {condition}`", parser.used_repository)
