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
MAX_HELPER_DEPTH = 4


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
    unread: tuple[str, ...] = ()  # functions it hands the session to that the audit cannot follow


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
        except (RecursionError, MemoryError):
            # CPython's own parser gives up on expressions nested thousands deep (`------1`): not a noxfile nox runs.
            return f"{rel} cannot be read: nested too deep for Python's parser"
        base = posixpath.dirname(rel)
        sessions = []
        defaults: tuple[str, ...] | None = None
        helpers = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
        for node in tree.body:
            if isinstance(node, ast.FunctionDef):
                session = _session(node, base, helpers)
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
        unread = [why for s in wanted for why in s.unread]
        for session in wanted:
            for command in session.commands:
                argv: list[Word] = []
                for w in command.argv:
                    if isinstance(w, PosargsOr):
                        argv.extend(call.posargs or w.default)
                    else:
                        argv.extend(call.posargs if w == POSARGS else (w,))
                out.append((session.name, Invocation(tuple(argv), command.cwd)))
        reasons = [*call.unreadable, *unread, *(f"nox session {n!r} is not in {self.path}" for n in missing)]
        return out, reasons


def _is(requested: str, name: str) -> bool:
    # `tests-3.11` and `tests(python='3.11')` name a parametrised instance of `tests`.
    return requested == name or requested.startswith((name + "-", name + "("))


def _strings(nodes: list[ast.expr]) -> list[str]:
    return [n.value for n in nodes if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def _session(fn: ast.FunctionDef, base: str, helpers: dict[str, ast.FunctionDef]) -> NoxSession | None:
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
    commands: list[NoxCommand] = []
    unread: list[str] = []
    _follow(fn, param, base, helpers, commands, unread, depth=0)
    return NoxSession(name, default, tuple(commands), tuple(dict.fromkeys(unread)))


def _follow(
    fn: ast.FunctionDef, param: str, cwd: str | None, helpers: dict[str, ast.FunctionDef],
    commands: list[NoxCommand], unread: list[str], depth: int,
) -> str | None:  # fmt: skip
    """Append the commands `fn` runs through its session parameter `param`, in order, following the functions
    of the noxfile it hands the session to (`tests_with_options(session, ...)`); the directory it leaves."""
    calls = sorted((n for n in ast.walk(fn) if isinstance(n, ast.Call)), key=lambda c: (c.lineno, c.col_offset))
    local = _posargs_names(fn, param)
    for call in calls:
        func = call.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == param:
            if func.attr in ("chdir", "cd"):
                first = call.args[0] if call.args else None
                literal = isinstance(first, ast.Constant) and isinstance(first.value, str)
                cwd = normalize(first.value, cwd) if literal and cwd is not None else None  # type: ignore[union-attr]
            elif func.attr in ("run", "run_always"):
                commands.append(NoxCommand(tuple(w for arg in call.args for w in _words(arg, param, local)), cwd))
            continue
        handed = _handed(call, param)
        if handed is None:
            continue
        helper = helpers.get(func.id) if isinstance(func, ast.Name) else None
        inner = _parameter(helper, handed) if helper is not None else None
        if helper is None or inner is None or depth >= MAX_HELPER_DEPTH:
            unread.append(f"`{ast.unparse(func)}` is handed the nox session and is not read")
            continue
        cwd = _follow(helper, inner, cwd, helpers, commands, unread, depth + 1)
    return cwd


def _handed(call: ast.Call, param: str) -> int | str | None:
    """Where `call` passes the session: its position, or the keyword; None when it does not."""
    for i, arg in enumerate(call.args):
        if isinstance(arg, ast.Name) and arg.id == param:
            return i
    return next((k.arg for k in call.keywords if isinstance(k.value, ast.Name) and k.value.id == param), None)


def _parameter(fn: ast.FunctionDef, handed: int | str) -> str | None:
    """The name `fn` knows the session by, passed at position or keyword `handed`."""
    names = [a.arg for a in (*fn.args.posonlyargs, *fn.args.args)]
    if isinstance(handed, int):
        return names[handed] if handed < len(names) else None
    return handed if handed in names or handed in [a.arg for a in fn.args.kwonlyargs] else None


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
    if isinstance(arg, ast.JoinedStr):
        # f"--cov-report=html:{path}": the option is known, its value only when the session runs.
        text = "".join(
            str(v.value) if isinstance(v, ast.Constant) else "{" + ast.unparse(v.value) + "}"  # type: ignore[attr-defined]
            for v in arg.values
        )
        return [Word(text, known=False)]
    return [Word(ast.unparse(arg), known=False)]
