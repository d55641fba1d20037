"""The station inventory: the machines in the config, plus the one promote runs on, detected."""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from promote.core.process import run_bounded
from promote.core.station import Station

if TYPE_CHECKING:
    # Only for types: a remote station imports this module (detect_local) where promote's config may not import.
    from promote.config import Config, StationConfig

LOCAL = "local"


# -- detection of the local station ------------------------------------------------


def local_platform() -> str:
    """This machine as a station platform name, e.g. `linux-x86_64` or `darwin-arm64`."""
    machine = platform.machine().lower()
    return f"{sys.platform}-{'arm64' if machine in ('arm64', 'aarch64') else machine}"


def detect_devices() -> tuple[tuple[str, ...], str | None]:
    """The devices MLX reports as available here, and a note when MLX cannot say."""
    try:
        import mlx.core as mx
    except Exception as e:
        return ("cpu",), f"mlx is not importable here ({type(e).__name__}: {e}); GPU devices not detected"
    devices = ["cpu"]
    is_available = getattr(mx, "is_available", None)
    if is_available is not None and is_available(mx.gpu):
        devices.append("gpu")
    if mx.metal.is_available():
        devices.append("metal")
    return tuple(devices), None


def detect_memory_gb() -> float | None:
    """Physical memory in GB, or None when this system does not say."""
    if sys.platform == "darwin":
        try:
            done = run_bounded(["sysctl", "-n", "hw.memsize"], timeout=5)
            return round(int(done.stdout.strip()) / 2**30, 1) if done.ok else None
        except (OSError, ValueError):
            return None
    try:
        return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (AttributeError, OSError, ValueError):
        pass
    try:
        for line in Path("/proc/meminfo").read_text(encoding="ascii").splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 2**20, 1)
    except (OSError, ValueError, IndexError):
        pass
    return None


def hub_cache_dir(env: Mapping[str, str]) -> Path:
    """Where huggingface_hub keeps its cache under `env` (the same precedence it uses).

    Raises ValueError naming the variable when it cannot be expanded (`~name` of an unknown user).
    """
    for name, below in (("HF_HUB_CACHE", ()), ("HF_HOME", ("hub",))):
        if env.get(name):
            return _expanded(name, env[name]).joinpath(*below)
    if env.get("XDG_CACHE_HOME"):
        return _expanded("XDG_CACHE_HOME", env["XDG_CACHE_HOME"]) / "huggingface" / "hub"
    home = _expanded("HOME", env["HOME"]) if env.get("HOME") else Path.home()
    return home / ".cache" / "huggingface" / "hub"


def _expanded(name: str, value: str) -> Path:
    try:
        return Path(value).expanduser()
    except RuntimeError as e:
        raise ValueError(f"{name}={value!r}: {str(e).rstrip('.')}") from None


# Cache folder prefix -> how a hub URL names that kind of repo (models have no prefix).
_HUB_KINDS = {"models": "", "datasets": "datasets/", "spaces": "spaces/", "kernels": "kernels/"}
# Names the OS leaves in folders; huggingface_hub skips them too.
_OS_FILES = frozenset({".DS_Store", "Thumbs.db", "desktop.ini"})


def cached_hub_models(cache_dir: Path) -> tuple[tuple[str, ...], str | None]:
    """`hub:org/name` for every repo with files in the Hugging Face cache (read only; nothing is downloaded).

    Read from the cache's documented layout (`models--org--name/snapshots/<revision>/...`) with the
    rules of huggingface_hub's `scan_cache_dir`, rather than through it: importing huggingface_hub
    takes 0.15-0.3 s, paid before the first test could start on every machine that has a cache.
    """
    if not cache_dir.is_dir():
        return (), None
    try:
        entries = sorted(cache_dir.iterdir())
    except OSError as e:
        return (), f"cannot read the Hugging Face cache {cache_dir}: {e}"
    found = []
    for repo in entries:
        kind, sep, name = repo.name.partition("--")
        if sep and kind in _HUB_KINDS and _has_cached_files(repo):
            found.append(f"hub:{_HUB_KINDS[kind]}{name.replace('--', '/')}")
    return tuple(sorted(found)), None


def _has_cached_files(repo: Path) -> bool:
    """Whether a cached repo has a revision with files, and nothing scan_cache_dir would call corrupted."""
    snapshots = repo / "snapshots"
    try:
        if not repo.is_dir() or not snapshots.is_dir() or (repo / "refs").is_file():
            return False
        files = 0
        for revision in snapshots.iterdir():
            if revision.name in _OS_FILES:
                continue
            if revision.is_file():
                return False
            for path in revision.glob("**/*"):
                if path.is_dir():
                    continue
                if not path.exists():  # a symlink to a missing blob
                    return False
                files += 1
        return files > 0
    except OSError:
        return False


def present_checkpoints(model_dirs: Sequence[Path]) -> tuple[str, ...]:
    """`checkpoint:<name>` for every entry of the configured model directories that exists here."""
    found = set()
    for directory in model_dirs:
        if directory.is_dir():
            found |= {f"checkpoint:{entry.name}" for entry in directory.iterdir() if not entry.name.startswith(".")}
    return tuple(sorted(found))


def detect_local(model_dirs: Sequence[Path] = (), env: Mapping[str, str] | None = None) -> tuple[Station, list[str]]:
    """The station promote runs on, as observed (not as configured), and notes on what it could not observe."""
    devices, note = detect_devices()
    try:
        hub, hub_note = cached_hub_models(hub_cache_dir(os.environ if env is None else env))
    except ValueError as e:
        hub, hub_note = (), f"cannot find the Hugging Face cache: {e}; cached hub models not detected"
    resources = tuple(sorted({*hub, *present_checkpoints(model_dirs)}))
    station = Station(
        LOCAL, local_platform(), devices, detect_memory_gb(), resources, local=True, detected=True,
        os_build=f"{platform.system()} {platform.release()}",
    )  # fmt: skip
    return station, [n for n in (note, hub_note) if n]


# -- the inventory ----------------------------------------------------------------


@dataclass(frozen=True)
class Inventory:
    """Every station: the configured ones, with the local one merged into what was detected."""

    stations: tuple[Station, ...]
    notes: tuple[str, ...] = ()

    @property
    def local(self) -> Station:
        return next(s for s in self.stations if s.local)

    def to_json(self) -> dict[str, Any]:
        return {"local": self.local.name, "stations": [s.to_json() for s in self.stations], "notes": list(self.notes)}


def observed(detected: Station, configured: Station) -> Station:
    """A configured station as detected: what was observed wins, under the configured name.

    Resources nobody can detect (datasets, named checkpoints), and a memory size that could not be read,
    come from the config.
    """
    resources = tuple(sorted({*configured.resources, *detected.resources}))
    memory = configured.memory_gb if detected.memory_gb is None else detected.memory_gb
    return replace(detected, name=configured.name, memory_gb=memory, resources=resources)


def merge(detected: Station, stations: Sequence[StationConfig]) -> tuple[Station, ...]:
    """The local station is the configured one on this platform without ssh (else `local`), with what was detected."""
    others = [s.station for s in stations]
    mine = next((s for s in others if s.platform == detected.platform and s.ssh is None), None)
    if mine is None:
        return (detected, *others)
    local = observed(detected, mine)
    return tuple(local if s is mine else s for s in others)


def inventory(config: Config, env: Mapping[str, str] | None = None) -> Inventory:
    """The configured stations plus this one, detected."""
    detected, notes = detect_local(config.requirements.model_dirs, env)
    return Inventory(merge(detected, config.stations), tuple(notes))
