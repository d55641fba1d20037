"""Validate a workflow against GitHub's workflow JSON schema, naming the file and line of the first problem."""

from __future__ import annotations

import json
from collections.abc import Iterable
from functools import lru_cache
from importlib.resources import files
from typing import Any

import jsonschema
import yaml
from jsonschema.exceptions import ValidationError, relevance

# SchemaStore's github-workflow schema, as check-jsonschema vendors it (Apache-2.0, see schemas/README.md).
SCHEMA_FILE = "schemas/github-workflow.schema.json"


# Where the schema is stricter than GitHub: GitHub runs such workflows, so the audit must not call them invalid.
# (JSON pointer of the schema node, the key it wrongly requires.) Each has a test in tests/checks.
GITHUB_ACCEPTS = (
    # `strategy:` with `fail-fast` or `max-parallel` and no `matrix`: one job, as without a strategy.
    ("definitions/normalJob/properties/strategy", "matrix"),
    ("definitions/reusableWorkflowCallJob/properties/strategy", "matrix"),
)


# Keys GitHub ignores where the schema refuses them: (JSON pointer of the schema node, "" for the root; the key).
GITHUB_IGNORES = (
    # A top-level `description:` (an action's key, often copied into workflows): such workflows run, and GitHub
    # does not show the key anywhere (anthropics/claude-code#61761, ruby-git/ruby-git#1755).
    ("", "description"),
)


@lru_cache(maxsize=1)
def _validator() -> Any:
    schema = json.loads(files("promote").joinpath(SCHEMA_FILE).read_text("utf-8"))
    for pointer, key in GITHUB_ACCEPTS:
        node = _node(schema, pointer)
        node["required"] = [k for k in node.get("required", []) if k != key]
    for pointer, key in GITHUB_IGNORES:
        _node(schema, pointer).setdefault("properties", {})[key] = {}
    return jsonschema.validators.validator_for(schema)(schema)


def _node(schema: dict[str, Any], pointer: str) -> dict[str, Any]:
    node = schema
    for step in pointer.split("/") if pointer else ():
        node = node[step]
    return node


def workflow_data(data: dict[Any, Any]) -> dict[Any, Any]:
    """The workflow with YAML 1.1's `on` (read as the boolean True) under its own name again, and the empty
    values GitHub reads as absent or empty where the schema wants a type: an event filter written with no value
    (`tags:`) is no filter, a step input with none (`with: {name: }`) is the empty string."""
    if True in data and "on" not in data:
        data = {("on" if k is True else k): v for k, v in data.items()}
    on = data.get("on")
    if isinstance(on, dict):
        events = {e: {k: v for k, v in f.items() if v is not None} if isinstance(f, dict) else f for e, f in on.items()}
        data = {**data, "on": events}
    jobs = data.get("jobs")
    if isinstance(jobs, dict):
        data = {**data, "jobs": {name: _inputs_given(job) for name, job in jobs.items()}}
    return data


def _inputs_given(job: object) -> object:
    """A job whose steps' `with:` inputs written with no value are the empty string, as GitHub passes them."""
    if not isinstance(job, dict) or not isinstance(job.get("steps"), list):
        return job
    fixed = [
        {**s, "with": {k: "" if v is None else v for k, v in s["with"].items()}}
        if isinstance(s, dict) and isinstance(s.get("with"), dict)
        else s
        for s in job["steps"]
    ]
    return {**job, "steps": fixed}


def problem(data: object, text: str) -> tuple[int, str] | None:
    """(line, message) of the first way `data` breaks the schema, or None when it is valid."""
    # The most relevant error, not descended into: its alternatives are read together in _explain.
    error = max(_validator().iter_errors(data), key=relevance, default=None)
    if error is None:
        return None
    path, message = _explain(error)
    return _line(text, path), message


def _pick(error: ValidationError) -> ValidationError:
    """The error the author most likely made: inside `oneOf`/`anyOf`, the branch that got furthest in."""
    while error.context:
        branches: dict[object, list[ValidationError]] = {}
        for e in error.context:
            branches.setdefault(e.relative_schema_path[0], []).append(e)
        deepest = max(branches.values(), key=lambda es: (max(len(e.absolute_path) for e in es), -len(es)))
        error = max(deepest, key=relevance)
    return error


def _explain(error: ValidationError) -> tuple[list[object], str]:
    """(path to the offending node, message): a stray key rather than 'not valid under any of the given schemas'."""
    error = _pick(error)
    path: list[object] = list(error.absolute_path)
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        allowed = error.schema.get("properties", {}) if isinstance(error.schema, dict) else {}
        stray = [str(k) for k in error.instance if k not in allowed]
        if stray:
            return [*path, stray[0]], f"{_where(path)}`{stray[0]}` is not a key GitHub accepts here"
    return path, f"{_where(path)}{error.message[:200]}"


def _where(path: Iterable[object]) -> str:
    parts = [str(p) for p in path]
    return f"at `{'.'.join(parts)}`: " if parts else ""


def _line(text: str, path: list[object]) -> int:
    """1-based line of the node at `path` (a key's own line for the last mapping key), as near as YAML says."""
    try:
        node: yaml.Node | None = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return 1
    line = 0
    for step in path:
        if isinstance(node, yaml.MappingNode):
            found = next(((k, v) for k, v in node.value if _key(k.value) == step), None)
            if found is None:
                break
            line, node = found[0].start_mark.line, found[1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(step, int) and step < len(node.value):
            node = node.value[step]
            line = node.start_mark.line
        else:
            break
    return line + 1


def _key(value: str) -> object:
    # YAML 1.1 reads a bare `on` as True; the schema calls it "on".
    return "on" if value in ("on", "On", "ON") else value
