"""Split a `run:` script into simple commands, as far as can be known without running it."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from promote.checks.ci.terms import Word, normalize

CONTROL = ("&&", "||", ";;", "|&", ";", "|", "&", "(", ")")
REDIRECT = ("&>>", "&>", ">>", ">&", ">|", "<<<", "<<-", "<<", "<&", "<>", ">", "<")
OPERATORS = sorted(CONTROL + REDIRECT, key=len, reverse=True)  # longest first: `&>` is not `&`
RESERVED = {"!", "{", "}", "then", "do", "else", "elif", "if", "while", "until", "time", "exec", "fi", "done", "esac"}
SHELLS = {"bash", "sh", "zsh", "dash"}
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ASSIGN = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)", re.S)
# The idiom "cd to the script's own directory": the one command substitution worth evaluating.
_SELF_DIR = re.compile(r"\$\(\s*dirname\s+\"?\$(?:0|\{0\}|\{BASH_SOURCE\[0\]\}|BASH_SOURCE)\"?\s*\)")
MAX_DEPTH = 4

Env = dict[str, "str | None"]


@dataclass(frozen=True)
class Invocation:
    """One simple command with the directory it runs in (None: unknown) and the variables it sees."""

    argv: tuple[Word, ...]
    cwd: str | None
    env: tuple[tuple[str, str | None], ...] = ()

    def getenv(self, name: str) -> tuple[bool, str | None]:
        """(set, value): value None when set to something the audit cannot see."""
        for key, value in self.env:
            if key == name:
                return True, value
        return False, None


class _Lexer:
    """A small POSIX-shell lexer: quotes, escapes, expansions from `env`, control operators, redirections."""

    def __init__(self, text: str, env: Env) -> None:
        self.s = text
        self.i = 0
        self.env = env
        self.heredocs: list[str] = []

    def commands(self) -> Iterator[list[Word] | str]:
        """Simple commands as word lists, and "(" / ")" where a subshell opens and closes."""
        current: list[Word] = []
        skip_target = False
        while self.i < len(self.s):
            ch = self.s[self.i]
            if ch in " \t\r":
                self.i += 1
            elif self.s.startswith("\\\n", self.i):
                self.i += 2
            elif ch == "\n":
                self.i += 1
                self.skip_heredocs()
                if current:
                    yield current
                current = []
            elif ch == "#":
                end = self.s.find("\n", self.i)
                self.i = len(self.s) if end < 0 else end
            elif op := next((o for o in OPERATORS if self.s.startswith(o, self.i)), None):
                self.i += len(op)
                if op in CONTROL:
                    if current:
                        yield current
                    current = []
                    if op in ("(", ")"):
                        yield op
                else:
                    skip_target = True
                    if op.startswith("<<") and op != "<<<":
                        self.heredocs.append("")
            else:
                got = self.word()
                if got and got[0].text.isdigit() and self.s[self.i : self.i + 1] in ("<", ">"):
                    continue  # a file descriptor number: `2>&1`
                if skip_target:
                    skip_target = False
                    if self.heredocs and self.heredocs[-1] == "" and got:
                        self.heredocs[-1] = got[0].text
                    continue
                current.extend(got)
        if current:
            yield current

    def skip_heredocs(self) -> None:
        for delimiter in self.heredocs:
            while self.i < len(self.s):
                end = self.s.find("\n", self.i)
                line = self.s[self.i : len(self.s) if end < 0 else end]
                self.i = len(self.s) if end < 0 else end + 1
                if line.strip() == delimiter:
                    break
        self.heredocs = []

    def word(self) -> list[Word]:
        text: list[str] = []
        known = True
        sole: str | None = None  # the value when the word is exactly one unquoted expansion
        start = self.i
        while self.i < len(self.s):
            ch = self.s[self.i]
            if ch in " \t\r\n;&|()<>":
                break
            if ch == "'":
                end = self.s.find("'", self.i + 1)
                end = len(self.s) if end < 0 else end
                text.append(self.s[self.i + 1 : end])
                self.i = end + 1
            elif ch == '"':
                part, ok = self.double_quoted()
                text.append(part)
                known = known and ok
            elif ch == "\\":
                text.append(self.s[self.i + 1 : self.i + 2].replace("\n", ""))
                self.i += 2
            elif ch in "$`":
                at = self.i
                value, ok = self.expansion()
                known = known and ok
                if ok and value is not None and at == start and self.s[self.i : self.i + 1] in ("", *" \t\r\n;&|()<>"):
                    sole = value
                elif ok and value is not None and any(c.isspace() for c in value):
                    known = False  # word splitting inside a larger word: beyond a static reading
                text.append(value if value is not None else self.s[at : self.i])
            else:
                text.append(ch)
                self.i += 1
        if sole is not None:
            return [Word(w) for w in sole.split()]
        if self.s[start : self.i] in ('"$@"', '"${@}"') and known:
            # "$@" is one word per argument, and no word at all without arguments.
            return [Word(w) for w in "".join(text).split()]
        raw = "".join(text)
        return [Word(raw if known else self.s[start : self.i], known)]

    def double_quoted(self) -> tuple[str, bool]:
        self.i += 1
        out: list[str] = []
        known = True
        while self.i < len(self.s) and self.s[self.i] != '"':
            ch = self.s[self.i]
            if ch == "\\" and self.s[self.i + 1 : self.i + 2] in ('"', "\\", "$", "`", "\n"):
                out.append(self.s[self.i + 1].replace("\n", ""))
                self.i += 2
            elif ch in "$`":
                at = self.i
                value, ok = self.expansion()
                known = known and ok
                out.append(value if value is not None else self.s[at : self.i])
            else:
                out.append(ch)
                self.i += 1
        self.i += 1
        return "".join(out), known

    def expansion(self) -> tuple[str | None, bool]:
        """Read one `$...` or backquote; (value, known)."""
        s, i = self.s, self.i
        if s[i] == "`":
            end = s.find("`", i + 1)
            self.i = len(s) if end < 0 else end + 1
            return None, False
        if s.startswith("$(", i):
            depth, j = 0, i + 1
            while j < len(s):
                depth += {"(": 1, ")": -1}.get(s[j], 0)
                j += 1
                if depth == 0:
                    break
            self.i = j
            return None, False
        if s.startswith("${", i):
            end = s.find("}", i)
            end = len(s) if end < 0 else end
            self.i = end + 1
            return self.lookup(s[i + 2 : end])
        m = _NAME.match(s, i + 1)
        if m:
            self.i = m.end()
            return self.lookup(m.group())
        if i + 1 < len(s) and (s[i + 1].isdigit() or s[i + 1] in "?@*#!$-"):
            self.i = i + 2
            return self.lookup(s[i + 1])
        self.i = i + 1
        return "$", True

    def lookup(self, name: str) -> tuple[str | None, bool]:
        value = self.env.get(name) if _NAME.fullmatch(name) or name.isdigit() or name in "@*#" else None
        return (value, True) if value is not None else (None, False)


def _strip_reserved(argv: list[Word]) -> list[Word]:
    while argv and argv[0].known and argv[0].text in RESERVED:
        argv = argv[1:]
    return argv


def invocations(
    script: str,
    *,
    cwd: str | None,
    env: Env,
    read_script: Callable[[str], str | None],
    depth: int = 0,
) -> Iterator[Invocation]:
    """Every simple command `script` would run, following `cd`, variables and repository shell scripts.

    A `run:` step's script is started with no arguments (`$@` is empty, `$#` is 0) unless `env` says otherwise:
    a repository script it calls gets the arguments of the call, when they are known.
    """
    env = {**_arguments(()), **env}
    stack: list[str | None] = []
    # `( ... )` runs in a subshell: its `cd`, variables and pushd stack are gone after `)`.
    saved: list[tuple[str | None, Env, list[str | None]]] = []
    for argv in _Lexer(script, env).commands():
        if argv == "(":
            saved.append((cwd, dict(env), list(stack)))
            continue
        if argv == ")":
            if saved:  # a `)` with no `(` closes a `case` pattern
                cwd, restored, stack = saved.pop()
                env.clear()
                env.update(restored)
            continue
        assert not isinstance(argv, str)
        argv = _strip_reserved(argv)
        if not argv or argv[0].text in ("for", "case", "select", "function"):
            continue
        assigned: list[tuple[str, str | None]] = []
        while argv and (m := _ASSIGN.fullmatch(argv[0].text)):
            assigned.append((m.group(1), m.group(2) if argv[0].known else None))
            argv = argv[1:]
        if not argv:
            env.update(assigned)
            continue
        head = argv[0].text
        if head in _BUILTINS:
            cwd = _builtin(argv, env, cwd, stack)
        elif head in SHELLS and len(argv) > 2 and argv[1].text.startswith("-") and argv[1].text.endswith("c"):
            if argv[2].known:
                inner = {**env, **dict(assigned)}
                yield from invocations(argv[2].text, cwd=cwd, env=inner, read_script=read_script, depth=depth + 1)
            else:
                yield Invocation(tuple(argv), cwd, tuple({**env, **dict(assigned)}.items()))
        elif (called := _script_path(argv)) is not None and cwd is not None and depth < MAX_DEPTH:
            path = normalize(called, cwd)
            text = read_script(path) if path is not None else None
            if text is None:
                yield Invocation(tuple(argv), cwd, tuple({**env, **dict(assigned)}.items()))
                continue
            text = _SELF_DIR.sub(lambda _: called.rpartition("/")[0] or ".", text)
            args = argv[argv.index(next(w for w in argv if w.text == called)) + 1 :]
            child = {**env, **dict(assigned), **_arguments(args), "0": called}
            yield from invocations(text, cwd=cwd, env=child, read_script=read_script, depth=depth + 1)
        else:
            yield Invocation(tuple(argv), cwd, tuple({**env, **dict(assigned)}.items()))


def _arguments(args: Sequence[Word]) -> Env:
    """The positional parameters of a script called with `args`; unknown ($@ None) when any of them is."""
    if not all(a.known for a in args):
        return {"@": None, "*": None, "#": None, **{str(i): None for i in range(1, 10)}}
    found: Env = {"@": " ".join(a.text for a in args), "*": " ".join(a.text for a in args), "#": str(len(args))}
    found.update({str(i): a.text for i, a in enumerate(args[:9], start=1)})
    found.update({str(i): "" for i in range(len(args) + 1, 10)})
    return found


_BUILTINS = ("export", "declare", "local", "readonly", "unset", "cd", "pushd", "popd")


def _builtin(argv: list[Word], env: Env, cwd: str | None, stack: list[str | None]) -> str | None:
    """Apply a builtin that changes the shell's variables or directory; the directory after it."""
    head = argv[0].text
    if head in ("export", "declare", "local", "readonly"):
        for w in argv[1:]:
            if m := _ASSIGN.fullmatch(w.text):
                env[m.group(1)] = m.group(2) if w.known else None
    elif head == "unset":
        for w in argv[1:]:
            env.pop(w.text, None)
    elif head == "popd":
        return stack.pop() if stack else None
    elif head in ("cd", "pushd"):
        if head == "pushd":
            stack.append(cwd)
        target = argv[1] if len(argv) > 1 else None
        ok = target is not None and target.known and cwd is not None and target.text not in ("-", "~")
        return normalize(target.text, cwd) if ok and target is not None and cwd is not None else None
    return cwd


def _script_path(argv: list[Word]) -> str | None:
    """The repository script a command runs (`./ci/test.sh`, `bash scripts/t.sh`), if it runs one."""
    head = argv[0]
    if head.known and head.text in SHELLS:
        rest = [w for w in argv[1:] if not w.text.startswith("-")]
        return rest[0].text if rest and rest[0].known else None
    if head.known and "/" in head.text and not head.text.endswith(".py"):
        return head.text
    return None
