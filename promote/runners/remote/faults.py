"""The finding for what kept a package from running, or finishing, on a station."""

from __future__ import annotations

from promote.core.findings import Finding
from promote.core.redact import redact

CHECK = "station-error"


def station_error(station: str, message: str) -> Finding:
    """The finding for anything that kept a package from running, or finishing, on its station."""
    return Finding(CHECK, "error", station, redact(message))
