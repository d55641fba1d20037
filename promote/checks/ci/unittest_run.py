"""What one `python -m unittest` command line runs: discovery (-s, -p, -t), named modules, -k patterns."""

from __future__ import annotations

import ast
import fnmatch
import posixpath
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from promote.checks.ci.terms import RUNS, Decision, NodeId, Word, normalize, under

# unittest.loader.VALID_MODULE_NAME: discovery skips files whose names are not importable.
_VALID_MODULE = re.compile(r"[_a-z]\w*\.py$", re.IGNORECASE)
_VALUED = {"-s", "--start-directory", "-p", "--pattern", "-t", "--top-level-directory", "-k", "--durations"}
_FLAGS = {"-v", "--verbose", "-q", "--quiet", "--locals", "-f", "--failfast", "-c", "--catch", "-b", "--buffer"}


@dataclass(frozen=True)
class UnittestRun:
    """The selection of one unittest command."""

    text: str
    cwd: str
    start: str | None  # repo-relative discovery start; None when modules are named instead
    pattern: str = "test*.py"
    top: str = ""
    names: tuple[tuple[str, str, str], ...] = ()  # (module path, "Class.method" rest, as written)
    keywords: tuple[str, ...] = ()
    unreadable: tuple[str, ...] = ()

    @classmethod
    def parse(cls, args: tuple[Word, ...], *, text: str, cwd: str, root: Path) -> UnittestRun:
        """Read `python -m unittest ARGS` run in repo-relative `cwd`."""
        unreadable = [f"`{w.text}` is not known before the job runs" for w in args if not w.known]
        rest = [w.text for w in args]
        explicit = bool(rest) and rest[0] == "discover"
        rest = rest[1:] if explicit else rest
        options: dict[str, str] = {}
        keywords: list[str] = []
        positional: list[str] = []
        i = 0
        while i < len(rest):
            arg = rest[i]
            i += 1
            name, eq, attached = arg.partition("=")
            if name in _VALUED:
                value = attached if eq else (rest[i] if i < len(rest) else "")
                i += 0 if eq else 1
                key = {"--start-directory": "-s", "--pattern": "-p", "--top-level-directory": "-t"}.get(name, name)
                if key == "-k":
                    keywords.append(value)
                else:
                    options[key] = value
            elif arg.startswith("-k") and len(arg) > 2:
                keywords.append(arg[2:])
            elif arg in _FLAGS or arg.startswith("-"):
                continue
            else:
                positional.append(arg)
        if explicit or not positional:  # `python -m unittest` alone (or with options only) discovers
            start, pattern, top = [*positional, None, None, None][:3]
            start_dir = normalize(options.get("-s", start or "."), cwd)
            top_dir = normalize(options.get("-t", top or ""), cwd) if options.get("-t", top) else start_dir
            if start_dir is None or not (root / start_dir).is_dir():
                unreadable.append(f"discovery start {options.get('-s', start)!r} is not a directory here")
            return cls(
                text, cwd, start_dir or "", options.get("-p", pattern or "test*.py"), top_dir or "", (),
                tuple(keywords), tuple(unreadable),
            )  # fmt: skip
        names = []
        for name in positional:
            found = _resolve_name(root, cwd, name)
            if found is None:
                unreadable.append(f"`{name}` names no module in the repository")
            else:
                names.append((*found, name))
        return cls(text, cwd, None, names=tuple(names), keywords=tuple(keywords), unreadable=tuple(unreadable))

    def decide(self, test: NodeId, root: Path) -> Decision:
        """Whether this command runs `test`."""
        if self.start is not None:
            why, scope = self._discovers(test.module, root)
            if why:
                return Decision("dropped", why, scope)
        elif not any(_named(module, rest, test) for module, rest, _ in self.names):
            shown = ", ".join(s for _, _, s in self.names)
            return Decision("dropped", f"not among the modules `{self.text}` names ({shown})", scope=True)
        kind = _kind(test, root)
        if kind != RUNS:
            return kind
        if self.keywords:
            base = self.top if self.start is not None else self.cwd
            dotted = ".".join([_dotted(test.module, base), *test.parts])
            if not any(_k_matches(k, dotted) for k in self.keywords):
                return Decision("dropped", " ".join(f"-k {k}" for k in self.keywords))
        if self.unreadable:
            return Decision("undecided", "; ".join(self.unreadable))
        return RUNS

    def _discovers(self, module: str, root: Path) -> tuple[str, bool]:
        """(why discovery does not find `module`, whether that is only scope); ("", False) when it does."""
        start = self.start or ""
        if not under(module, start):
            return f"not under the discovery start {start or '.'} of `{self.text}`", True
        name = posixpath.basename(module)
        if not fnmatch.fnmatchcase(name, self.pattern) or not _VALID_MODULE.match(name):
            return f"{name} does not match -p {self.pattern} of `{self.text}`", False
        parent = posixpath.dirname(module)
        while parent and parent != start:
            if not (root / parent / "__init__.py").is_file():
                return f"{parent}/ has no __init__.py, so `{self.text}` does not enter it", False
            parent = posixpath.dirname(parent)
        return "", False


def _resolve_name(root: Path, cwd: str, name: str) -> tuple[str, str] | None:
    """(module path, remaining dotted name) for `tests.test_a.Case.test_x` or `tests/test_a.py`."""
    if name.endswith(".py"):
        rel = normalize(name, cwd)
        return (rel, "") if rel is not None and (root / rel).is_file() else None
    parts = name.split(".")
    for n in range(len(parts), 0, -1):
        rel = normalize("/".join(parts[:n]) + ".py", cwd)
        if rel is not None and (root / rel).is_file():
            return rel, ".".join(parts[n:])
    return None


def _named(module: str, rest: str, test: NodeId) -> bool:
    if module != test.module:
        return False
    dotted = ".".join(test.parts)
    return not rest or dotted == rest or dotted.startswith(rest + ".")


def _dotted(module: str, base: str) -> str:
    rel = module[len(base) + 1 :] if base and module.startswith(base + "/") else module
    return rel.removesuffix(".py").replace("/", ".")


def _k_matches(pattern: str, name: str) -> bool:
    return fnmatch.fnmatchcase(name, pattern) if "*" in pattern else pattern in name


def _kind(test: NodeId, root: Path) -> Decision:
    """unittest runs methods of TestCase classes only: not plain functions, not plain classes."""
    if not test.parts:
        # A module pytest could not collect: unittest imports it all the same, and its import error fails there.
        return RUNS
    if len(test.parts) < 2:
        what = f"`{test.parts[0]}` is a plain function"
        return Decision("dropped", f"unittest runs TestCase classes only; {what}", scope=True)
    path = root / test.module
    try:
        stamp = path.stat().st_mtime_ns
    except OSError:
        return Decision("undecided", f"{test.module} is not in the checkout")
    kind = _class_kind(str(path), stamp, test.parts[0])
    if kind == "plain":
        return Decision("dropped", f"unittest runs TestCase classes only; {test.parts[0]} is not one", scope=True)
    if kind == "unknown":
        return Decision("undecided", f"cannot tell whether {test.parts[0]} is a unittest.TestCase")
    return RUNS


@lru_cache(maxsize=1024)
def _class_kind(path: str, stamp: int, name: str) -> str:
    """testcase | plain | unknown, from the module's source (never imported)."""
    try:
        tree = ast.parse(Path(path).read_text())
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return "unknown"
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    seen: set[str] = set()

    def kind(cls_name: str) -> str:
        node = classes.get(cls_name)
        if node is None or cls_name in seen:
            return "unknown"
        seen.add(cls_name)
        results = []
        for base in node.bases:
            base_name = base.id if isinstance(base, ast.Name) else base.attr if isinstance(base, ast.Attribute) else ""
            if base_name.endswith("TestCase"):
                return "testcase"
            results.append("plain" if base_name == "object" else kind(base_name) if base_name in classes else "unknown")
        if "testcase" in results:
            return "testcase"
        return "unknown" if "unknown" in results else "plain"

    return kind(name)
