"""Where a fleet's controller sends each test: only to workers that collected it, longest first.

A worker collects only what its station can run (fleet_worker.placed_elsewhere), so "collected there" is
"can run there". A worker that dies gives its queued tests back to the others; a test no live worker
collected is left unplaced, and said so, rather than waited for.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

# Tests queued on a worker beyond the one it runs: xdist runs a test once it knows the next one. More
# would leave the fleet's end uneven, and more to hand back when a station drops.
MAX_QUEUED = 4


class Placement:
    """An xdist scheduler (the `Scheduling` protocol of xdist.scheduler) over workers that collected differently."""

    def __init__(self, expected: int, durations: Mapping[str, float]) -> None:
        self.expected = expected  # collections still to come: the first workers, then any replacement
        self.durations = durations
        self.node2coll: dict[Any, dict[str, int]] = {}
        self.node2ids: dict[Any, list[str]] = {}
        self.node2pending: dict[Any, list[int]] = {}
        self.pending: list[str] | None = None  # None until the first collections are all in
        self.known: set[str] = set()
        self.unplaced: list[str] = []
        self.dead: set[Any] = set()  # workers a send failed to reach, until xdist says they are down
        self.sent: dict[str, Any] = {}  # each test and the worker it was last sent to
        # A worker came, went or stopped answering: some pending test may have no worker left to run it.
        self.stale = True

    @property
    def nodes(self) -> list[Any]:
        return list(self.node2pending)

    @property
    def collection_is_completed(self) -> bool:
        return self.expected <= 0 and bool(self.node2coll)

    @property
    def tests_finished(self) -> bool:
        if not self.collection_is_completed or self.pending is None:
            return False
        if self.stale:
            self._prune()
        return not self.pending and all(len(p) < 2 for p in self.node2pending.values())

    @property
    def has_pending(self) -> bool:
        return bool(self.pending) or any(self.node2pending.values())

    def expect(self) -> None:
        """One more worker is starting (a replacement): wait for its collection too."""
        self.expected += 1

    def add_node(self, node: Any) -> None:
        self.node2pending[node] = []

    def add_node_collection(self, node: Any, collection: Sequence[str]) -> None:
        self.expected -= 1
        self.stale = True
        ids = list(collection)
        self.node2ids[node] = ids
        self.node2coll[node] = {nodeid: i for i, nodeid in enumerate(ids)}
        if self.pending is not None:
            # A worker that joined late may have collected tests no other did.
            fresh = [nodeid for nodeid in ids if nodeid not in self.known]
            self.known.update(fresh)
            self.pending += fresh

    def mark_test_complete(self, node: Any, item_index: int, duration: float = 0) -> None:
        self.node2pending[node].remove(item_index)
        self._fill(node)

    def mark_test_pending(self, item: str) -> None:
        if self.pending is not None:
            self.pending.insert(0, item)
            self._fill_all()

    def remove_pending_tests_from_node(self, node: Any, indices: Sequence[int]) -> None:
        raise NotImplementedError("promote's placement never steals tests")

    def remove_node(self, node: Any) -> str | None:
        """Forget a worker that ended or died; its queued tests go back first in line. The one it ran: returned."""
        self.stale = True
        queued = self.node2pending.pop(node, [])
        ids = self.node2ids.pop(node, None)
        self.node2coll.pop(node, None)
        if ids is None:
            self.expected -= 1  # it died before it collected: no collection of its to wait for
        if not queued or ids is None:
            self._fill_all()
            return None
        crashed = ids[queued[0]]
        if self.pending is not None:
            self.pending[:0] = [ids[i] for i in queued[1:]]
        self._fill_all()
        return crashed

    def schedule(self) -> None:
        if self.pending is None:
            order: dict[str, None] = {}
            for ids in self.node2ids.values():
                order.update(dict.fromkeys(ids))
            self.known = set(order)
            # Longest first (by the history's durations), so that the last tests to start are short ones.
            self.pending = sorted(order, key=lambda nodeid: -self.durations.get(nodeid, 0.0))
        self._fill_all()

    def _prune(self) -> None:
        """Tests no live worker collected: unplaced, once no other collection is awaited."""
        if self.pending is None or self.expected > 0:
            return
        self.stale = False
        live = [coll for node, coll in self.node2coll.items() if not node.shutting_down and node not in self.dead]
        stranded = [nodeid for nodeid in self.pending if not any(nodeid in coll for coll in live)]
        if stranded:
            gone = set(stranded)
            self.unplaced += stranded
            self.pending = [nodeid for nodeid in self.pending if nodeid not in gone]

    def _fill_all(self) -> None:
        # No pruning here: a worker that just died may be replaced (its collection is then awaited).
        for node in self.nodes:
            self._fill(node)

    def _fill(self, node: Any) -> None:
        if node.shutting_down or node in self.dead or self.pending is None or node not in self.node2coll:
            return
        coll = self.node2coll[node]
        queued = self.node2pending[node]
        mine = [nodeid for nodeid in self.pending if nodeid in coll]
        share = len(mine) // (2 * max(1, len(self.node2coll)))
        want = max(2, min(MAX_QUEUED, share)) - len(queued)
        send = mine[: max(0, want)]
        if send:
            taken = set(send)
            self.pending = [nodeid for nodeid in self.pending if nodeid not in taken]
            indices = [coll[nodeid] for nodeid in send]
            try:
                node.send_runtest_some(indices)
            except OSError:
                # Its connection is gone (its station dropped) and its own errordown is on its way: keep the tests.
                self.pending[:0] = send
                self.dead.add(node)
                self.stale = True
                return
            queued.extend(indices)
            self.sent.update(dict.fromkeys(send, node))
        elif not mine:
            # Nothing more for it: shut down, so that it runs the test it holds (xdist waits for a next one).
            self.stale = True  # its collection no longer counts as a place to run anything
            node.shutdown()
