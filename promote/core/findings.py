"""Findings: what a check or the test plugin reports, in the shape of the `--json` contract."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import PurePosixPath
from typing import Any, cast

from promote.core.vocab import (
    SEVERITIES as SEVERITIES,
)
from promote.core.vocab import (
    Severity as Severity,
)


@dataclass(frozen=True)
class Location:
    """Where a finding points: a path relative to the repository root, and the line when known."""

    path: str
    line: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "line": self.line}

    @classmethod
    def from_json(cls, d: dict[str, Any] | None) -> Location | None:
        if d is None:
            return None
        line = d.get("line")
        return cls(str(d["path"]), None if line is None else int(line))


@dataclass(frozen=True)
class Rootdir:
    """A package's pytest rootdir as a path relative to the repository root (`.` at the root).

    Node ids, and the places the plugin sees, are relative to the rootdir; a finding's location is
    relative to the repository root, so both are joined here.
    """

    path: PurePosixPath

    def locate(self, nodeid: str, line: int | None = None) -> Location | None:
        """The file a node id is in (`a/test_b.py::C::test_d` -> `<rootdir>/a/test_b.py`); None for none."""
        file = nodeid.split("::", 1)[0]
        # pytest's own pseudo-nodes (`<collection>`, the rootdir itself) name no file.
        if not file or file.startswith("<"):
            return None
        return Location((self.path / file).as_posix(), line)

    def rebase(self, finding: Finding) -> Finding:
        """`finding` with its location, relative to the rootdir, made relative to the repository root."""
        if finding.location is None:
            return finding
        return replace(finding, location=replace(finding.location, path=(self.path / finding.location.path).as_posix()))


@dataclass(frozen=True)
class Finding:
    """One problem: `subject` is what showed it, `cause` what caused it (when known)."""

    check: str
    severity: Severity
    subject: str
    message: str
    cause: str | None = None
    location: Location | None = None
    # Every test a grouped finding is about, in full: its message names the first few and counts the rest.
    tests: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"severity must be one of {SEVERITIES}, not {self.severity!r}")

    def to_json(self) -> dict[str, Any]:
        """The contract's FINDING object (with `tests` when the finding groups several)."""
        out: dict[str, Any] = {
            "check": self.check,
            "severity": self.severity,
            "subject": self.subject,
            "message": self.message,
            "cause": self.cause,
            "location": None if self.location is None else self.location.to_json(),
        }
        if self.tests:
            out["tests"] = list(self.tests)
        return out

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Finding:
        """Parse a FINDING object (as written by `to_json`)."""
        cause = d.get("cause")
        return cls(
            check=str(d["check"]),
            severity=cast(Severity, d["severity"]),
            subject=str(d["subject"]),
            message=str(d["message"]),
            cause=None if cause is None else str(cause),
            tests=tuple(str(t) for t in d.get("tests", ())),
            location=Location.from_json(d.get("location")),
        )
