"""A page names no path of the machine it ran on: the repository's, the temporary directory's and home's prefixes
are rewritten in every string (a leaked cwd in a finding, a log path, the command as typed)."""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

# A prefix counts only as a whole path component: `/srv/repo` is not a prefix of `/srv/repo-old`.
_END = r"(?=$|[\s'\"`:,;()\[\]<>|])"


def rewriter(root: Path | None) -> Callable[[str], str]:
    """The function that rewrites one string: `root/...` as `...` (`root` alone as `.`), then `$TMPDIR/...`, `~/...`."""
    names: dict[str, str] = {}
    for where, shown in (
        (Path(tempfile.gettempdir()), "$TMPDIR"),
        (Path.home(), "~"),
        *(((root, ""),) if root else ()),
    ):
        for form in {str(where), os.path.realpath(where)}:
            if len(form) > 1:
                names[form] = shown
    if not names:
        return lambda text: text
    longest = sorted(names, key=len, reverse=True)
    pattern = re.compile("|".join(f"{re.escape(p)}(?:/|{_END})" for p in longest))

    def one(m: re.Match[str]) -> str:
        text = m.group(0)
        shown = names[text.removesuffix("/")]
        if not shown:  # the repository: relative paths
            return "" if text.endswith("/") else "."
        return shown + ("/" if text.endswith("/") else "")

    return lambda text: pattern.sub(one, text) if "/" in text else text


def unmachined(obj: Any, root: Path | None) -> Any:
    """`obj` (JSON-like) with every string rewritten by `rewriter(root)`."""
    rewrite = rewriter(root)

    def walk(value: Any) -> Any:
        if isinstance(value, str):
            return rewrite(value)
        if isinstance(value, dict):
            return {k: walk(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [walk(v) for v in value]
        return value

    return walk(obj)
