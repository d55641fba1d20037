"""The configuration reference, generated from promote/schemas/config.schema.json (a MkDocs hook).

The schema is the one source of every key's type, default and meaning; configuration.md holds only
the marker below, so the reference cannot drift from it. `python docs/config_reference.py` prints it.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SCHEMA = Path(__file__).resolve().parent.parent / "promote" / "schemas" / "config.schema.json"
MARKER = "<!-- config-reference -->"
PAGE = "configuration.md"


@dataclass(frozen=True)
class Table:
    """One TOML table of the configuration: its header as written, its dotted path, its schema node."""

    header: str
    path: str
    node: dict[str, Any]


def load(path: Path = SCHEMA) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def tables(schema: dict[str, Any]) -> list[Table]:
    """Every table under [promote], depth first, in the schema's order."""
    out: list[Table] = []

    def walk(header: str, path: str, node: dict[str, Any]) -> None:
        out.append(Table(header, path, node))
        for key, child in node.get("properties", {}).items():
            sub = _subtable(key, path, child)
            if sub is not None:
                walk(*sub)

    walk("[promote]", "promote", schema["properties"]["promote"])
    return out


def _subtable(key: str, parent: str, child: dict[str, Any]) -> tuple[str, str, dict[str, Any]] | None:
    """(header, path, node) when `key` holds a table of its own (a sub-table, an array of tables, NAME = table)."""
    path = f"{parent}.{key}"
    if "properties" in child:
        return f"[{path}]", path, child
    items = child.get("items", {})
    if child.get("type") == "array" and "properties" in items:
        return f"[[{path}]]", path, items
    named = child.get("additionalProperties")
    if isinstance(named, dict) and "properties" in named:
        return f"[{path}.NAME]", f"{path}.NAME", named
    return None


def type_of(node: dict[str, Any]) -> str:
    """The node's type in TOML's words, with the bounds the schema states."""
    if "enum" in node:
        return " or ".join(f'`"{v}"`' for v in node["enum"])
    if "anyOf" in node:
        return " or ".join(type_of(n) for n in node["anyOf"])
    kind = node.get("type")
    if kind == "array":
        items = node.get("items", {})
        return "array of tables" if "properties" in items else f"list of {type_of(items)}s"
    if kind == "object":
        named = node.get("additionalProperties")
        if isinstance(named, dict) and "properties" not in named:
            return f"table of NAME = {type_of(named)}"
        return "table"
    words = {"string": "string", "number": "number", "integer": "integer", "boolean": "boolean"}
    text = words.get(str(kind), str(kind))
    bounds = []
    if "exclusiveMinimum" in node:
        bounds.append(f"> {node['exclusiveMinimum']}")
    if "minimum" in node:
        bounds.append(f">= {node['minimum']}")
    if "maximum" in node:
        bounds.append(f"<= {node['maximum']}")
    if "pattern" in node:
        bounds.append(f"matching `{node['pattern']}`")
    return f"{text} ({', '.join(bounds)})" if bounds else text


def toml_value(value: object) -> str:
    """A default as it would be written in promote.toml."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f" {k} = {toml_value(v)}" for k, v in value.items()) + (" }" if value else "}")
    return repr(value)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render(schema: dict[str, Any]) -> str:
    """The reference as Markdown: one section per table, one row per key, each key with its own anchor."""
    lines: list[str] = []
    for table in tables(schema):
        required = set(table.node.get("required", []))
        lines += [f"### `{table.header}` {{#{table.path}}}", "", _cell(table.node.get("description", "")), ""]
        lines += ["| key | type | default | meaning |", "|---|---|---|---|"]
        for key, child in table.node.get("properties", {}).items():
            sub = _subtable(key, table.path, child)
            kind = f"[{type_of(child)}](#{sub[1]})" if sub else type_of(child)
            if key in required:
                kind += ", required"
            default = f"`{toml_value(child['default'])}`" if "default" in child else "—"
            # A sub-table's heading carries the anchor its row would: one id, one place.
            anchor = "" if sub and sub[1] == f"{table.path}.{key}" else f'<a id="{table.path}.{key}"></a>'
            lines.append(
                f"| {anchor}`{key}` | {_cell(kind)} | {_cell(default)} | {_cell(child.get('description', ''))} |"
            )
        lines.append("")
    return "\n".join(lines)


def on_page_markdown(markdown: str, page: Any, **kwargs: Any) -> str:
    """MkDocs hook: put the generated reference where configuration.md has the marker."""
    if page.file.src_uri != PAGE:
        return markdown
    if MARKER not in markdown:
        raise ValueError(f"docs/{PAGE} has no {MARKER} for the generated configuration reference")
    return markdown.replace(MARKER, render(load()))


if __name__ == "__main__":
    sys.stdout.write(render(load()))
