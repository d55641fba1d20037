"""Read GitHub Actions workflows into jobs: runner labels, `if:` answers and `run:` steps, per matrix entry."""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from promote.checks.ci import bounded_yaml, schema
from promote.checks.ci.composite import composite_steps
from promote.checks.ci.expr import EXPRESSION, Truth, evaluate_if, evaluate_value
from promote.checks.ci.terms import WORKSPACE, normalize
from promote.checks.ci.triggers import Event, Trigger, read_on

WORKFLOWS = ".github/workflows"
ON_PUSH = Trigger((Event("push"),), True)
MAX_COMBINATIONS = 256
_MATRIX_REF = re.compile(r"\$\{\{\s*matrix((?:\.[\w-]+)+)\s*\}\}")
_WORKSPACE_REF = re.compile(r"\$\{\{\s*github\.workspace\s*\}\}")


@dataclass(frozen=True)
class Step:
    """One `run:` step (a local composite action contributes its own steps)."""

    script: str
    cwd: str | None
    env: tuple[tuple[str, str | None], ...]
    condition: Truth
    opaque: str = ""  # why the step's text cannot be read as shell (e.g. `shell: python`)


@dataclass(frozen=True)
class Job:
    """One job, or one matrix entry of it, as far as it can be read before it runs."""

    source: str
    name: str
    labels: tuple[str, ...] | None  # None: `runs-on` is only known when the workflow runs
    labels_why: str
    condition: Truth
    steps: tuple[Step, ...]
    calls: str = ""  # `uses:` of a reusable workflow in another repository
    trigger: Trigger = ON_PUSH  # when the workflow starts


@dataclass(frozen=True)
class Problem:
    """A workflow GitHub would refuse to run, with the file (and line, when YAML says)."""

    source: str
    message: str
    line: int | None = None


def read_workflows(root: Path, repository: str | None, trunk: str = "main") -> tuple[list[Job], list[Problem]]:
    """Every job of every workflow under .github/workflows; broken files become problems, not exceptions."""
    folder = root / WORKFLOWS
    files = sorted(p for p in folder.glob("*") if p.suffix in (".yml", ".yaml")) if folder.is_dir() else []
    read: dict[str, dict[str, Any]] = {}
    problems: list[Problem] = []
    for path in files:
        source = f"{WORKFLOWS}/{path.name}"
        data = _load(path, source, problems)
        if data is not None:
            read[source] = data
    triggers = _triggers(read, trunk)
    jobs: list[Job] = []
    for source, data in read.items():
        for job_id, raw in data["jobs"].items():
            jobs.extend(_job(root, source, str(job_id), raw, data, repository, problems, triggers[source]))
    return jobs, problems


def _load(path: Path, source: str, problems: list[Problem]) -> dict[str, Any] | None:
    """The workflow as GitHub reads it, or None with the problem (bad YAML, a key the schema refuses) noted."""
    try:
        text = path.read_text()
        data = bounded_yaml.load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{source}:{mark.line + 1}:{mark.column + 1}" if mark is not None else source
        what = getattr(e, "problem", None) or str(e).splitlines()[0]
        line = mark.line + 1 if mark is not None else None
        problems.append(Problem(source, f"{where}: not valid YAML: {what}", line))
        return None
    except (OSError, UnicodeDecodeError) as e:
        problems.append(Problem(source, f"{source}: cannot be read: {e}"))
        return None
    if not isinstance(data, dict) or not isinstance(data.get("jobs"), dict):
        problems.append(Problem(source, f"{source}: no `jobs:` mapping, so GitHub runs nothing from it"))
        return None
    data = schema.workflow_data(data)
    found = schema.problem(data, text)
    if found is not None:
        # GitHub refuses the whole file: none of its jobs runs, so none is read as running.
        line, message = found
        problems.append(
            Problem(source, f"{source}:{line}: {message}; GitHub refuses the workflow, so none of its jobs runs", line)
        )
        return None
    return data


def _triggers(read: dict[str, dict[str, Any]], trunk: str) -> dict[str, Trigger]:
    """Each workflow's Trigger; one that is only `workflow_call`ed takes the events of the workflows calling it."""
    triggers = {source: read_on(data.get("on"), trunk) for source, data in read.items()}
    for _ in range(4):  # reusable workflows call reusable workflows; GitHub allows four levels
        changed = False
        for source, data in read.items():
            for raw in data["jobs"].values():
                uses = raw.get("uses") if isinstance(raw, dict) else None
                callee = normalize(uses.split("@")[0]) if isinstance(uses, str) and uses.startswith("./") else None
                target = triggers.get(callee or "")
                caller = triggers[source]
                if target is None or not target.called or not caller.events:
                    continue
                events = tuple(dict.fromkeys((*target.events, *caller.events)))
                if events != target.events:
                    guards = True if any(e.name != "pull_request_target" for e in events) else caller.guards
                    triggers[callee or ""] = Trigger(events, guards, caller.why, called=True)
                    changed = True
        if not changed:
            break
    return triggers


def _job(
    root: Path, source: str, job_id: str, raw: dict[str, Any], workflow: dict[str, Any], repo: str | None,
    problems: list[Problem], trigger: Trigger,
) -> list[Job]:  # fmt: skip
    events = tuple(e.name for e in trigger.events)
    condition = evaluate_if(raw.get("if"), repo, None, events)
    uses = raw.get("uses")
    if isinstance(uses, str):
        remote = "" if uses.startswith("./") else uses
        return [Job(source, job_id, (), "", condition, (), remote, trigger)]
    if "runs-on" not in raw:
        problems.append(Problem(source, f"{source}: job `{job_id}` has no `runs-on`"))
        return []
    combos = _combinations(raw.get("strategy"))
    # An unreadable matrix leaves `${{ matrix.* }}` in place, so whatever uses it reads as unknown.
    entries: list[dict[str, Any] | None] = [None] if isinstance(combos, str) else list(combos)
    defaults = {**_run_defaults(workflow), **_run_defaults(raw)}
    env = {**_mapping(workflow.get("env")), **_mapping(raw.get("env"))}
    out = []
    for combo in entries:
        labels, why = _runs_on(raw["runs-on"], combo, repo)
        if labels is None and isinstance(combos, str):
            why = combos
        name = f"{job_id} ({_shown(list(combo.values()))})" if combo else job_id
        steps = _steps(root, raw.get("steps"), combo, env, defaults, repo, events=events)
        out.append(Job(source, name, labels, why, condition, tuple(steps), trigger=trigger))
    return out


def _runs_on(raw: object, combo: dict[str, Any] | None, repo: str | None) -> tuple[tuple[str, ...] | None, str]:
    """The labels of one matrix entry's runner: matrix values (a mapping too) and whole expressions evaluated."""
    runs_on = _substitute(raw, combo)
    if isinstance(runs_on, str) and "${{" in runs_on:
        value, why = evaluate_value(runs_on, repo, combo)
        if value is None:
            return None, why
        runs_on = value
    return _labels(runs_on)


def _steps(
    root: Path,
    raw: object,
    combo: dict[str, Any] | None,
    env: dict[str, object],
    defaults: dict[str, Any],
    repo: str | None,
    outer: Truth | None = None,
    events: tuple[str, ...] = (),
) -> list[Step]:
    """`outer`: the `if:` of the step that used a local composite action, which holds for each of its steps."""
    out: list[Step] = []
    for step in raw if isinstance(raw, list) else []:
        if not isinstance(step, dict):
            continue
        step_env = {**env, **_mapping(_substitute(step.get("env"), combo))}  # `env: ${{ matrix.env }}` too
        condition = evaluate_if(step.get("if"), repo, combo, events)
        if outer is not None and (outer.value is False or (outer.value is None and condition.value is not False)):
            condition = outer
        uses = step.get("uses")
        if isinstance(uses, str) and uses.startswith("./"):
            action = composite_steps(root, uses, _substitute(step.get("with"), combo))
            out.extend(_steps(root, action, combo, step_env, defaults, repo, condition, events))
            continue
        script = step.get("run")
        if not isinstance(script, str):
            continue
        cwd_raw = _substitute(step.get("working-directory", defaults.get("working-directory", ".")), combo)
        cwd = None if "${{" in str(cwd_raw) else normalize(_WORKSPACE_REF.sub(WORKSPACE, str(cwd_raw)))
        shell = str(step.get("shell", defaults.get("shell", "bash")))
        text = _WORKSPACE_REF.sub(WORKSPACE, _substitute(script, combo))
        opaque = "" if shell.split()[0] not in ("python", "python3") else f"`shell: {shell}` is not read as shell"
        values = {k: _env_value(v, combo) for k, v in step_env.items()}
        values["GITHUB_WORKSPACE"] = WORKSPACE
        out.append(Step(text, cwd, tuple(values.items()), condition, opaque))
    return out


def _combinations(strategy: object) -> list[dict[str, Any]] | str:
    """The matrix entries GitHub would run (include and exclude applied), or why that is unknown."""
    matrix = strategy.get("matrix") if isinstance(strategy, dict) else None
    if matrix is None:
        return [{}]
    if not isinstance(matrix, dict):
        return f"the matrix comes from an expression ({matrix})"
    axes = {k: v for k, v in matrix.items() if k not in ("include", "exclude")}
    for key, values in axes.items():
        if not isinstance(values, list):
            return f"matrix.{key} comes from an expression ({values})"
    size = 1
    for values in axes.values():
        size *= len(values)
    if size > MAX_COMBINATIONS:
        return f"the matrix has {size} entries (more than {MAX_COMBINATIONS} are not expanded)"
    combos: list[dict[str, Any]] = (
        [dict(zip(axes, values, strict=True)) for values in itertools.product(*axes.values())] if axes else []
    )
    for ex in matrix.get("exclude") or []:
        if isinstance(ex, dict):
            combos = [c for c in combos if not all(c.get(k) == v for k, v in ex.items())]
    for inc in matrix.get("include") or []:
        if not isinstance(inc, dict):
            continue
        fits = [c for c in combos if all(c[k] == v for k, v in inc.items() if k in axes)] if axes else []
        for c in fits:
            c.update(inc)
        if not fits:
            combos.append({str(k): v for k, v in inc.items()})
    return combos or [{}]


def _evaluated(expression: str, combo: dict[str, Any]) -> str:
    """`${{ matrix.tox || format('py{0}', matrix.python) }}` in a script, as its text for this entry; left as
    written (unknown) when it needs what only the run knows."""
    value, why = evaluate_value(expression, None, combo)
    if why or isinstance(value, (list, dict)) or value is None:
        return expression
    return _text(value)


def _lookup(combo: dict[str, Any], dotted: str) -> object:
    value: object = combo
    for key in dotted.strip(".").split("."):
        value = value.get(key, "") if isinstance(value, dict) else ""
    return value


def _shown(value: object) -> str:
    """A matrix entry's values as GitHub names the job: a mapping or a list by its values, in order."""
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list):
        return ", ".join(_shown(v) for v in value)
    return _text(value)


def _text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def _substitute(value: Any, combo: dict[str, Any] | None) -> Any:
    if combo is None:
        return value
    if isinstance(value, str):
        whole = _MATRIX_REF.fullmatch(value.strip())
        if whole and isinstance(found := _lookup(combo, whole.group(1)), (list, dict)):
            return found
        value = _MATRIX_REF.sub(lambda m: _text(_lookup(combo, m.group(1))), value)
        return EXPRESSION.sub(lambda m: _evaluated(m.group(0), combo), value) if "${{" in value else value
    if isinstance(value, list):
        return [_substitute(v, combo) for v in value]
    if isinstance(value, dict):
        return {k: _substitute(v, combo) for k, v in value.items()}
    return value


def _labels(runs_on: object) -> tuple[tuple[str, ...] | None, str]:
    if isinstance(runs_on, dict):
        if "group" in runs_on:
            return None, f"runner group {runs_on['group']!r} cannot be checked"
        runs_on = runs_on.get("labels", [])
    labels = [runs_on] if isinstance(runs_on, str) else runs_on if isinstance(runs_on, list) else None
    if labels is None or not all(isinstance(x, str) for x in labels):
        return None, f"`runs-on: {runs_on}` cannot be read"
    if any("${{" in x for x in labels):
        return None, f"`runs-on: {', '.join(labels)}` is only known when the workflow runs"
    return tuple(labels), ""


def _run_defaults(tbl: dict[str, Any]) -> dict[str, Any]:
    defaults = tbl.get("defaults")
    run = defaults.get("run") if isinstance(defaults, dict) else None
    return run if isinstance(run, dict) else {}


def _mapping(value: object) -> dict[str, object]:
    return {str(k): v for k, v in value.items()} if isinstance(value, dict) else {}


def _env_value(value: object, combo: dict[str, Any] | None) -> str | None:
    text = _substitute(_text(value), combo)
    return None if "${{" in text else text
