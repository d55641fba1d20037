"""Audit checks, one module per check family; each returns a CheckOutcome."""

from __future__ import annotations

from dataclasses import dataclass

from promote.core.findings import Finding
from promote.core.vocab import (
    FAIL as FAIL,
)
from promote.core.vocab import (
    PASS as PASS,
)
from promote.core.vocab import (
    UNDECIDED as UNDECIDED,
)
from promote.core.vocab import (
    Status as Status,
)


@dataclass(frozen=True)
class CheckOutcome:
    """What one check decided, why, and the evidence lines a page shows for it.

    `undecided` is its own answer: a check that could not observe something never says `pass`.
    """

    name: str
    status: Status
    reason: str
    evidence: tuple[str, ...] = ()
    findings: tuple[Finding, ...] = ()

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "status": self.status,
            "reason": self.reason,
            "evidence": list(self.evidence),
            "findings": [f.to_json() for f in self.findings],
        }
