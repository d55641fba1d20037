"""Probes for MLX's global state: default device and streams, compile, limits, random state, print options.

Every MLX function a probe uses is looked up first, never assumed: a part this MLX lacks is left out
and named once (`MlxProbes.missing`, reported as "mlx 0.32.2: print options not probed"), and the
other parts still run. MLX has no getter for some of the state, and reading by behaviour costs per
test, so:
- compile enabled: read once by behaviour (a tiny `mx.compile`d function counts its traces;
  with compile on, a second call is served from the compile cache and does not trace again),
  then followed by wrapping `mx.enable_compile` / `mx.disable_compile` (~7 us saved per read).
- cache and wired limits: only `set_*_limit` (which returns the previous value) reads them, and
  a set costs tens of microseconds right after an evaluation. So they are read once, then
  followed by wrapping `set_cache_limit` / `set_wired_limit` (in `mlx.core` and `mlx.core.metal`).
  The memory limit is read each time through `get_memory_limit` where MLX has it (0.32.3 on), else
  the same way as the other two.
- `untracked()` re-reads compile and the limits for real at session end: a change made behind
  the wrappers (a function imported before the plugin loaded, C++ code) is reported, not hidden.
- random state: see promote/runners/plugin/mlx_random.py. Drawing numbers is ordinary use, restored
  without a finding and counted; seeding, rebinding or replacing the key is a leak.
- print options: `get_printoptions` (not in 0.26; in 0.32) read each test, put back with `set_printoptions`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from types import ModuleType
from typing import Any, TypeVar

from promote.runners.plugin.mlx_random import RandomTracker
from promote.runners.plugin.probes import Probe
from promote.runners.plugin.seed_probes import PrintOptions
from promote.runners.plugin.sites import Sites

_T = TypeVar("_T")

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


class _Getter:
    """A limit MLX has a getter for: read each time."""

    def __init__(self, get: Callable[[], int], set: Callable[[int], object]) -> None:
        self.get, self.set = get, set

    @property
    def value(self) -> int:
        return int(self.get())

    def observe(self) -> int:
        return self.value

    def restore(self, value: int) -> None:
        self.set(value)


def _has(mx: ModuleType, dotted: str) -> bool:
    obj: Any = mx
    for part in dotted.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return False
    return True


class MlxProbes:
    """The MLX probes for `mx` (mlx.core); `uninstall()` puts the wrapped functions back.

    Each part is feature-detected: one this MLX lacks (or that raises while being set up) is left out
    and named in `missing` ("memory limit"), so the worker runs on with the probes it has. A part whose
    setters are all absent too is left out silently: no test can change what this MLX does not have.
    """

    def __init__(self, mx: ModuleType, sites: Sites | None = None) -> None:
        self.mx = mx
        self.patches = _Patches()
        self.missing: list[str] = []
        compile_api = ("compile", "enable_compile", "disable_compile")
        self.compile = self._part("compile", compile_api, compile_api[1:], lambda: _Compile(mx, self.patches))
        device_api = ("cpu", "is_available", "default_device", "set_default_device", "default_stream")
        devices = self._part("default device and streams", device_api, ("set_default_device",), self._devices)
        self.devices: list[tuple[str, Any]] = devices or []
        modules = [mx] + ([mx.metal] if hasattr(mx, "metal") else [])
        self.limits: dict[str, _Getter | _Limit] = {}
        # Guesses for the one real read: the documented defaults (cache = memory limit, wired = 0).
        guesses = {"memory_limit": 0, "cache_limit": 0, "wired_limit": 0}
        for name in guesses:
            setter = f"set_{name}"
            make = functools.partial(self._limit, name, modules, guesses)
            limit = self._part(name.replace("_", " "), (setter,), (setter,), make)
            if limit is not None:
                self.limits[name] = limit
                guesses["cache_limit"] = guesses["cache_limit"] or limit.value
        random_api = ("random.state", "random.seed", "random.split", "array_equal", "stack")
        self.random = self._part(
            "random state", random_api, ("random.seed",), lambda: RandomTracker(mx, self.patches.replace, sites)
        )
        print_api = ("get_printoptions", "set_printoptions")
        self.printing = self._part("print options", print_api, print_api[1:], lambda: PrintOptions(mx))

    def _part(self, what: str, needs: tuple[str, ...], setters: tuple[str, ...], make: Callable[[], _T]) -> _T | None:
        """`make()`, or None (and `what` noted in `missing`) when MLX lacks one of `needs` or setting it up raises."""
        if not all(_has(self.mx, name) for name in needs):
            if any(_has(self.mx, name) for name in setters):
                self.missing.append(what)
            return None
        try:
            return make()
        except Exception:
            self.missing.append(what)
            return None

    def _devices(self) -> list[tuple[str, Any]]:
        mx = self.mx
        devices = [mx.cpu] + ([mx.gpu] if mx.is_available(mx.gpu) else [])
        return [(d.name, d) for d in devices]

    def _limit(self, name: str, modules: list[ModuleType], guesses: dict[str, int]) -> _Getter | _Limit:
        getter = getattr(self.mx, f"get_{name}", None)
        if callable(getter):
            return _Getter(getter, getattr(self.mx, f"set_{name}"))
        # No getter in this MLX (get_memory_limit came in 0.32.3): read once by its setter, then followed.
        return _Limit(modules, f"set_{name}", guesses[name], self.patches)

    def probes(self) -> list[Probe]:
        """Default device, default streams, compile, memory limits, random state, print options: those this MLX has."""
        mx = self.mx
        out = []
        if self.devices:
            out.append(Probe("mlx.default_device", mx.default_device, mx.set_default_device))
            out.append(Probe("mlx.default_stream", self._streams, self._restore_streams))
        if self.compile is not None:
            compiled = self.compile
            out.append(Probe("mlx.compile_enabled", lambda: compiled.value, self._restore_compile))
        if self.limits:
            out.append(Probe("mlx.memory", self._memory, self._restore_memory))
        if self.random is not None:
            tracker = self.random
            out.append(Probe(RANDOM_PROBE, tracker.snapshot, tracker.restore, tracker.changes, tracker.drew_only))
        if self.printing is not None:
            out.append(self.printing.probe())
        return out

    def untracked(self) -> list[str]:
        """Tracked values that the real state contradicts (changed behind the wrappers' back)."""
        out = []
        if self.compile is not None and (actual := self.compile.observe()) != self.compile.value:
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
        return {name: limit.value for name, limit in self.limits.items()}

    def _restore_memory(self, before: dict[str, int]) -> None:
        for name, limit in self.limits.items():
            limit.restore(before[name])

    def uninstall(self) -> None:
        """Put the wrapped MLX functions back as they were."""
        self.patches.undo()


def import_mlx() -> tuple[ModuleType | None, str | None]:
    """`mlx.core`, or None and why not (a missing or broken install must not break the run).

    No reason for a package without MLX: it has no MLX state to leak, so there is nothing to say.
    """
    try:
        import mlx.core as mx
    except ModuleNotFoundError as e:
        if e.name in ("mlx", "mlx.core"):
            return None, None
        return None, f"mlx is not importable here ({type(e).__name__}: {e})"
    except Exception as e:
        return None, f"mlx is not importable here ({type(e).__name__}: {e})"
    return mx, None
