"""A workflow's `on:`: whether it starts for a push, pull request or merge queue into trunk, and for which files."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

# Events that run a workflow on a change before or as it lands on trunk.
_BRANCH_EVENTS = ("push", "pull_request", "merge_group")
_TARGET = "pull_request_target"


@dataclass(frozen=True)
class Event:
    """One event that starts the workflow for a change to trunk, with its `paths` filters."""

    name: str
    paths: tuple[str, ...] = ()
    paths_ignore: tuple[str, ...] = ()

    def fires_for(self, path: str) -> bool:
        """Whether a change to repo-relative `path` alone starts the workflow through this event."""
        if self.paths_ignore and matches(self.paths_ignore, path):
            return False
        return not self.paths or matches(self.paths, path)

    def describe(self) -> str:
        if self.paths:
            return f"{self.name} (paths: {', '.join(self.paths)})"
        if self.paths_ignore:
            return f"{self.name} (paths-ignore: {', '.join(self.paths_ignore)})"
        return self.name


@dataclass(frozen=True)
class Trigger:
    """The events that make a workflow guard merges to trunk; `guards` None when that cannot be told."""

    events: tuple[Event, ...]
    guards: bool | None
    why: str = ""  # why it does not (or may not) guard trunk
    called: bool = False  # `workflow_call`: guards trunk when a workflow that does calls it

    def fires_for(self, path: str) -> bool:
        return any(e.fires_for(path) for e in self.events)

    def filtered(self) -> bool:
        """True when some change to trunk does not start it (a `paths` filter on every event)."""
        return all(e.paths or e.paths_ignore for e in self.events)


def read_on(on: object, trunk: str) -> Trigger:
    """The Trigger of a workflow whose `on:` is `on` (string, list or mapping), for branch `trunk`."""
    table: dict[str, object]
    if isinstance(on, str):
        table = {on: None}
    elif isinstance(on, list):
        table = {str(e): None for e in on}
    elif isinstance(on, dict):
        table = {str(k): v for k, v in on.items()}
    else:
        return Trigger((), None, f"`on: {on}` cannot be read")
    events: list[Event] = []
    excluded: list[str] = []
    for name in _BRANCH_EVENTS:
        if name not in table:
            continue
        event, why = _branch_event(name, table[name], trunk)
        if event is not None:
            events.append(event)
        else:
            excluded.append(why)
    called = "workflow_call" in table
    if events:
        return Trigger(tuple(events), True, called=called)
    if _TARGET in table:
        why = f"runs on {_TARGET}, which tests the pull request's code only if the job checks it out"
        return Trigger((Event(_TARGET),), None, why, called)
    names = ", ".join(table) or "nothing"
    why = f"never starts for a change to {trunk} (on: {names}{''.join(f'; {w}' for w in excluded)})"
    return Trigger((), False, why, called)


def _branch_event(name: str, spec: object, trunk: str) -> tuple[Event | None, str]:
    """The event when it fires for `trunk`, else (None, why not)."""
    filters = spec if isinstance(spec, dict) else {}
    branches = _strings(filters.get("branches"))
    ignored = _strings(filters.get("branches-ignore"))
    if name == "push" and branches is None and ignored is None and ("tags" in filters or "tags-ignore" in filters):
        return None, "push: only tags"
    if branches is not None and not matches(branches, trunk):
        return None, f"{name}: branches {', '.join(branches)}"
    if ignored is not None and matches(ignored, trunk):
        return None, f"{name}: branches-ignore {', '.join(ignored)}"
    if name == "merge_group":
        return Event(name), ""
    return Event(
        name, tuple(_strings(filters.get("paths")) or ()), tuple(_strings(filters.get("paths-ignore")) or ())
    ), ""


def _strings(value: object) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value] if isinstance(value, list) else None


def matches(patterns: Sequence[str], name: str) -> bool:
    """GitHub's filter: patterns in order, a `!` pattern takes back what the ones before it matched."""
    hit = False
    for pattern in patterns:
        negated = pattern.startswith("!")
        if _compiled(pattern[1:] if negated else pattern).fullmatch(name):
            hit = not negated
    return hit


@lru_cache(maxsize=512)
def _compiled(pattern: str) -> re.Pattern[str]:
    """GitHub's filter glob: `**` any characters, `*` any but `/`, `?` and `+` quantify the character before."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] in "?+" and out:
            out.append(pattern[i])
            i += 1
        elif pattern[i] == "[" and (end := pattern.find("]", i)) > i:
            out.append(pattern[i : end + 1])
            i = end + 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    try:
        return re.compile("".join(out))
    except re.error:
        return re.compile(re.escape(pattern))
