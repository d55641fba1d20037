"""Test ids as promote writes them: redacted like every other text, and kept apart when two redact alike."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from promote.core.redact import MASK, Redactor, current


@dataclass(frozen=True)
class ShownIds:
    """The collected ids and, for each whose redacted form differs, that form; `redactor` is what made them.

    While the process's redactor is still that one (the environment's secrets unchanged), a collected id is
    written as recorded here without redacting it again: it is written twice a test, and redacting each time
    was most of what the plugin spent on a test beyond its probes.
    """

    redactor: Redactor
    collected: frozenset[str]
    ids: dict[str, str]


SHOWN = pytest.StashKey[ShownIds]()


def shown_ids(nodeids: list[str]) -> ShownIds:
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
    return ShownIds(redact, frozenset(nodeids), out)


def shown_id(config: pytest.Config, nodeid: str, parent: str | None = None) -> str:
    """`nodeid` as written: a subtest's id (its parent's id and a description) keeps its parent's shown form."""
    if parent is not None and nodeid != parent and nodeid.startswith(parent):
        return shown_id(config, parent) + current()(nodeid[len(parent) :])
    known, redact = config.stash.get(SHOWN, None), current()
    if known is not None and nodeid in known.ids:
        return known.ids[nodeid]
    if known is not None and redact is known.redactor and nodeid in known.collected:
        return nodeid
    return redact(nodeid)
