"""Test ids as promote writes them: redacted like every other text, and kept apart when two redact alike."""

from __future__ import annotations

import pytest

from promote.core.redact import MASK, current

# Each collected id whose redacted form differs from it, mapped to that form (numbered when shared).
SHOWN = pytest.StashKey[dict[str, str]]()


def shown_ids(nodeids: list[str]) -> dict[str, str]:
    """The redacted form of each id that holds a secret. Ids that would redact to the same text are numbered in
    collection order (`[***1]`, `[***2]`): a number, not a digest of the id, so nothing of the secret can be
    checked against the page, and stable while the collection's order is (every xdist worker collects alike)."""
    redact = current()
    groups: dict[str, list[str]] = {}
    for nodeid in dict.fromkeys(nodeids):
        shown = redact(nodeid)
        if shown != nodeid:
            groups.setdefault(shown, []).append(nodeid)
    out: dict[str, str] = {}
    for shown, ids in groups.items():
        for n, nodeid in enumerate(ids, 1):
            out[nodeid] = shown if len(ids) == 1 else shown.replace(MASK, f"{MASK}{n}", 1)
    return out


def shown_id(config: pytest.Config, nodeid: str, parent: str | None = None) -> str:
    """`nodeid` as written: a subtest's id (its parent's id and a description) keeps its parent's shown form."""
    ids = config.stash.get(SHOWN, {})
    if parent is not None and nodeid != parent and nodeid.startswith(parent):
        return shown_id(config, parent) + current()(nodeid[len(parent) :])
    return ids.get(nodeid) or current()(nodeid)
