"""Reading one TOML table: the checks every section parser shares, each error naming the file, key and expectation.

Below both `parse` (the main tables) and `accel_parse` (the accelerations), so neither imports the other.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from promote.core.errors import ConfigError

T = TypeVar("T")


def _is_command(v: object) -> bool:
    return isinstance(v, str) or (isinstance(v, list) and all(isinstance(x, str) for x in v))


class TableReader:
    """Walks the TOML tables; every error names the file, the dotted key and what was expected."""

    def __init__(self, path: Path, prefix: str) -> None:
        self.path = path
        self.prefix = prefix

    def fail(self, key: str, expected: str, got: object = None, *, show_got: bool = True) -> ConfigError:
        got_text = f", got {got!r}" if show_got else ""
        return ConfigError(f"{self.path}: {key}: expected {expected}{got_text}")

    def table(self, raw: object, key: str, allowed: set[str]) -> Mapping[str, Any]:
        if not isinstance(raw, dict):
            raise self.fail(key, "a table", raw)
        unknown = sorted(set(raw) - allowed)
        if unknown:
            import difflib  # only for the error: a valid config never needs it (and it imports heapq)

            near = difflib.get_close_matches(str(unknown[0]), sorted(allowed), n=1)
            hint = f"did you mean {near[0]!r}? " if near else ""
            raise ConfigError(
                f"{self.path}: {key}.{unknown[0]}: unknown key; {hint}expected one of {', '.join(sorted(allowed))}"
            )
        return raw

    def get(
        self,
        tbl: Mapping[str, Any],
        key: str,
        where: str,
        check: Callable[[object], bool],
        expected: str,
        default: T,
    ) -> Any:
        if key not in tbl:
            return default
        value = tbl[key]
        if not check(value):
            raise self.fail(f"{where}.{key}", expected, value)
        return value

    def required(self, tbl: Mapping[str, Any], key: str, where: str, expected: str) -> str:
        if key not in tbl:
            raise self.fail(f"{where}.{key}", f"{expected} (this key is required)", show_got=False)
        value = tbl[key]
        if not isinstance(value, str) or not value.strip():
            raise self.fail(f"{where}.{key}", expected, value)
        return value

    def command(self, tbl: Mapping[str, Any], key: str, where: str) -> tuple[str, ...] | None:
        """A command run without a shell: a string split like a shell would, or a list of arguments."""
        expected = "a command line (string) or a non-empty list of arguments"
        value = self.get(tbl, key, where, _is_command, expected, None)
        if isinstance(value, str):
            try:
                value = shlex.split(value)
            except ValueError as e:
                raise self.fail(f"{where}.{key}", f"{expected} ({e})", tbl[key]) from None
        if value is not None and not value:
            raise self.fail(f"{where}.{key}", expected, tbl[key])
        return None if value is None else tuple(value)
