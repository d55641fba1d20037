"""Keep credentials embedded in remote URLs out of every output."""

from __future__ import annotations

import re

# scheme://user:secret@host or scheme://token@host: everything between "//" and "@" is secret.
_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)[^/@\s]+@")


def redact(text: str) -> str:
    """Replace the user-info part of every URL in `text` with `***`."""
    return _USERINFO.sub(r"\g<scheme>***@", text)
