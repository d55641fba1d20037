"""Render the evidence document as Markdown and as a standalone HTML page, with hostile text made inert."""

from __future__ import annotations

import re
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup, escape

# Everything Markdown (or the HTML an mkdocs site lets through) could read as markup.
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|~>])")
# `text` in an evidence line or a message: a command, a file or an id, shown as code in HTML.
_BACKTICKED = re.compile(r"`([^`]+)`")


def md_escape(value: object) -> str:
    """Text safe to place anywhere in a Markdown page, table cells included: no markup survives."""
    if value is None:
        return ""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    text = " ".join(str(value).split())
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MD_SPECIAL.sub(r"\\\1", text)


def _environment(*, html: bool) -> Environment:
    # Markdown: `finalize` runs on every {{ expression }}, so nothing from a test name or message reaches
    # the page raw. HTML: Jinja2's own autoescaping.
    escaping: dict[str, Any] = {"autoescape": True} if html else {"autoescape": False, "finalize": md_escape}
    env = Environment(
        loader=PackageLoader("promote", "templates"),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        **escaping,
    )
    env.filters["status_mark"] = lambda s: {"pass": "PASS", "fail": "FAIL"}.get(str(s), "UNDECIDED")
    env.filters["id_breaks"] = id_breaks
    env.filters["inline_code"] = inline_code
    return env


def id_breaks(value: object) -> Markup:
    """A test id or path, escaped, that may wrap after `/` and `::` rather than mid-name."""
    return escape(str(value)).replace("/", Markup("/<wbr>")).replace("::", Markup("::<wbr>"))


def inline_code(value: object) -> Markup:
    """Text escaped first, then its `backticked` parts shown as code: nothing in it becomes markup."""
    return Markup(_BACKTICKED.sub(r"<code>\1</code>", str(escape(str(value)))))


def chart(history: list[dict[str, Any]], *, width: int = 640, height: int = 160) -> dict[str, Any]:
    """Polyline points (numbers only) for passed / failed / blocked over the last runs."""
    series = ("passed", "failed", "blocked")
    top = max([1, *(int(h.get(s, 0)) for h in history for s in series)])
    step = width / max(1, len(history) - 1)
    dots: dict[str, list[tuple[float, float]]] = {
        s: [(round(i * step, 1), round(height - int(h.get(s, 0)) * height / top, 1)) for i, h in enumerate(history)]
        for s in series
    }
    # A line needs two runs; a dot per run shows the first one too.
    lines = {s: " ".join(f"{x},{y}" for x, y in points) for s, points in dots.items()}
    return {"width": width, "height": height, "top": top, "lines": lines, "dots": dots, "runs": len(history)}


def markdown(doc: dict[str, Any]) -> str:
    return _environment(html=False).get_template("evidence.md.j2").render(doc=doc)


def html(doc: dict[str, Any]) -> str:
    return _environment(html=True).get_template("evidence.html.j2").render(doc=doc, chart=chart(doc["history"]))
