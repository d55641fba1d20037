"""Bounded JSON: the one reader of the JSON a team's tool writes (an object in a file, or one value per line).

Python's `json` recurses once per level of nesting and converts every integer however long: a 50,000-deep
document raises RecursionError and a 5,000-digit number ValueError, and a 400-digit one reaches arithmetic
that raises OverflowError. Here the nesting is measured before parsing (brackets counted outside strings,
no recursion) and every number is checked as it is parsed, so the reader returns a value or raises
`JsonRejected`, and nothing else.
"""

from __future__ import annotations

import json
import math
import re
from itertools import accumulate
from pathlib import Path
from typing import Dict, List, Union, cast  # noqa: UP035

from promote.core.vocab import JsonFault

# The values JSON can hold, as `json` gives them. Spelled with `Union` and `Dict`: the pytest plugin imports this
# module (through core.station) in the tested interpreter, which may be Python 3.9.
Json = Union[bool, int, float, str, List["Json"], Dict[str, "Json"], None]  # noqa: UP006, UP007
JsonObject = Dict[str, Json]  # noqa: UP006

MAX_DEPTH = 64  # a tool's output nests a few levels; deeper is no output of a tool but an attack
MAX_BYTES = 64 * 1024 * 1024  # one document, or one file of lines
INT_RANGE = 2**63  # |n| below this: a count, a token id or a size, never more than 64 bits
_INT_DIGITS = len(str(INT_RANGE))

# A JSON string, escapes included; one left open runs to the end (its closing quote optional, so that a
# string never closed is one match, not a fresh scan to the end from each of its quotes: linear, not quadratic).
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


class JsonRejected(ValueError):
    """Input the bounded reader refused: what was wrong (`kind`) and one line saying so (no input text in it)."""

    def __init__(self, kind: JsonFault, detail: str, line: int | None = None) -> None:
        self.kind: JsonFault = kind
        self.line = line
        where = f"line {line}: " if line is not None else ""
        super().__init__(where + detail)


def _too_deep(text: str) -> bool:
    """Nested deeper than MAX_DEPTH, counted without recursion, stopping at the first level too deep."""
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return False  # cannot be deeper than its openers: no scan for ordinary documents
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    # Innermost pairs removed a level at a time, at C speed: a well-formed shallow document empties.
    remaining = brackets
    for _ in range(MAX_DEPTH):
        shorter = remaining.replace("[]", "").replace("{}", "")
        if shorter == remaining:
            break
        remaining = shorter
    if not remaining:
        return False
    # Deep or malformed: walk the levels, stopping at the first one too deep.
    return any(depth > MAX_DEPTH for depth in accumulate(_STEP[c] for c in brackets))


def _int(digits: str) -> int:
    # Checked before int(): Python refuses to convert more than 4,300 digits, and a huge one overflows later.
    if len(digits.lstrip("-")) > _INT_DIGITS:
        raise JsonRejected("number", f"an integer of {len(digits.lstrip('-'))} digits is out of range")
    value = int(digits)
    if not -INT_RANGE < value < INT_RANGE:
        raise JsonRejected("number", "an integer out of the 64-bit range")
    return value


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise JsonRejected("number", f"a number of {len(text)} characters is out of range")
    return value


def _constant(name: str) -> float:
    raise JsonRejected("number", f"{name} is not a JSON number")


def loads(text: str, *, line: int | None = None) -> Json:
    """One JSON value, or `JsonRejected` (syntax, size, depth, number)."""
    if len(text) > MAX_BYTES:
        raise JsonRejected("size", f"larger than {MAX_BYTES // 2**20} MiB", line)
    if _too_deep(text):
        raise JsonRejected("depth", f"nested deeper than {MAX_DEPTH} levels", line)
    try:
        return cast(Json, json.loads(text, parse_int=_int, parse_float=_float, parse_constant=_constant))
    except JsonRejected as e:
        raise JsonRejected(e.kind, str(e), line) from None
    except json.JSONDecodeError as e:
        raise JsonRejected("syntax", f"not JSON ({e.msg} at column {e.colno})", line) from None
    except (ValueError, RecursionError) as e:  # what the checks above should leave nothing to reach
        raise JsonRejected("syntax", f"not JSON ({type(e).__name__})", line) from None


def load_object(text: str) -> JsonObject:
    """One JSON object (`{...}`), or `JsonRejected`, of kind `type` when the value is anything else."""
    value = loads(text)
    if not isinstance(value, dict):
        raise JsonRejected("type", f"a JSON {_kind(value)}, not an object")
    return value


def _kind(value: Json) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    return "number" if isinstance(value, (int, float)) else "string" if isinstance(value, str) else "array"


def _bytes(path: Path, upto: int | None = None) -> tuple[bytes, bool]:
    """The file's first bytes (at most MAX_BYTES, or `upto`), and whether it held more than MAX_BYTES."""
    limit = MAX_BYTES if upto is None else min(upto, MAX_BYTES)
    with path.open("rb") as f:
        data = f.read(limit + 1)
    if upto is not None and upto <= MAX_BYTES:
        return data[:upto], False
    return data[:MAX_BYTES], len(data) > MAX_BYTES


def read_object(path: Path) -> JsonObject:
    """The JSON object in a file; `JsonRejected` for what it holds, OSError (FileNotFoundError...) for the file."""
    data, more = _bytes(path)
    if more:
        raise JsonRejected("size", f"larger than {MAX_BYTES // 2**20} MiB")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise JsonRejected("encoding", f"not UTF-8 (byte {e.start})") from None
    return load_object(text)


def parse_lines(text: str) -> list[Json | JsonRejected]:
    """Each non-blank line's value, or why it was refused (its `line` numbered from 1): never a raise."""
    out: list[Json | JsonRejected] = []
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                out.append(loads(line, line=n))
            except JsonRejected as e:
                out.append(e)
    return out


def read_lines(path: Path, *, upto: int | None = None) -> list[Json | JsonRejected]:
    """A JSON-lines file's values (its first `upto` bytes); bytes not UTF-8 are replaced, more than MAX_BYTES is
    one refused entry of kind `size` at the end. OSError (FileNotFoundError...) for the file itself."""
    data, more = _bytes(path, upto)
    out = parse_lines(data.decode("utf-8", errors="replace"))
    if more:
        out.append(JsonRejected("size", f"the file is larger than {MAX_BYTES // 2**20} MiB: the rest is not read"))
    return out
