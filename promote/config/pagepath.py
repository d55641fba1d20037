"""What a `[promote.docs] page` path may be, whatever fills its fields: a relative file path in the docs repository."""

from __future__ import annotations

# Control characters: a NUL reaches open() as a ValueError; a newline or ESC splits or garbles git's path lists.
_CONTROL = {chr(c) for c in range(0x20)} | {"\x7f"}


def path_problem(path: str) -> str | None:
    """Why `path` (a page template's literal text, or the page path it yields) cannot be a page; None when it can."""
    if not path.strip():
        return "it is empty"
    if _CONTROL & set(path):
        bad = sorted(_CONTROL & set(path))[0]
        return f"it holds the control character {bad!r}"
    if path.startswith(("/", "\\")):
        return "it is an absolute path"
    parts = path.replace("\\", "/").split("/")
    if ".." in parts:
        return "it leaves the docs repository (..)"
    if any(p.lower() == ".git" for p in parts):
        return "it lies inside git's own metadata (.git)"
    if parts[-1] in ("", "."):
        return "it names a directory, not a file"
    return None
