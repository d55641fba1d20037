"""A station: what a machine has (configured, detected, or both), and what a `requires` marker declares.

The one station type: the config holds one per configured machine, detection makes one, and the plugin
reads one inside the tested interpreter (`--promote-station FILE`), so it imports only the standard library.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from promote.core.bounded_json import read_object

MARKER_KEYWORDS = ("device", "memory_gb", "platform")
# Requirements of a kind some machine could meet, whether or not one here does: a device, a platform, memory,
# a hub model (only the network). A named resource (a checkpoint) exists only where a station declares it.
MACHINE_KINDS = ("device", "platform", "memory", "hub")


def some_machine_could(requirement: str) -> bool:
    """Whether a machine of some kind could meet `requirement`, though no station here does."""
    return requirement.partition(":")[0] in MACHINE_KINDS


FLEET_LOCAL = "local"  # in a package's `stations`: this machine


@dataclass(frozen=True)
class Station:
    """A machine tests may run on: what it is and which named resources it holds."""

    name: str
    platform: str | None = None
    devices: tuple[str, ...] = ()
    memory_gb: float | None = None
    resources: tuple[str, ...] = ()
    ssh: str | None = None
    local: bool = False
    detected: bool = False
    os_build: str | None = None  # e.g. "Darwin 24.3.0": what an accelerated path was validated against
    # It reaches the Hugging Face hub (a GitHub-hosted CI runner): it has any hub model, downloaded when asked for.
    network: bool = False

    def has(self, requirement: str) -> bool:
        """Whether this station meets one requirement (`device:metal`, `memory:64`, `hub:org/name`, ...)."""
        kind, _, value = requirement.partition(":")
        if kind == "device":
            # On Apple silicon Metal is the GPU.
            return value in self.devices or (value == "gpu" and "metal" in self.devices)
        if kind == "memory":
            # A bare `memory` (ran out of it) is relative to where it ran; see runners.requirements.
            try:
                return self.memory_gb is not None and self.memory_gb >= float(value)
            except ValueError:
                return False
        if kind == "platform":
            return self.platform == value
        if kind == "hub" and self.network:
            return True
        return requirement in self.resources

    def lacking(self, requirements: Sequence[str]) -> tuple[str, ...]:
        """The requirements this station does not meet, in the order given."""
        return tuple(r for r in requirements if not self.has(r))

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "devices": list(self.devices), "resources": list(self.resources)}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Station:
        known = {k: d[k] for k in cls.__dataclass_fields__ if k in d}
        return cls(**{**known, "devices": tuple(d.get("devices", ())), "resources": tuple(d.get("resources", ()))})


def read_station(path: Path) -> Station:
    """The station JSON the runner writes for the plugin (`--promote-station FILE`)."""
    return Station.from_json(read_object(path))


def declared(args: Sequence[object], kwargs: Mapping[str, object]) -> tuple[str, ...]:
    """What one `@pytest.mark.requires(...)` declares, e.g. ("checkpoint:x", "device:metal", "memory:64")."""
    unknown = sorted(set(kwargs) - set(MARKER_KEYWORDS))
    if unknown:
        raise TypeError(f"requires(): unknown keyword {unknown[0]!r}; expected {', '.join(MARKER_KEYWORDS)}")
    out = []
    for arg in args:
        if not isinstance(arg, str) or not arg.strip():
            raise TypeError(f"requires(): resources are non-empty strings like 'checkpoint:name', got {arg!r}")
        out.append(arg.strip())
    for key in ("device", "platform"):
        value = kwargs.get(key)
        if value is not None:
            if not isinstance(value, str) or not value.strip():
                raise TypeError(f"requires(): {key} is a non-empty string, got {value!r}")
            out.append(f"{key}:{value.strip()}")
    memory = kwargs.get("memory_gb")
    if memory is not None:
        if isinstance(memory, bool) or not isinstance(memory, (int, float)) or memory <= 0:
            raise TypeError(f"requires(): memory_gb is a number of GB > 0, got {memory!r}")
        out.append(f"memory:{memory:g}")
    return tuple(out)
