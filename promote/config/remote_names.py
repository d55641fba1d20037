"""The names a mirror may have: what git accepts as a remote and the evidence page shows as written."""

from __future__ import annotations

import re

REMOTE_NAME_RULE = (
    "a name git can use for a remote (no space, control character, ~ ^ : ? * [ \\, `..`, `@{`, leading - or .,"
    " or .lock) that shows as itself on the page (no | or backtick)"
)
# What git's check-ref-format refuses in a remote's name (it becomes refs/promote/mirrors/NAME/...), and what
# would break out of a table cell or code span on the evidence page.
_BAD_REMOTE = re.compile(r"[\x00-\x20\x7f~^:?*\[\\|`]|\.\.|@\{|//|^[-/]|/$|^@$")


def remote_name_ok(name: str) -> bool:
    """Whether `name` is a git remote name that promote can fetch into its own refs and show as written."""
    if not name or _BAD_REMOTE.search(name):
        return False
    return all(part and not part.startswith(".") and not part.endswith((".lock", ".")) for part in name.split("/"))
