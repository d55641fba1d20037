"""Render the evidence document as Markdown and as a standalone HTML page, with hostile text made inert."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup, escape

from promote.checks.docs import MARKER
from promote.evidence import chart as chart_mod

# `text` in an evidence line or a message: a command, a file or an id, shown as code.
_BACKTICKED = re.compile(r"`([^`]+)`")
# What CommonMark (with GFM tables and strikethrough) or Python-Markdown would read as markup in the middle of a
# line. Each is escaped only where it could act: `_` at a word's edge (inside a word it never emphasises), `[`/`]`
# where a link could form, `<` always (raw HTML and autolinks), `&` only before an entity name. `<` and a backslash
# become entities, never a backslash escape: Python-Markdown does not read `\<` as an escape (the tag stays live),
# and a backslash that ends the text would escape the backtick of a code span that follows it.
_MD_INLINE = re.compile(
    r"""(?P<bs>\\(?=[!-/:-@\[-`{-~]|$))      # a backslash that would escape what follows, or what is joined on
      |(?P<star>\*)
      |(?P<tick>`)
      |(?P<under>(?<![A-Za-z0-9])_|_(?![A-Za-z0-9]))
      |(?P<link>\]\s*[(\[])
      |(?P<bang>!\[)
      |(?P<lt><)
      |(?P<amp>&(?=\#?[A-Za-z0-9]+;))
      |(?P<tilde>~~)
      |(?P<pipe>\|)""",
    re.VERBOSE,
)
# At the start of a line these begin a heading, quote, list, rule or setext underline.
_MD_LINE_START = re.compile(r"^(#|>|\[|[-+*=](?=\s|$)|\d+(?=[.)](?:\s|$)))")


# The templates that render each extra section of the document, by its key.
SECTION_TEMPLATES = {"accelerations": ("accel.md.j2", "accel.html.j2")}
FOLD = 10  # test ids a list or a finding shows inline before the rest are folded (HTML) or counted (Markdown)


class Md(str):
    """Markdown that is already safe: the page's finalize passes it through untouched."""


def md_text(value: object, *, line_start: bool = True) -> str:
    """Plain text for a Markdown page: one line, escaped only where Markdown would read it as markup."""
    if value is None:
        return ""
    if isinstance(value, Md):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    text = re.sub(r"\s+", " ", str(value))
    text = _MD_INLINE.sub(_escape_match, text)
    if not line_start:
        return text
    return _MD_LINE_START.sub(lambda m: m.group(0) + "\\" if m.group(0)[0].isdigit() else "\\" + m.group(0), text)


def _escape_match(m: re.Match[str]) -> str:
    kind, text = m.lastgroup, m.group(0)
    if kind == "amp":
        return "&amp;"
    if kind == "lt":
        return "&lt;"
    if kind == "bs":
        return "&#92;"
    if kind == "link":
        return "\\" + text
    if kind == "bang":
        return "!\\["
    if kind == "tilde":
        return "\\~\\~"
    return "\\" + text


def md_code(value: object) -> Md:
    """`value` as a Markdown code span: nothing inside is escaped (so no table cell may hold one with a pipe)."""
    text = " ".join(str(value).split())
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or (text.startswith(" ") and text.endswith(" ")) else ""
    return Md(f"{fence}{pad}{text}{pad}{fence}")


def md_inline(value: object) -> Md:
    """Text whose `backticked` parts become code spans and the rest plain escaped text."""
    text = " ".join(str(value or "").split())
    out, at = [], 0
    for m in _BACKTICKED.finditer(text):
        out += [md_text(text[at : m.start()], line_start=at == 0), md_code(m.group(1))]
        at = m.end()
    out.append(md_text(text[at:], line_start=at == 0))
    return Md("".join(out))


def md_cell(value: object) -> Md:
    """`md_inline` for a table cell: a code span that would hold a pipe is plain escaped text instead (a pipe
    inside a code span splits the cell in GFM and Python-Markdown alike)."""
    text = " ".join(str(value or "").split())
    return md_inline(_BACKTICKED.sub(lambda m: m.group(1) if "|" in m.group(1) else m.group(0), text))


def red(package: dict[str, Any]) -> str:
    """A package's failed, errored and crashed tests in one cell: "1 failed, 2 errors", or "none"."""
    counts = [(package.get("failed", 0), "failed"), (package.get("errors", 0), "error"),
              (package.get("crashed", 0), "crashed")]  # fmt: skip
    parts = [f"{n} {word}{'s' if word == 'error' and n != 1 else ''}" for n, word in counts if n]
    return ", ".join(parts) or "none"


def sentences(lines: Iterable[object]) -> str:
    """Short facts as sentences: each ends with a full stop (the row of a gate)."""
    return " ".join(str(line) if str(line).endswith((".", "!", "?")) else f"{line}." for line in lines)


def front_matter(doc: dict[str, Any]) -> str:
    """YAML front matter: promote's marker (the docs check leaves such pages out), the run, and `orphan: true`
    (Sphinx then builds the page without a toctree entry; MkDocs ignores the key)."""
    gates = " ".join(f"{key}={doc['gates'][key]['status']}" for key, _ in doc["gate_titles"])
    fields = {
        MARKER: "page",
        "promote_run": doc["run"],
        "promote_commit": doc["candidate"]["sha"],
        "promote_date": str(doc["provenance"]["finished"])[:10],
        "promote_verdict": doc["verdict"],
        "promote_gates": gates,
        "orphan": "true",
    }
    return "---\n" + "".join(f"{k}: {_yaml_scalar(v)}\n" for k, v in fields.items()) + "---\n"


def _yaml_scalar(value: str) -> str:
    # Plain when safe, else double-quoted with JSON's escapes (valid YAML): a run id is never read as a number.
    if value == "true" or re.fullmatch(r"[a-z]+|[a-z]+(=[a-z]+)( [a-z]+=[a-z]+)*", value):
        return value
    return json.dumps(value)


def when(value: object) -> str:
    """An ISO timestamp to the second, with its zone ("2026-11-30 23:01:36 UTC"); other text as it is."""
    text = str(value or "")
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return text
    if moment.tzinfo is None:
        return moment.strftime("%Y-%m-%d %H:%M:%S")
    zone = moment.strftime("%z")
    shown = "UTC" if zone in ("+0000", "-0000") else f"{zone[:3]}:{zone[3:]}"
    return f"{moment.strftime('%Y-%m-%d %H:%M:%S')} {shown}"


def _finalize(value: object) -> object:
    return md_text(value)


def _environment(*, html: bool) -> Environment:
    # Markdown: `finalize` runs on every {{ expression }}, so nothing from a test name or message reaches
    # the page raw (only what md_code / md_inline made safe passes through). HTML: Jinja2's own autoescaping.
    escaping: dict[str, Any] = {"autoescape": True} if html else {"autoescape": False, "finalize": _finalize}
    env = Environment(
        loader=PackageLoader("promote", "templates"),
        undefined=StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        **escaping,
    )
    env.filters["status_mark"] = lambda s: {"pass": "PASS", "fail": "FAIL"}.get(str(s), "UNDECIDED")
    env.filters["when"] = when
    env.filters["sentences"] = sentences
    env.filters["red"] = red
    env.globals["FOLD"] = FOLD
    env.globals["section_template"] = lambda key: SECTION_TEMPLATES[key][1 if html else 0]
    if html:
        env.filters["id_breaks"] = id_breaks
        env.filters["inline_code"] = inline_code
    else:
        env.filters["code"] = md_code
        env.filters["inline_code"] = md_inline
        env.filters["cell"] = md_cell
        env.filters["id_breaks"] = md_code
    return env


def id_breaks(value: object) -> Markup:
    """A test id or path, escaped, that may wrap after `/` and `::` rather than mid-name."""
    return escape(str(value)).replace("/", Markup("/<wbr>")).replace("::", Markup("::<wbr>"))


def inline_code(value: object) -> Markup:
    """Text escaped first, then its `backticked` parts shown as code: nothing in it becomes markup."""
    return Markup(_BACKTICKED.sub(r"<code>\1</code>", str(escape(str(value)))))


def chart(history: list[dict[str, Any]]) -> chart_mod.Chart:
    """The history chart's geometry (numbers and short labels only)."""
    return chart_mod.layout(history)


def markdown(doc: dict[str, Any]) -> str:
    body = _environment(html=False).get_template("evidence.md.j2").render(doc=doc)
    return front_matter(doc) + "\n" + body


def html(doc: dict[str, Any]) -> str:
    return _environment(html=True).get_template("evidence.html.j2").render(doc=doc, chart=chart(doc["history"]))
