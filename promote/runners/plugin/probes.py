"""Leak probes: snapshot global state before a test, compare after it, and put it back.

A probe is a name, a `snapshot()` and (optionally) a `restore(value)`. Projects add their own
through the entry point group `promote.probes`: the entry point names a probe (any object with
`name`, `snapshot` and optionally `restore` / `diff` / `ordinary`) or a callable that returns one or a list.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any, NamedTuple

from promote.core.findings import Finding
from promote.core.redact import redact, secret_name
from promote.runners.plugin.sites import Site

ENTRY_POINT_GROUP = "promote.probes"
# The name inside a mapping key's brackets: `os.environ[HF_TOKEN]` -> `HF_TOKEN`.
_MAPPING_KEY = re.compile(r"\[(?P<name>[^\[\]]*)\]$")
MAX_VALUE_CHARS = 200


class Missing:
    """The value of a key that is absent on one side of a comparison."""

    def __repr__(self) -> str:
        return "<unset>"


MISSING = Missing()


class Change(NamedTuple):
    """One key whose value differs: `before -> after`; `kind` says how ("set", "seed call"), for grouping.

    `sites`: the calls that made it, where the probe saw them (a wrapped setter); none for a change only observed.
    """

    key: str
    before: object
    after: object
    kind: str = "set"
    sites: tuple[Site, ...] = ()


class Described(str):
    """What a probe says of a state rather than the state's value ("not called"): shown as it reads, never quoted."""

    __slots__ = ()

    def __repr__(self) -> str:
        return str.__str__(self)


@dataclass(frozen=True)
class Probe:
    """A piece of global state to watch; `diff` defaults to per-key for mappings, else `!=`.

    `diff` is asked only about snapshots that are not equal (`==`): equal ones have no changes.
    `ordinary(before, after)`, asked only about a change, says it is ordinary use (drawing random
    numbers): restored under the `restore` policy and counted, with no finding.
    """

    name: str
    snapshot: Callable[[], object]
    restore: Callable[[Any], None] | None = None
    diff: Callable[[Any, Any], list[Change]] | None = None
    ordinary: Callable[[Any, Any], bool] | None = None

    def changes(self, before: object, after: object) -> list[Change]:
        """What differs between two snapshots of this probe."""
        if self.diff is not None:
            return self.diff(before, after)
        if _same(before, after):
            return []
        if isinstance(before, Mapping) and isinstance(after, Mapping):
            return mapping_changes(self.name, before, after)
        return [Change(self.name, before, after)]


class Unreadable:
    """A snapshot that raised: equal to another with the same error, so it is reported once."""

    def __init__(self, error: BaseException) -> None:
        self.text = f"<unreadable: {type(error).__name__}: {error}>"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Unreadable) and other.text == self.text

    def __hash__(self) -> int:
        return hash(self.text)

    def __repr__(self) -> str:
        return self.text


def _same(a: object, b: object) -> bool:
    # `==` may return a non-bool (arrays) or raise; either way it is not a clean "equal".
    try:
        return a is b or bool(a == b)
    except Exception:
        return False


def mapping_changes(name: str, before: Mapping[Any, Any], after: Mapping[Any, Any]) -> list[Change]:
    """Per-key changes between two mappings, keys shown as `name[key]`."""
    out = []
    for k in sorted(set(before) | set(after), key=str):
        b, a = before.get(k, MISSING), after.get(k, MISSING)
        if not _same(b, a):
            out.append(Change(f"{name}[{k}]", b, a))
    return out


def show(key: str, value: object) -> str:
    """A value for a message: under a secret-looking mapping key as `***`, else redacted like all output.

    Only the name a value is stored under (`os.environ[HF_TOKEN]`) says it is a secret; a probe's own
    name does not (an MLX random key or a tokenizer cache size is no credential), and a secret elsewhere
    is still caught by value and by shape.
    """
    if value is MISSING:
        return repr(value)
    named = _MAPPING_KEY.search(key)
    if named is not None and secret_name(named["name"]):
        return "***"
    text = redact(repr(value))
    return text if len(text) <= MAX_VALUE_CHARS else text[: MAX_VALUE_CHARS - 3] + "..."


def show_change(change: Change) -> tuple[str, str, str]:
    """`(key, before, after)` as a finding shows them.

    Two sequences (sys.path, warning filters) show only what differs, the entries both share counted: a
    long one cut at `MAX_VALUE_CHARS` would otherwise read the same before and after.
    """
    before, after = change.before, change.after
    if isinstance(before, (tuple, list)) and isinstance(after, (tuple, list)):
        before, after = _elided(before, after)
    return change.key, show(change.key, before), show(change.key, after)


def change_text(key: str, before: str, after: str, kind: str) -> str:
    """One change as a finding says it (`key: before -> after`), never as a change from a value to the same."""
    if before != after:
        return f"{key}: {before} -> {after}"
    if kind == "set":
        # Values that differ can read the same once masked.
        return f"{key}: {after} (another value that shows the same)"
    # A call is a change whatever it left: seeding to the key already there still seeds.
    return f"{key}: {after}, set again to the value it had"


def _elided(before: Sequence[Any], after: Sequence[Any]) -> tuple[object, object]:
    """Both sequences without the entries they share at the start and at the end, those counted."""
    limit = min(len(before), len(after))
    head = 0
    while head < limit and _same(before[head], after[head]):
        head += 1
    tail = 0
    while tail < limit - head and _same(before[-1 - tail], after[-1 - tail]):
        tail += 1
    if head + tail == 0:
        return before, after
    return _Elided(before, head, tail), _Elided(after, head, tail)


class _Elided:
    """A sequence shown as its middle, with how many entries before and after it are the same on both sides."""

    def __init__(self, items: Sequence[Any], head: int, tail: int) -> None:
        self.middle = list(items[head : len(items) - tail])
        self.head, self.tail = head, tail

    def __repr__(self) -> str:
        parts = [f"{self.head} unchanged"] if self.head else []
        parts += [repr(item) for item in self.middle]
        parts += [f"{self.tail} unchanged"] if self.tail else []
        return f"({', '.join(parts)})"


def as_probe(obj: Any) -> Probe:
    """Accept a `Probe` or any object with `name`, `snapshot` and optionally `restore` / `diff` / `ordinary`."""
    if isinstance(obj, Probe):
        return obj
    if not isinstance(getattr(obj, "name", None), str) or not callable(getattr(obj, "snapshot", None)):
        raise TypeError(f"{obj!r} is not a probe (needs a str `name` and a `snapshot()`)")
    parts = (getattr(obj, "restore", None), getattr(obj, "diff", None), getattr(obj, "ordinary", None))
    return Probe(obj.name, obj.snapshot, *parts)


def entry_point_probes() -> tuple[list[Probe], list[Finding]]:
    """Probes that installed packages register under `promote.probes`, and any that failed."""
    probes: list[Probe] = []
    problems: list[Finding] = []
    for ep in _group(ENTRY_POINT_GROUP):
        try:
            obj = ep.load()
            if not isinstance(obj, Probe) and not hasattr(obj, "snapshot") and callable(obj):
                obj = obj()
            items: Iterable[Any] = obj if isinstance(obj, (list, tuple)) else [obj]
            probes.extend(as_probe(o) for o in items)
        except Exception as e:
            message = f"probe {ep.name} ({ep.value}) is off: {type(e).__name__}: {e}"
            problems.append(Finding("leaked-state", "warning", ep.name, message))
    return probes, problems


def _group(name: str) -> list[Any]:
    """The entry points of one group (Python 3.9's `entry_points()` takes no `group` and returns a dict)."""
    try:
        return list(entry_points(group=name))
    except TypeError:  # Python 3.9
        found: Any = entry_points()
        return list(found.get(name, ()))
