"""Read a noxfile's sessions and the pytest/unittest commands they run, from its source (never imported)."""

from __future__ import annotations

import ast
import posixpath
from dataclasses import dataclass
from pathlib import Path

from promote.checks.ci.commands import NoxCall
from promote.checks.ci.shell import Invocation
from promote.checks.ci.terms import Word, normalize

# Where a session passes `*session.posargs`: replaced by what follows `--` on the nox command line.
POSARGS = Word("*session.posargs", known=False)


@dataclass(frozen=True)
class PosargsOr(Word):
    """`*(session.posargs or DEFAULT)`: the posargs when the nox command line has some, else DEFAULT."""

    default: tuple[Word, ...] = ()


@dataclass(frozen=True)
class NoxCommand:
    """One `session.run(...)` with the directory it runs in (None after a `chdir` the audit cannot follow)."""

    argv: tuple[Word, ...]
    cwd: str | None


@dataclass(frozen=True)
class NoxSession:
    name: str
    default: bool
    commands: tuple[NoxCommand, ...]


@dataclass(frozen=True)
class Noxfile:
    """The sessions of one noxfile and the ones `nox` alone runs."""

    path: str
    sessions: tuple[NoxSession, ...]
    defaults: tuple[str, ...] | None = None  # nox.options.sessions, when set

    @classmethod
    def read(cls, root: Path, rel: str) -> Noxfile | str:
        """The parsed noxfile at repo-relative `rel`, or why it cannot be read."""
        try:
            tree = ast.parse((root / rel).read_text(), filename=rel)
        except FileNotFoundError:
            return f"{rel} does not exist"
        except (OSError, SyntaxError, UnicodeDecodeError, ValueError) as e:
            return f"{rel} cannot be read: {e}"
        base = posixpath.dirname(rel)
        sessions = []
        defaults: tuple[str, ...] | None = None
        for node in tree.body:
            if isinstance(node, ast.FunctionDef):
                session = _session(node, base)
                if session is not None:
                    sessions.append(session)
            elif (
                isinstance(node, ast.Assign)
                and any(ast.unparse(t) == "nox.options.sessions" for t in node.targets)
                and isinstance(node.value, (ast.List, ast.Tuple))
            ):
                defaults = tuple(_strings(node.value.elts))
        return cls(rel, tuple(sessions), defaults)

    def expand(self, call: NoxCall) -> tuple[list[tuple[str, Invocation]], list[str]]:
        """((session, invocation) for every command the call runs, reasons it cannot be read fully)."""
        if call.sessions is None:
            wanted = [s for s in self.sessions if (s.name in self.defaults if self.defaults is not None else s.default)]
            missing: list[str] = []
        else:
            wanted = [s for s in self.sessions if any(_is(n, s.name) for n in call.sessions)]
            missing = [n for n in call.sessions if not any(_is(n, s.name) for s in self.sessions)]
        out = []
        for session in wanted:
            for command in session.commands:
                argv: list[Word] = []
                for w in command.argv:
                    if isinstance(w, PosargsOr):
                        argv.extend(call.posargs or w.default)
                    else:
                        argv.extend(call.posargs if w == POSARGS else (w,))
                out.append((session.name, Invocation(tuple(argv), command.cwd)))
        reasons = [*call.unreadable, *(f"nox session {n!r} is not in {self.path}" for n in missing)]
        return out, reasons


def _is(requested: str, name: str) -> bool:
    # `tests-3.11` and `tests(python='3.11')` name a parametrised instance of `tests`.
    return requested == name or requested.startswith((name + "-", name + "("))


def _strings(nodes: list[ast.expr]) -> list[str]:
    return [n.value for n in nodes if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def _session(fn: ast.FunctionDef, base: str) -> NoxSession | None:
    name, default = fn.name, True
    for deco in fn.decorator_list:
        target = deco.func if isinstance(deco, ast.Call) else deco
        if ast.unparse(target) not in ("nox.session", "session"):
            continue
        if isinstance(deco, ast.Call):
            for kw in deco.keywords:
                if kw.arg == "name" and isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str):
                    name = kw.value.value
                if kw.arg == "default" and isinstance(kw.value, ast.Constant):
                    default = bool(kw.value.value)
        break
    else:
        return None
    param = fn.args.args[0].arg if fn.args.args else "session"
    calls = [
        n
        for n in ast.walk(fn)
        if isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and isinstance(n.func.value, ast.Name)
        and n.func.value.id == param
        and n.func.attr in ("run", "run_always", "chdir", "cd")
    ]
    cwd: str | None = base
    commands = []
    local = _posargs_names(fn, param)
    for call in sorted(calls, key=lambda c: (c.lineno, c.col_offset)):
        assert isinstance(call.func, ast.Attribute)
        if call.func.attr in ("chdir", "cd"):
            first = call.args[0] if call.args else None
            literal = isinstance(first, ast.Constant) and isinstance(first.value, str)
            cwd = normalize(first.value, cwd) if literal and cwd is not None else None  # type: ignore[union-attr]
            continue
        commands.append(NoxCommand(tuple(w for arg in call.args for w in _words(arg, param, local)), cwd))
    return NoxSession(name, default, tuple(commands))


def _posargs_names(fn: ast.FunctionDef, param: str) -> dict[str, ast.expr]:
    """Local names bound once, at the top of the session, to its posargs: `args = session.posargs` or
    `args = session.posargs or ["-n", "auto"]` (the default, used when the workflow passes none)."""
    found: dict[str, ast.expr] = {}
    for node in fn.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            found[node.targets[0].id] = node.value
    bound_more = [n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)]
    return {name: value for name, value in found.items() if bound_more.count(name) == 1 and _is_posargs(value, param)}


def _is_posargs(value: ast.expr, param: str) -> bool:
    if ast.unparse(value) == f"{param}.posargs":
        return True
    return (
        isinstance(value, ast.BoolOp)
        and isinstance(value.op, ast.Or)
        and len(value.values) == 2
        and ast.unparse(value.values[0]) == f"{param}.posargs"
        and isinstance(value.values[1], (ast.List, ast.Tuple))
    )


def _words(arg: ast.expr, param: str, local: dict[str, ast.expr] | None = None) -> list[Word]:
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return [Word(arg.value)]
    if isinstance(arg, ast.Starred):
        target = (local or {}).get(arg.value.id) if isinstance(arg.value, ast.Name) else None
        if isinstance(target, ast.BoolOp):
            # `*(session.posargs or [...])`: the workflow's posargs when it passes some, else the default.
            default = tuple(w for elt in target.values[1].elts for w in _words(elt, param))  # type: ignore[attr-defined]
            return [PosargsOr(POSARGS.text, False, default)]
        if target is not None or ast.unparse(arg.value) == f"{param}.posargs":
            return [POSARGS]
        if isinstance(arg.value, (ast.List, ast.Tuple)):
            return [w for elt in arg.value.elts for w in _words(elt, param)]
    return [Word(ast.unparse(arg), known=False)]
