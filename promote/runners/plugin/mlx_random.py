"""MLX's global random generator: a test that drew numbers is ordinary use, one that seeded or replaced it leaked.

A draw without an explicit `key=` advances the generator's key `k` to `split(k)[0]` (MLX's
KeySequence; `mx.compile(..., inputs=mx.random.state, outputs=mx.random.state)` does the same inside
the compiled graph). So between two snapshots the key changed by draws alone when the new key is on
that successor chain. Told apart without MLX work in the usual case:
- `mx.random.seed` is wrapped: a call bumps a counter and notes the key it replaced. A seed is a leak
  unless the test seeded back to the key it found from another key (then the key is on the chain again,
  searched by value a short way); a seed called on the key the test started with is a leak whatever
  it left, the key already there included.
- every drawing function of `mx.random` is wrapped to note which key it replaced with which, so the
  key after a test is followed back to the key before it through identity alone.
- `mx.random.state` rebound to another object is a leak (code that reads the attribute sees it).
- a key the notes cannot explain (a compiled sampler, an assignment `state[0] = k` where MLX allows
  it) is looked for on the successor chain by value, evaluated in blocks up to `MAX_DRAWS` draws.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any

from promote.runners.plugin.probes import Change, Described
from promote.runners.plugin.sites import Site, Sites

# Not draws: `key` and `split` take an explicit key and leave the global one alone.
NOT_DRAWS = frozenset({"seed", "key", "split", "state"})
MAX_DRAWS = 4096
MAX_DRAWS_AFTER_SEED = 64
FIRST_BLOCK = 8
MAX_BLOCK = 512
# Followed segments of draws kept at most; past it the notes start over (and the value search answers).
MAX_SEGMENTS = 4096
# Where the latest seeds were called, kept at most (a test that seeds more often is named by its last ones).
MAX_SITES = 64


class RandomSnapshot:
    """The generator's state object as `mx.random.state` names it, its key, and how many seeds so far."""

    __slots__ = ("key", "seed_from", "seeds", "state")

    def __init__(self, state: Any, key: Any, seeds: int, seed_from: Any = None) -> None:
        self.state, self.key, self.seeds = state, key, seeds
        # The key that was in place when the last seed so far was called (None: no seed seen).
        self.seed_from = seed_from

    def __eq__(self, other: object) -> bool:
        # Identity only: a draw replaces the key object, so an unchanged key is the same object.
        if not isinstance(other, RandomSnapshot):
            return NotImplemented
        return self.key is other.key and self.state is other.state and self.seeds == other.seeds

    def __hash__(self) -> int:
        return id(self.key)

    def __repr__(self) -> str:
        try:
            hi, lo = self.key.tolist()
            return f"key[{int(hi)}, {int(lo)}]"
        except Exception as e:
            return f"<key unreadable: {type(e).__name__}: {e}>"


class RandomTracker:
    """Follows `mx.random` through wrappers of `seed` and of the drawing functions."""

    def __init__(
        self, mx: Any, replace: Callable[[Any, str, Callable[[Any], Any]], None], sites: Sites | None = None
    ) -> None:
        self.random = mx.random
        self.sites = sites
        self.seed_sites: dict[int, Site] = {}  # seed number (1, 2, ...) -> where it was called
        self.split = mx.random.split
        self.seed = mx.random.seed
        self.mx = mx
        # The object MLX's own generator reads and writes, whatever the attribute is later bound to.
        self.state = mx.random.state
        self.seeds = 0
        self.seed_from: Any = None
        # id(head) -> (head, root): the draws we saw took the key from root to head, one segment per run.
        self.segments: dict[int, tuple[Any, Any]] = {}
        # The key the last snapshot saw: the segments break there.
        self.mark: Any = self.state[0]
        replace(mx.random, "seed", self._seed_wrapper)
        for name in sorted(dir(mx.random)):
            if not name.startswith("_") and name not in NOT_DRAWS and callable(getattr(mx.random, name)):
                replace(mx.random, name, self._draw_wrapper)

    def _seed_wrapper(self, original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        def seed(*args: Any, **kwargs: Any) -> Any:
            self.seeds += 1
            self.seed_from = self.state[0]
            if self.sites is not None and (site := self.sites.at(sys._getframe(1))) is not None:
                if len(self.seed_sites) >= MAX_SITES:
                    self.seed_sites.pop(min(self.seed_sites))
                self.seed_sites[self.seeds] = site
            return original(*args, **kwargs)

        return seed

    def _draw_wrapper(self, original: Callable[..., Any]) -> Callable[..., Any]:
        state, segments, tracker = self.state, self.segments, self

        @functools.wraps(original)
        def draw(*args: Any, **kwargs: Any) -> Any:
            before = state[0]
            out = original(*args, **kwargs)
            after = state[0]
            if after is not before:
                # Extend the segment `before` ends, else start one: a few dict operations per draw. A key
                # a snapshot saw starts a new segment, so the key after a test leads back to that one and
                # not past it to an older root (under `report` nothing clears the notes between tests).
                seen = None if before is tracker.mark else segments.pop(id(before), None)
                root = seen[1] if seen is not None and seen[0] is before else before
                if len(segments) >= MAX_SEGMENTS:
                    segments.clear()
                segments[id(after)] = (after, root)
            return out

        return draw

    def snapshot(self) -> RandomSnapshot:
        key = self.mark = self.state[0]
        return RandomSnapshot(getattr(self.random, "state", None), key, self.seeds, self.seed_from)

    def changes(self, before: RandomSnapshot, after: RandomSnapshot) -> list[Change]:
        """What a test did to the generator, named for the finding (asked only when `drew_only` is False)."""
        name = "mlx.random.state"
        out = []
        if after.state is not before.state:
            was, now = type(before.state).__name__, type(after.state).__name__
            now = f"another {now} object" if now == was else f"a {now} object"
            out.append(Change(f"{name} (attribute rebound)", Described(f"a {was} object"), Described(now), "rebound"))
        if after.seeds != before.seeds:
            calls = range(before.seeds + 1, after.seeds + 1)
            sites = tuple(dict.fromkeys(self.seed_sites[n] for n in calls if n in self.seed_sites))
            # Said as the call, as for numpy's and Python's generators, never as a key or a seed given: the key a
            # test starts from depends on what ran before it in its process, and a seed is often the clock's
            # (`seed(time.time_ns())`), so quoting either would make two runs of one commit read differently.
            called = Described("mx.random.seed called")
            out.append(Change(f"{name} (mx.random.seed)", Described("not called"), called, "seed call", sites))
        elif after.key is not before.key:
            out.append(Change(f"{name} (key not from a draw)", before, after, "set"))
        return out

    def drew_only(self, before: RandomSnapshot, after: RandomSnapshot) -> bool:
        """Whether the generator changed only by drawing numbers (ordinary use, restored without a finding).

        A test that seeded and then seeded back to the key it found (a `with seeded(n):` block) drew only;
        one whose last seed was called on the very key the test started with moved nothing back, so it
        leaked the seeding, whatever key it left (the key already there, or one a few draws ahead).
        """
        if after.state is not before.state:
            return False
        if after.seeds != before.seeds and after.seed_from is before.key:
            return False
        key = self._follow(after.key, before.key)
        if key is before.key:
            return True
        # After a seed the chain is searched only a little way: a seed that stays is found at once.
        limit = MAX_DRAWS if after.seeds == before.seeds else MAX_DRAWS_AFTER_SEED
        return self._on_chain(before.key, key, limit)

    def _follow(self, key: Any, stop: Any) -> Any:
        """The earliest key that the draws we saw lead from to `key` (`stop` once reached)."""
        for _ in range(len(self.segments) + 1):
            if key is stop:
                break
            seen = self.segments.get(id(key))
            if seen is None or seen[0] is not key:
                break
            key = seen[1]
        return key

    def _on_chain(self, start: Any, target: Any, limit: int) -> bool:
        """Whether `target` equals `start` or a key up to `limit` draws after it (MLX work, in blocks)."""
        mx = self.mx
        try:
            key = start
            if bool(mx.array_equal(key, target)):
                return True
            # Blocks that double: a few draws cost a small evaluation, thousands a few large ones.
            block, searched = FIRST_BLOCK, 0
            while searched < limit:
                block = min(block, limit - searched)
                chain = []
                for _ in range(block):
                    key = self.split(key)[0]
                    chain.append(key)
                if bool(mx.any(mx.all(mx.stack(chain) == target, axis=1))):
                    return True
                searched, block = searched + block, min(block * 2, MAX_BLOCK)
        except Exception:
            return False
        return False

    def restore(self, before: RandomSnapshot) -> None:
        """Put back the attribute and the key as they were in `before`."""
        if getattr(self.random, "state", None) is not before.state:
            self.random.state = before.state
        if self.state[0] is not before.key:
            if isinstance(self.state, list):
                self.state[0] = before.key
            else:
                # MLX 0.32's state object takes no assignment: `seed` takes the key's two words as one seed.
                hi, lo = before.key.tolist()
                self.seed((int(hi) << 32) | int(lo))
        self.segments.clear()
