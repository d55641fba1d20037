"""A finding: one problem a check saw, what showed it, and what caused it."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

SEVERITIES = ("error", "warning", "info")


@dataclass(frozen=True)
class Finding:
    """The contract's FINDING: `subject` showed the problem, `cause` made it."""

    check: str
    severity: str
    subject: str
    message: str
    cause: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Finding:
        return cls(
            check=str(data["check"]),
            severity=str(data["severity"]),
            subject=str(data["subject"]),
            message=str(data["message"]),
            cause=None if data.get("cause") is None else str(data["cause"]),
        )
