"""Local composite actions (`uses: ./path`): their steps, with the inputs the calling step gives them."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from promote.checks.ci import bounded_yaml
from promote.checks.ci.expr import EXPRESSION
from promote.checks.ci.terms import normalize

_INPUT = re.compile(r"\binputs\.([A-Za-z_][\w-]*)")
_WHOLE_INPUT = re.compile(r"\$\{\{\s*inputs\.([A-Za-z_][\w-]*)\s*\}\}")


def composite_steps(root: Path, uses: str, given: object) -> list[Any]:
    """The steps of the local composite action `uses`, each `inputs.NAME` in them replaced by its value: what
    the calling step's `with:` (`given`, its matrix values already in place) says, else the input's default,
    else "" (as GitHub passes it). A value known only when the job runs is left for the run to tell."""
    action = _action(root, uses)
    runs = action.get("runs")
    steps = runs.get("steps") if isinstance(runs, dict) else None
    if not isinstance(steps, list):
        return []
    declared = action.get("inputs")
    with_ = {str(k).casefold(): v for k, v in given.items()} if isinstance(given, dict) else {}
    values: dict[str, str] = {}
    for name, spec in declared.items() if isinstance(declared, dict) else ():
        default = spec.get("default", "") if isinstance(spec, dict) else ""
        value = _text(with_.get(str(name).casefold(), default))
        if "${{" not in value:
            values[str(name).casefold()] = value
    return [_bound(step, values) for step in steps]


def _action(root: Path, uses: str) -> dict[str, Any]:
    base = normalize(uses.split("@")[0])
    for name in ("action.yml", "action.yaml"):
        path = root / (base or ".") / name
        if path.is_file():
            try:
                data = bounded_yaml.load(path.read_text())
            except (OSError, yaml.YAMLError):
                return {}
            return data if isinstance(data, dict) else {}
    return {}


def _bound(value: Any, inputs: dict[str, str], *, condition: bool = False) -> Any:
    """`value` with the inputs known in place: a whole `${{ inputs.X }}` by its text, one inside an expression
    (or anywhere in an `if:`, which is an expression throughout) by a quoted literal."""
    if isinstance(value, dict):
        return {k: _bound(v, inputs, condition=k == "if") for k, v in value.items()}
    if isinstance(value, list):
        return [_bound(v, inputs) for v in value]
    if not isinstance(value, str):
        return value

    def literal(m: re.Match[str]) -> str:
        name = m.group(1).casefold()
        return "'" + inputs[name].replace("'", "''") + "'" if name in inputs else m.group(0)

    if condition and "${{" not in value:
        return _INPUT.sub(literal, value)
    value = _WHOLE_INPUT.sub(lambda m: inputs.get(m.group(1).casefold(), m.group(0)), value)
    return EXPRESSION.sub(lambda m: _INPUT.sub(literal, m.group(0)), value)


def _text(value: object) -> str:
    """An input's value as the action sees it: always text."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)
