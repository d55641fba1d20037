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
    for call in sorted(calls, key=lambda c: (c.lineno, c.col_offset)):
        assert isinstance(call.func, ast.Attribute)
        if call.func.attr in ("chdir", "cd"):
            first = call.args[0] if call.args else None
            literal = isinstance(first, ast.Constant) and isinstance(first.value, str)
            cwd = normalize(first.value, cwd) if literal and cwd is not None else None  # type: ignore[union-attr]
            continue
        commands.append(NoxCommand(tuple(w for arg in call.args for w in _words(arg, param)), cwd))
    return NoxSession(name, default, tuple(commands))


def _words(arg: ast.expr, param: str) -> list[Word]:
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return [Word(arg.value)]
    if isinstance(arg, ast.Starred):
        if ast.unparse(arg.value) == f"{param}.posargs":
            return [POSARGS]
        if isinstance(arg.value, (ast.List, ast.Tuple)):
            return [w for elt in arg.value.elts for w in _words(elt, param)]
    return [Word(ast.unparse(arg), known=False)]
