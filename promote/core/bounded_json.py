"""JSON that someone else wrote, read within bounds: a typed value, or one `JSONBoundsError`, never another exception.

Python's `json` recurses once per nesting level (a document nested 100 000 deep is a RecursionError), turns a
number of thousands of digits into an int-conversion ValueError, and reads `1e999` as infinity. So the depth is
measured first without recursion (the brackets outside strings), numbers are bounded as they are parsed, and
every way a document can fail comes out as the one error, its `fault` saying which bound it broke. Readers of
documents that other people or programs write (published pages, a tool's outputs) share this one parse; what
each field must hold is checked by the reader that knows the document.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from promote.core.vocab import JsonFault

MAX_BYTES = 16 * 1024 * 1024
MAX_DEPTH = 64
# A JSON integer beyond 64 bits fits no column, counter or index promote keeps; checked by digits first so that a
# number of thousands of digits is never converted at all.
INT_MIN, INT_MAX = -(2**63), 2**63 - 1

# A string (with its escapes), or a bracket: brackets inside strings do not nest anything.
_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', re.S)


class JSONBoundsError(ValueError):
    """A document that is not JSON within the bounds: too large, too deep, a number out of range, or malformed."""

    def __init__(self, fault: JsonFault, detail: str) -> None:
        super().__init__(detail)
        self.fault: JsonFault = fault


def depth(text: str) -> int:
    """The deepest nesting of `text`'s arrays and objects, brackets inside strings not counted (no recursion)."""
    level = deepest = 0
    for m in _TOKEN.finditer(text):
        c = m.group()
        if c in "[{":
            level += 1
            deepest = max(deepest, level)
        elif c in "]}":
            level -= 1
    return deepest


def _integer(digits: str) -> int:
    if len(digits.lstrip("-")) > 19:
        raise JSONBoundsError("number", f"an integer of {len(digits)} characters")
    value = int(digits)
    if not INT_MIN <= value <= INT_MAX:
        raise JSONBoundsError("number", f"the integer {value} is beyond 64 bits")
    return value


def _real(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise JSONBoundsError("number", f"the number {text[:40]} is beyond a float's range")
    return value


def _constant(name: str) -> float:
    raise JSONBoundsError("syntax", f"{name} is not JSON")


def loads(data: bytes | str, *, max_bytes: int = MAX_BYTES, max_depth: int = MAX_DEPTH) -> Any:
    """`data` parsed as JSON (UTF-8 when bytes), within `max_bytes` and `max_depth`; JSONBoundsError otherwise."""
    size = len(data) if isinstance(data, bytes) else len(data.encode("utf-8", "surrogatepass"))
    if size > max_bytes:
        raise JSONBoundsError("size", f"{size} bytes, more than {max_bytes}")
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
    except UnicodeDecodeError as e:
        raise JSONBoundsError("syntax", f"not UTF-8 at byte {e.start}") from None
    deepest = depth(text)
    if deepest > max_depth:
        raise JSONBoundsError("depth", f"nested {deepest} deep, more than {max_depth}")
    try:
        return json.loads(text, parse_int=_integer, parse_float=_real, parse_constant=_constant)
    except JSONBoundsError:
        raise
    except (ValueError, RecursionError) as e:  # JSONDecodeError is a ValueError; recursion cannot pass the depth
        raise JSONBoundsError("syntax", f"not JSON: {e}") from None
