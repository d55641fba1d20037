"""Probes for global generators seeded by call (numpy's, Python's `random`) and for MLX's print options.

A seeded generator is a leak whatever value it was seeded to (seeding to the state already there
still makes every later draw depend on this test), so the call is what is recorded, not the state:
while the plugin runs, the module's seeding functions (`seed`, and `set_state` / `setstate`) are
replaced by wrappers that count each call and keep the generator's state from just before the first
call after a snapshot (one `get_state` per seeding call, none per test). A snapshot is the count
alone (an int): well under a microsecond a test, where `np.random.get_state()` copies 2.5 kB every time.
Drawing numbers is ordinary use and no change, and so is a test whose last call set the state back
to what it was before its first (saved, seeded, set back). `uninstall()` puts the originals back.

Not seen: a seeding function bound before the wrapper was installed (`from numpy.random import
seed` in a module imported before numpy was first seen, `random._inst.seed`), and calls that
pytest-randomly makes around every test (it reseeds on purpose). numpy is wrapped only once the
tested process has imported it: the plugin never imports numpy itself (only `numpy.random`, which
numpy 2 loads on first use, once numpy is there).
"""

from __future__ import annotations

import functools
import pickle
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

from promote.runners.plugin.probes import Change, Described, Probe
from promote.runners.plugin.sites import Site, Sites

# Callers whose seeding is the test runner's, not the test's.
_RUNNER_MODULES = ("pytest_randomly",)
# States kept for restores at most (one per seeding call since the oldest live snapshot).
_MAX_SAVED = 64


class SeedTracker:
    """Counts the seeding calls of one module's global generator, through wrappers of its functions.

    `kinds` maps each wrapped function name to the kind of change a call is ("seed call", "set").
    `get` / `set` read and write the whole state (the originals, unwrapped), used only around calls.
    `sites`: where each call is made is read from the stack (None: not read).
    """

    def __init__(
        self, name: str, module: ModuleType, kinds: dict[str, str], get: str, set: str, sites: Sites | None = None
    ) -> None:
        self.name, self.module, self.sites = name, module, sites
        self.get: Callable[[], Any] = getattr(module, get)
        self.set: Callable[[Any], Any] = getattr(module, set)
        # (function called, kind of change, where it was called), in order: snapshots index it.
        self.calls: list[tuple[str, str, Site | None]] = []
        self.saved: dict[int, Any] = {}  # call index -> the state just before that call
        self.applied: list[tuple[str, Any, Any]] = []
        for fn, kind in kinds.items():
            original = getattr(module, fn, None)
            if callable(original):
                wrapper = self._wrap(original, fn, kind)
                setattr(module, fn, wrapper)
                self.applied.append((fn, original, wrapper))

    def _wrap(self, original: Callable[..., Any], fn: str, kind: str) -> Callable[..., Any]:
        @functools.wraps(original)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            frame = sys._getframe(1)
            if not str(frame.f_globals.get("__name__", "")).startswith(_RUNNER_MODULES):
                if len(self.saved) >= _MAX_SAVED:
                    self.saved.pop(min(self.saved))
                self.saved[len(self.calls)] = self.get()
                site = self.sites.at(frame) if self.sites is not None else None
                self.calls.append((f"{self.module.__name__}.{fn}", kind, site))
            return original(*args, **kwargs)

        return wrapper

    def snapshot(self) -> int:
        return len(self.calls)

    def changes(self, before: int, after: int) -> list[Change]:
        """One change per kind of call made between the snapshots (`name (seed call)`, `name (set)`)."""
        made = self.calls[before:after]
        if made and made[-1][1] == "set" and self._put_back(before):
            # Saved, seeded, then set back as it was (hypothesis does it around every example): no leak.
            return []
        out = []
        for kind in dict.fromkeys(k for _, k, _ in made):
            called = ", ".join(dict.fromkeys(fn for fn, k, _ in made if k == kind))
            sites = tuple(dict.fromkeys(site for _, k, site in made if k == kind and site is not None))
            before_, after_ = Described("not called"), Described(f"{called} called")
            out.append(Change(f"{self.name} ({kind})", before_, after_, kind, sites))
        return out

    def _put_back(self, before: int) -> bool:
        """Whether the state now is the one from before the first call after `before` (asked only after calls)."""
        if before not in self.saved:
            return False
        try:
            return pickle.dumps(self.get()) == pickle.dumps(self.saved[before])
        except Exception:
            return False

    def restore(self, before: int) -> None:
        """Put back the state from just before the first seeding call after `before`."""
        state = self.saved.get(before)
        if state is None:
            raise RuntimeError(f"the state before call {before + 1} was not kept")
        self.set(state)
        for index in [i for i in self.saved if i <= before]:
            del self.saved[index]

    def probe(self) -> Probe:
        return Probe(self.name, self.snapshot, self.restore, self.changes)

    def uninstall(self) -> None:
        for fn, original, wrapper in reversed(self.applied):
            if getattr(self.module, fn, None) is wrapper:
                setattr(self.module, fn, original)
        self.applied.clear()


def python_random(sites: Sites | None = None) -> SeedTracker:
    """Python's `random` module: `seed` and `setstate` calls."""
    import random

    kinds = {"seed": "seed call", "setstate": "set"}
    return SeedTracker("random.state", random, kinds, "getstate", "setstate", sites)


class NumpyRandom:
    """numpy's global generator, wrapped once the tested process has imported numpy (never imported here)."""

    name = "numpy.random.state"

    def __init__(self, sites: Sites | None = None) -> None:
        self.tracker: SeedTracker | None = None
        self.sites = sites

    def _ready(self) -> SeedTracker | None:
        if self.tracker is None:
            numpy = sys.modules.get("numpy")
            # numpy 2 imports numpy.random on first use of the attribute: once numpy is there, so is it.
            random = getattr(numpy, "random", None) if numpy is not None else None
            if isinstance(random, ModuleType) and callable(getattr(random, "get_state", None)):
                kinds = {"seed": "seed call", "set_state": "set"}
                self.tracker = SeedTracker(self.name, random, kinds, "get_state", "set_state", self.sites)
        return self.tracker

    def snapshot(self) -> int:
        tracker = self._ready()
        return tracker.snapshot() if tracker is not None else 0

    def changes(self, before: int, after: int) -> list[Change]:
        return self.tracker.changes(before, after) if self.tracker is not None else []

    def restore(self, before: int) -> None:
        if self.tracker is not None:
            self.tracker.restore(before)

    def probe(self) -> Probe:
        return Probe(self.name, self.snapshot, self.restore, self.changes)

    def uninstall(self) -> None:
        if self.tracker is not None:
            self.tracker.uninstall()


class PrintOptions:
    """MLX's print options (`mx.get_printoptions()`, an object with one attribute per option)."""

    name = "mlx.print_options"

    def __init__(self, mx: ModuleType) -> None:
        self.get, self.set = mx.get_printoptions, mx.set_printoptions
        current = self.get()
        self.fields = tuple(f for f in dir(current) if not f.startswith("_") and not callable(getattr(current, f)))
        if not self.fields:
            raise AttributeError("mx.get_printoptions() has no options to read")

    def snapshot(self) -> dict[str, object]:
        current = self.get()
        return {f: getattr(current, f) for f in self.fields}

    def restore(self, before: dict[str, Any]) -> None:
        self.set(**before)

    def probe(self) -> Probe:
        return Probe(self.name, self.snapshot, self.restore)
