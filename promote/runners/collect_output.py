"""The one reader of what `python -m pytest --collect-only -q` prints: the test ids, the modules it could not collect.

pytest's output is outside text (a conftest may print anything while it is imported), and its size is the
suite's: `read_collection` takes at most MAX_BYTES, and gives a `Collection` or raises `CollectionUnreadable`,
nothing else. The ids are the leading block of lines with `::` in them; pytest's own last line counts them, and a
block that does not hold that many ids is refused rather than half read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from promote.core.vocab import CollectFault

MAX_BYTES = 32 * 1024 * 1024  # about 300,000 test ids: far beyond a repository's suite
# `5 tests collected`, `1 test collected`, `5/7 tests collected (2 deselected)`, `no tests collected`, each maybe
# followed by `, 1 error`, warnings and the time.
# At most nine digits: int() of a longer run of digits is refused by Python itself past a few thousand.
_SUMMARY = re.compile(r"^(?:(?P<n>\d{1,9})(?:/\d{1,9})? tests? collected|no tests collected)\b(?P<rest>.*)$")
_ERRORS = re.compile(r"\b(\d{1,9}) errors?\b")
_ERROR_LINE = re.compile(r"^ERROR (?P<path>\S.*?)(?: - .*)?$")


class CollectionUnreadable(ValueError):
    """pytest's collection output that could not be read as promised: which bound or promise (`kind`), one line why."""

    def __init__(self, kind: CollectFault, detail: str) -> None:
        self.kind: CollectFault = kind
        super().__init__(detail)


@dataclass(frozen=True)
class Collection:
    """The test ids pytest collected (relative to its rootdir), the modules it could not collect, and how many."""

    ids: tuple[str, ...]
    errors: tuple[str, ...] = ()  # as pytest's short summary names them
    error_count: int = 0  # what pytest's last line says (a module it did not name has no path above)


def read_collection(data: bytes) -> Collection:
    """What `pytest --collect-only -q` printed to stdout, read; CollectionUnreadable when it cannot be."""
    if len(data) > MAX_BYTES:
        raise CollectionUnreadable("size", f"more than {MAX_BYTES} bytes of output: not read")
    lines = data.decode("utf-8", "replace").splitlines()
    summary = next((m for m in map(_SUMMARY.match, reversed(lines)) if m is not None), None)
    if summary is None:
        raise CollectionUnreadable("summary", "no line saying how many tests were collected")
    ids = []
    for line in lines:
        if not line.strip() or line.startswith("="):
            break
        if "::" in line and not line[0].isspace():
            ids.append(line)
    expected = int(summary["n"] or 0)
    if expected != len(ids):
        raise CollectionUnreadable("count", f"pytest said it collected {expected} tests; {len(ids)} test ids read")
    errors = tuple(dict.fromkeys(m["path"] for m in map(_ERROR_LINE.match, lines) if m is not None))
    said = _ERRORS.search(summary["rest"])
    return Collection(tuple(ids), errors, max(len(errors), int(said.group(1)) if said is not None else 0))
