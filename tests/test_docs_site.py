"""The manual in docs/: it builds with --strict, and its configuration reference is the schema, which is the parser."""

from __future__ import annotations

import ast
import html
import importlib.util
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from promote import config
from promote.core.errors import ConfigError
from promote.runners.remote.ssh import DEFAULT_PYTHON

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the fallback promote itself depends on
    import tomli as tomllib

ROOT = Path(__file__).parent.parent
SCHEMA: dict[str, Any] = json.loads((ROOT / "promote" / "schemas" / "config.schema.json").read_text())
DOCS = ROOT / "docs"


def reference_module() -> ModuleType:
    """docs/config_reference.py, the MkDocs hook, loaded the way MkDocs loads it: from its path."""
    spec = importlib.util.spec_from_file_location("config_reference", DOCS / "config_reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up there
    spec.loader.exec_module(module)
    return module


def subtable(node: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """(path suffix, node) when `node` is a table of keys: a sub-table, an array of tables, or NAME = table."""
    if "properties" in node:
        return "", node
    if "properties" in node.get("items", {}):
        return "", node["items"]
    named = node.get("additionalProperties")
    if isinstance(named, dict) and "properties" in named:
        return ".NAME", named
    return None


def schema_keys(node: dict[str, Any] | None = None, path: str = "promote") -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(dotted path of its table, key, node) for every key of the schema, walked recursively."""
    node = SCHEMA["properties"]["promote"] if node is None else node
    for key, child in node.get("properties", {}).items():
        yield path, key, child
        sub = subtable(child)
        if sub is not None:
            yield from schema_keys(sub[1], f"{path}.{key}{sub[0]}")


def plain(page: str) -> str:
    """HTML as a reader sees it: no tags, entities decoded, spaces collapsed."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", page)).split())


def shown(markdown: str) -> str:
    """Markdown text as a reader sees it: no backticks, spaces collapsed."""
    return " ".join(markdown.replace("`", "").split())


def test_the_walk_finds_every_table_of_the_configuration() -> None:
    tables = {path for path, _, _ in schema_keys()}
    assert {
        "promote", "promote.packages", "promote.stations.NAME", "promote.ci", "promote.docs", "promote.requirements",
        "promote.requirements.rules", "promote.accelerations", "promote.accelerations.switch",
        "promote.accelerations.parity", "promote.accelerations.bench", "promote.accelerations.sweep",
        "promote.accelerations.quality",
        "promote.history",
    } == tables  # fmt: skip
    assert len(list(schema_keys())) > 60


def test_every_key_of_the_schema_has_a_description() -> None:
    undescribed = [f"{path}.{key}" for path, key, node in schema_keys() if not node.get("description", "").strip()]
    assert undescribed == []


def test_pyproject_tool_promote_is_the_same_schema_as_promote() -> None:
    # Two copies in one file: a key added to one only would be valid in promote.toml and refused in pyproject.toml.
    assert SCHEMA["properties"]["tool"]["properties"]["promote"] == SCHEMA["properties"]["promote"]


def test_the_generated_reference_gives_every_key_its_type_default_and_meaning() -> None:
    module = reference_module()
    text = module.render(module.load())
    for path, key, node in schema_keys():
        anchor = f'<a id="{path}.{key}"></a>`{key}`'
        if subtable(node) is not None and anchor not in text:
            # A sub-table's row links to its section, whose heading holds the anchor.
            assert f"{{#{path}.{key}}}" in text or f"{{#{path}.{key}.NAME}}" in text, f"{path}.{key}"
            continue
        [row] = [line for line in text.splitlines() if line.startswith(f"| {anchor} |")]
        _, kind, default, meaning = (cell.strip() for cell in re.split(r"(?<!\\)\|", row)[1:-1])
        assert meaning == node["description"].replace("|", "\\|")
        assert module.type_of(node) in kind
        assert default == (f"`{module.toml_value(node['default'])}`" if "default" in node else "—")
        if key in node.get("required", ()):
            assert kind.endswith(", required")


def test_the_reference_types_say_what_the_schema_allows() -> None:
    module = reference_module()
    promote = SCHEMA["properties"]["promote"]["properties"]
    assert module.type_of(promote["fetch_concurrency"]) == "integer (>= 1, <= 64)"
    assert module.type_of(promote["packages"]["items"]["properties"]["leaks"]) == '`"restore"` or `"report"`'
    assert module.type_of(promote["mirrors"]) == "list of strings or table of NAME = string"
    assert module.toml_value({}) == "{}" and module.toml_value({"A": "1"}) == '{ A = "1" }'


def test_mkdocs_build_strict_passes_and_the_site_shows_every_key(tmp_path: Path) -> None:
    site = tmp_path / "site"
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}  # the hook is imported from docs/: leave no cache there
    argv = [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml"), "-d", str(site)]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "WARNING" not in done.stderr
    assert not (site / "config_reference.py").exists()  # the hook is not published
    page = (site / "configuration" / "index.html").read_text()
    for path, key, node in schema_keys():
        ident = f"{path}.{key}"
        if f'<a id="{ident}"></a>' in page:
            [row] = re.findall(
                rf'<tr>\s*<td><a id="{re.escape(ident)}"></a><code>{key}</code></td>(.*?)</tr>', page, re.S
            )
            assert shown(node["description"]) in plain(row), ident
        else:  # a sub-table: its heading
            assert re.search(rf'<h3 id="{re.escape(ident)}(\.NAME)?">', page), ident
    for name in ("index", "commands", "findings", "faults", "development", "ci", "audits", "stations"):
        assert (site / ("" if name == "index" else name) / "index.html").is_file(), name


def parser_tables() -> dict[str, set[str]]:
    """Each function of the config parser that validates a table, and the keys it accepts (its literal set)."""
    found: dict[str, set[str]] = {}
    for name in ("parse.py", "accel_parse.py"):
        tree = ast.parse((ROOT / "promote" / "config" / name).read_text())
        for func in ast.walk(tree):
            if not isinstance(func, ast.FunctionDef):
                continue
            for call in ast.walk(func):
                is_table = isinstance(call, ast.Call) and getattr(call.func, "attr", None) == "table"
                if is_table and len(call.args) == 3 and isinstance(call.args[2], ast.Set):  # type: ignore[attr-defined]
                    keys = {str(elt.value) for elt in call.args[2].elts if isinstance(elt, ast.Constant)}  # type: ignore[attr-defined]
                    found[f"{name}:{func.name}"] = keys
    return found


# Which schema table each parser function reads.
PARSER_TABLES = {
    "parse.py:config": "promote",
    "parse.py:packages": "promote.packages",
    "parse.py:stations": "promote.stations.NAME",
    "parse.py:ci": "promote.ci",
    "parse.py:docs": "promote.docs",
    "parse.py:requirements": "promote.requirements",
    "parse.py:rule": "promote.requirements.rules",
    "parse.py:history": "promote.history",
    "accel_parse.py:accelerations": "promote.accelerations",
    "accel_parse.py:_switch": "promote.accelerations.switch",
    "accel_parse.py:_parity": "promote.accelerations.parity",
    "accel_parse.py:_bench": "promote.accelerations.bench",
    "accel_parse.py:_sweep": "promote.accelerations.sweep",
    "accel_parse.py:_quality": "promote.accelerations.quality",
}


def test_every_key_the_parser_accepts_is_in_the_schema_and_no_other() -> None:
    tables = parser_tables()
    # A new table in the parser needs a line above, and its keys in the schema.
    assert set(tables) == set(PARSER_TABLES)
    in_schema: dict[str, set[str]] = {}
    for path, key, _ in schema_keys():
        in_schema.setdefault(path, set()).add(key)
    for function, keys in tables.items():
        table = PARSER_TABLES[function]
        assert keys == in_schema[table], (
            f"{function} accepts {sorted(keys)}; the schema's {table} has {sorted(in_schema[table])}"
        )


FULL = """
[promote]
trunk = "main"
[[promote.packages]]
name = "p"
path = "."
[promote.stations.s]
[promote.ci]
[promote.docs]
repo = "."
[promote.requirements]
[promote.history]
[[promote.accelerations]]
name = "a"
switch = { env = "X" }
parity = { command = ["python", "{out}"] }
bench = { command = ["python"] }
sweep = { command = ["python", "{out}"] }
quality = { command = ["python", "{out}"] }
"""
RULE = '[promote]\ntrunk = "main"\n[[promote.requirements.rules]]\npattern = "x"\nrequirement = "y"\n'
GIVEN = {("promote", "trunk"), ("promote.packages", "name"), ("promote.packages", "path"), ("promote.docs", "repo")}
GIVEN |= {("promote.requirements.rules", k) for k in ("pattern", "requirement")}
GIVEN |= {("promote.accelerations", "name"), ("promote.accelerations.switch", "env")}
GIVEN |= {("promote.accelerations.parity", "command"), ("promote.accelerations.bench", "command")}
GIVEN |= {("promote.accelerations.sweep", "command"), ("promote.accelerations.quality", "command")}
# Defaults applied where the value is used rather than in the parser: what each means when absent.
APPLIED_LATER = {("promote.stations.NAME", "python"): DEFAULT_PYTHON}


def as_toml(value: object) -> object:
    """A parsed value as TOML (and the schema's default) writes it: tuples are lists."""
    return [as_toml(v) for v in value] if isinstance(value, tuple) else value


def test_the_schemas_defaults_are_what_the_parser_gives_an_absent_key(tmp_path: Path) -> None:
    path = tmp_path / "promote.toml"
    path.write_text(FULL)
    full = config.load(path)
    path.write_text(RULE)
    rule = config.load(path).requirements.rules[0]
    accel = full.accelerations[0]
    objects: dict[str, Any] = {
        "promote": full, "promote.packages": full.packages[0], "promote.stations.NAME": full.stations[0],
        "promote.ci": full.ci, "promote.docs": full.docs, "promote.requirements": full.requirements,
        "promote.requirements.rules": rule, "promote.accelerations": accel, "promote.history": full.history,
        "promote.accelerations.switch": accel.switch, "promote.accelerations.parity": accel.parity,
        "promote.accelerations.bench": accel.bench, "promote.accelerations.sweep": accel.sweep,
        "promote.accelerations.quality": accel.quality,
    }  # fmt: skip
    checked = 0
    for table, key, node in schema_keys():
        if (table, key) in GIVEN or subtable(node) is not None:  # a table's own keys are checked as its rows
            continue
        obj = objects[table]
        # A station's inventory (platform, devices, ...) lives on its Station; how to reach it on the config.
        holder = obj if hasattr(obj, key) else obj.station
        parsed = dict(holder.env) if key == "env" else as_toml(getattr(holder, key))
        if parsed is None:
            parsed = APPLIED_LATER.get((table, key))
        if "default" in node:
            assert parsed == node["default"], (
                f"{table}.{key}: the parser gives {parsed!r}, the schema {node['default']!r}"
            )
        else:
            assert parsed is None, (
                f"{table}.{key}: the parser gives {parsed!r} when it is absent; the schema no default"
            )
        checked += 1
    assert checked > 50


def test_the_layer_table_names_every_package_in_the_import_contracts_order() -> None:
    text = (DOCS / "development.md").read_text()
    rows = re.findall(r"^\| (\d+) \| `promote/([\w/]+)/` \|", text, flags=re.M)
    shown = {name for _, name in rows}
    packages = {p.parent.name for p in (ROOT / "promote").glob("*/__init__.py")}
    assert packages <= shown, f"not in the layer table: {sorted(packages - shown)}"
    contract = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"][0]
    order = [{m.strip().removeprefix("promote.") for m in layer.split("|")} for layer in contract["layers"]]
    by_number: dict[int, set[str]] = {}
    for number, name in rows:
        if "/" not in name:  # promote/runners/plugin/ is a contract of its own
            by_number.setdefault(int(number), set()).add(name)
    assert [by_number[n] for n in sorted(by_number, reverse=True)] == order


@pytest.mark.parametrize("page", sorted(p.name for p in DOCS.glob("*.md")))
def test_every_page_is_in_the_navigation(page: str) -> None:
    nav = (ROOT / "mkdocs.yml").read_text()
    assert re.search(rf":\s+{re.escape(page)}$", nav, flags=re.M), page


@pytest.mark.parametrize("page", sorted(p.name for p in DOCS.glob("*.md")))
def test_every_page_has_one_title(page: str) -> None:
    text = re.sub(r"```.*?```", "", (DOCS / page).read_text(), flags=re.S)  # a `#` comment in a block is no title
    assert len(re.findall(r"^# ", text, flags=re.M)) == 1


# The same tables as FULL, each under a header of its own, so a key can be written into any of them.
HEADERS = {
    "promote": "[promote]",
    "promote.packages": "[[promote.packages]]",
    "promote.stations.NAME": "[promote.stations.s]",
    "promote.accelerations.parity": "[promote.accelerations.parity]",
    "promote.accelerations.bench": "[promote.accelerations.bench]",
    "promote.history": "[promote.history]",
}
SPLIT = """
[promote]
trunk = "main"
[[promote.packages]]
name = "p"
path = "."
[promote.stations.s]
[[promote.accelerations]]
name = "a"
switch = { env = "X" }
[promote.accelerations.parity]
command = ["python", "{out}"]
[promote.accelerations.bench]
command = ["python"]
[promote.history]
"""


def edges(node: dict[str, Any]) -> Iterator[tuple[float, bool]]:
    """(value, accepted) at each bound the schema states: the bound itself and the nearest value past it."""
    step = 1 if node.get("type") == "integer" else 0.5
    if "minimum" in node:
        yield node["minimum"], True
        yield node["minimum"] - step, False
    if "exclusiveMinimum" in node:
        yield node["exclusiveMinimum"], False
        yield node["exclusiveMinimum"] + step, True
    if "maximum" in node:
        yield node["maximum"], True
        yield node["maximum"] + step, False


def test_the_schemas_bounds_are_the_parsers(tmp_path: Path) -> None:
    path = tmp_path / "promote.toml"
    checked = 0
    for table, key, node in schema_keys():
        if table not in HEADERS:
            continue
        for value, accepted in edges(node):
            header = HEADERS[table]
            path.write_text(SPLIT.replace(f"{header}\n", f"{header}\n{key} = {value!r}\n", 1))
            if accepted:
                config.load(path)
            else:
                with pytest.raises(ConfigError, match=re.escape(key)):
                    config.load(path)
            checked += 1
    assert checked >= 30
