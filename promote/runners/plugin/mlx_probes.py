"""Probes for MLX's global state: default device and streams, compile, limits, random state.

MLX 0.32 has no getter for some of it, and reading by behaviour costs per test, so:
- compile enabled: read once by behaviour (a tiny `mx.compile`d function counts its traces;
  with compile on, a second call is served from the compile cache and does not trace again),
  then followed by wrapping `mx.enable_compile` / `mx.disable_compile` (~7 us saved per read).
- cache and wired limits: only `set_*_limit` (which returns the previous value) reads them, and
  a set costs tens of microseconds right after an evaluation. So they are read once, then
  followed by wrapping `set_cache_limit` / `set_wired_limit` (in `mlx.core` and `mlx.core.metal`).
  The memory limit has a getter and is read each time.
- `untracked()` re-reads compile and the limits for real at session end: a change made behind
  the wrappers (a function imported before the plugin loaded, C++ code) is reported, not hidden.
- random state: see promote/runners/plugin/mlx_random.py. Drawing numbers is ordinary use, restored
  without a finding and counted; seeding, rebinding or replacing the key is a leak.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from types import ModuleType
from typing import Any

from promote.runners.plugin.mlx_random import RandomTracker
from promote.runners.plugin.probes import Probe

RANDOM_PROBE = "mlx.random.state"


class _Patches:
    """Functions in MLX modules replaced by tracking wrappers, and how to put them back."""

    def __init__(self) -> None:
        self.applied: list[tuple[ModuleType, str, Any, Any]] = []

    def wrap(self, module: ModuleType, name: str, after: Callable[[tuple[Any, ...]], None]) -> None:
        """Replace `module.name` with a wrapper that calls it, then `after(args)`."""

        def make(original: Callable[..., Any]) -> Callable[..., Any]:
            @functools.wraps(original)
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                result = original(*args, **kwargs)
                after(args)
                return result

            return wrapper

        self.replace(module, name, make)

    def replace(self, module: ModuleType, name: str, make: Callable[[Callable[..., Any]], Callable[..., Any]]) -> None:
        """Replace `module.name` with `make(original)`."""
        original = getattr(module, name, None)
        if original is None:
            return
        wrapper = make(original)
        setattr(module, name, wrapper)
        self.applied.append((module, name, original, wrapper))

    def undo(self) -> None:
        """Put back every original that is still replaced by our wrapper."""
        for module, name, original, wrapper in reversed(self.applied):
            if getattr(module, name, None) is wrapper:
                setattr(module, name, original)
        self.applied.clear()


class _Compile:
    """Compile on/off: read by behaviour once, then followed through enable/disable_compile."""

    def __init__(self, mx: ModuleType, patches: _Patches) -> None:
        self.traces = 0
        zero = mx.array(0)

        def constant() -> Any:
            self.traces += 1
            return zero

        self.fn = mx.compile(constant)
        self.value = self.observe()
        patches.wrap(mx, "enable_compile", lambda _: setattr(self, "value", True))
        patches.wrap(mx, "disable_compile", lambda _: setattr(self, "value", False))

    def observe(self) -> bool:
        """Whether compile is on, by behaviour: a cached compiled call does not trace again."""
        seen = self.traces
        self.fn()
        if self.traces == seen:
            return True
        # The first call after compile is switched back on traces once to fill the cache.
        seen = self.traces
        self.fn()
        return self.traces == seen


class _Limit:
    """An MLX limit that only `set_*_limit` reads: read once, then followed through its setters."""

    def __init__(self, modules: list[ModuleType], name: str, guess: int, patches: _Patches) -> None:
        self.set = getattr(modules[0], name)
        self.value = self.observe(guess)
        for module in modules:
            patches.wrap(module, name, lambda args: setattr(self, "value", int(args[0])))

    def observe(self, guess: int | None = None) -> int:
        """The real value, by setting `guess` (default: the tracked value) and undoing it."""
        guess = self.value if guess is None else guess
        value = int(self.set(guess))
        if value != guess:
            self.set(value)
        return value

    def restore(self, value: int) -> None:
        self.set(value)
        self.value = value


class MlxProbes:
    """The MLX probes for `mx` (mlx.core); `uninstall()` puts the wrapped functions back."""

    def __init__(self, mx: ModuleType) -> None:
        self.mx = mx
        self.patches = _Patches()
        self.compile = _Compile(mx, self.patches)
        devices = [mx.cpu] + ([mx.gpu] if mx.is_available(mx.gpu) else [])
        self.devices = [(d.name, d) for d in devices]
        modules = [mx] + ([mx.metal] if hasattr(mx, "metal") else [])
        # Guesses for the one real read: the documented defaults (cache = memory limit, wired = 0).
        memory = int(mx.get_memory_limit())
        self.limits = {
            "cache_limit": _Limit(modules, "set_cache_limit", memory, self.patches),
            "wired_limit": _Limit(modules, "set_wired_limit", 0, self.patches),
        }
        self.random = RandomTracker(mx, self.patches.replace)

    def probes(self) -> list[Probe]:
        """Default device, default streams, compile, memory limits, random state."""
        mx = self.mx
        return [
            Probe("mlx.default_device", mx.default_device, mx.set_default_device),
            Probe("mlx.default_stream", self._streams, self._restore_streams),
            Probe("mlx.compile_enabled", lambda: self.compile.value, self._restore_compile),
            Probe("mlx.memory", self._memory, self._restore_memory),
            Probe(
                RANDOM_PROBE,
                self.random.snapshot,
                self.random.restore,
                self.random.changes,
                ordinary=self.random.drew_only,
            ),
        ]

    def untracked(self) -> list[str]:
        """Tracked values that the real state contradicts (changed behind the wrappers' back)."""
        out = []
        if (actual := self.compile.observe()) != self.compile.value:
            out.append(f"mlx.compile_enabled is {actual}, tracked {self.compile.value}")
        for name, limit in self.limits.items():
            if (value := limit.observe()) != limit.value:
                out.append(f"mlx.memory[{name}] is {value}, tracked {limit.value}")
        return out

    def _streams(self) -> dict[str, Any]:
        return {name: self.mx.default_stream(d) for name, d in self.devices}

    def _restore_streams(self, before: dict[str, Any]) -> None:
        for stream in before.values():
            self.mx.set_default_stream(stream)

    def _restore_compile(self, enabled: bool) -> None:
        (self.mx.enable_compile if enabled else self.mx.disable_compile)()

    def _memory(self) -> dict[str, int]:
        values = {name: limit.value for name, limit in self.limits.items()}
        return {"memory_limit": int(self.mx.get_memory_limit()), **values}

    def _restore_memory(self, before: dict[str, int]) -> None:
        self.mx.set_memory_limit(before["memory_limit"])
        for name, limit in self.limits.items():
            limit.restore(before[name])

    def uninstall(self) -> None:
        """Put the wrapped MLX functions back as they were."""
        self.patches.undo()
