"""GitHub Actions workflow commands (`::error file=...,line=...::message`) for a command's findings."""

from __future__ import annotations

import os
from typing import Any

from promote.cli.sarif import location
from promote.core.redact import printable

KINDS = {"error": "error", "warning": "warning", "info": "notice"}


def wanted() -> bool:
    """Annotations are printed inside a GitHub Actions job only."""
    return os.environ.get("GITHUB_ACTIONS") == "true"


def _data(text: str) -> str:
    # Control characters shown as on every other output (a raw OSC 52 in a CI log writes the reader's clipboard).
    return printable(text).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _property(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")


def workflow_commands(data: dict[str, Any] | None) -> list[str]:
    """One workflow-command line per finding in `data["findings"]`."""
    lines = []
    for f in (data or {}).get("findings") or []:
        props = []
        where = location(f)
        if where is not None:
            props.append(f"file={_property(where.path)}")
            if where.line:
                props.append(f"line={where.line}")
        props.append("title=" + _property(f"promote {f.get('check')}"))
        cause = f" (caused by {f['cause']})" if f.get("cause") else ""
        message = _data(f"{f.get('subject')}: {f.get('message')}{cause}")
        lines.append(f"::{KINDS.get(str(f.get('severity')), 'warning')} {','.join(props)}::{message}")
    return lines
