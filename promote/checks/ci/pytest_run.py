"""What one pytest command line selects, read the way pytest reads it (ini addopts, PYTEST_ADDOPTS, args)."""

from __future__ import annotations

import fnmatch
import glob
import posixpath
from dataclasses import dataclass, field
from pathlib import Path

from promote.checks.ci import selectors
from promote.checks.ci.conftest_options import valued_options
from promote.checks.ci.terms import RUN, RUNS, Decision, NodeId, Word, normalize, under, words
from promote.core.pytest_ini import Ini, find_ini, read_ini

SHORT_VALUE = set("kmpcnWor")
LONG_VALUE = {
    "--numprocesses", "--maxprocesses", "--dist", "--tx", "--rsyncdir", "--max-worker-restart", "--config-file",
    "--rootdir", "--basetemp", "--junitxml", "--junit-xml", "--junit-prefix", "--override-ini", "--cov-report",
    "--cov-config", "--cov-fail-under", "--cov-context", "--tb", "--durations", "--durations-min", "--maxfail",
    "--pythonwarnings", "--log-level", "--log-format", "--log-date-format", "--log-cli-level", "--log-cli-format",
    "--log-cli-date-format", "--log-file", "--log-file-level", "--log-file-format", "--log-file-date-format",
    "--log-file-mode", "--capture", "--color", "--code-highlight", "--timeout", "--timeout-method", "--import-mode",
    "--confcutdir", "--reruns", "--reruns-delay", "--only-rerun", "--html", "--css", "--report-log",
    "--json-report-file", "--randomly-seed", "--asyncio-mode", "--hypothesis-profile", "--hypothesis-seed",
    "--count", "--repeat-scope", "--splits", "--group", "--splitting-algorithm", "--durations-path",
    "--last-failed-no-failures", "--lfnf", "--deselect", "--ignore", "--ignore-glob", "--assert", "--show-capture",
    "--verbosity", "--doctest-glob", "--doctest-report", "--pdbcls", "--ds", "--dc", "--benchmark-json",
    "--benchmark-save", "--benchmark-storage", "--benchmark-sort", "--benchmark-group-by", "--benchmark-columns",
}  # fmt: skip
# Options whose value decides which tests run or how they are found (an unknown value leaves them undecided).
SELECTING = {
    "-k", "-m", "-c", "-p", "-o", "--config-file", "--rootdir", "--override-ini", "--ignore", "--ignore-glob",
    "--deselect", "--confcutdir", "--import-mode", "--pyargs", "--group", "--splits", "--count",
}  # fmt: skip
OPTIONAL_VALUE = {"--cov"}  # nargs="?": it takes the next word when that is not an option
NO_RUN = {
    "--co", "--collect-only", "--collectonly", "--fixtures", "--funcargs", "--fixtures-per-test", "--markers",
    "-h", "--help", "--version", "-V", "--setup-plan", "--cache-show",
}  # fmt: skip
UNREADABLE = {"--pyargs": "--pyargs names packages, not paths", "--lf": "--lf depends on the cache"}
UNREADABLE["--last-failed"] = UNREADABLE["--lf"]


@dataclass
class _Scan:
    positional: list[Word] = field(default_factory=list)
    options: list[tuple[str, Word | None]] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)

    def value(self, *names: str) -> Word | None:
        found = [v for n, v in self.options if n in names]
        return found[-1] if found else None


def _scan(args: tuple[Word, ...], valued: frozenset[str] = frozenset()) -> _Scan:
    """`args` as pytest parses them; `valued`: long options the repository adds that take a value."""
    scan = _Scan()
    i = 0
    only_positional = False
    while i < len(args):
        w = args[i]
        t = w.text
        i += 1
        if only_positional or not t.startswith("-") or t == "-":
            scan.positional.append(w)
        elif t == "--":
            only_positional = True
        elif t.startswith("--"):
            name, eq, attached = t.partition("=")
            if eq:
                scan.options.append((name, Word(attached, w.known)))
            elif (
                name in LONG_VALUE
                or name in valued
                or (name in OPTIONAL_VALUE and i < len(args) and not args[i].text.startswith("-"))
            ):
                scan.options.append((name, args[i] if i < len(args) else None))
                i += 1
            else:
                scan.flags.append(name)
        else:
            for j in range(1, len(t)):
                if t[j] in SHORT_VALUE:
                    rest = t[j + 1 :]
                    if rest:
                        scan.options.append(("-" + t[j], Word(rest, w.known)))
                    else:
                        scan.options.append(("-" + t[j], args[i] if i < len(args) else None))
                        i += 1
                    break
                scan.flags.append("-" + t[j])
    return scan


@dataclass(frozen=True)
class PytestRun:
    """The selection of one pytest command: paths, ignores, deselects, -k and -m, and what it could not read."""

    text: str
    cwd: str
    rootdir: str
    paths: tuple[tuple[str, str], ...]  # (repo-relative path or node id, as written)
    ignore: tuple[tuple[str, str], ...] = ()
    ignore_glob: tuple[tuple[str, str], ...] = ()
    deselect: tuple[tuple[str, str], ...] = ()
    keyword: str | None = None
    markexpr: str | None = None
    unreadable: tuple[str, ...] = ()
    runs_tests: bool = True
    # Path words known only when the job runs (`"$@"`, `$TESTS`): they may name any test, or none (and then
    # pytest's own default applies), so a test outside the known paths is undecided, never dropped.
    open_paths: tuple[str, ...] = ()

    @classmethod
    def parse(cls, args: tuple[Word, ...], *, text: str, cwd: str, root: Path, addopts_env: Word | None) -> PytestRun:
        """Read `pytest ARGS` run in repo-relative `cwd` of the checkout at `root`."""
        unreadable: list[str] = []
        ini = _configuration(args, cwd, root, unreadable)
        env_args: tuple[Word, ...] = ()
        if addopts_env is not None:
            env_args = words(*addopts_env.text.split()) if addopts_env.known else (addopts_env,)
        every = (*words(*(ini.addopts if ini else ())), *env_args, *args)
        scan = _scan(every)
        rootword = scan.value("--rootdir")
        rootdir = ini.directory if ini else cwd
        if rootword is not None and rootword.known:
            rootdir = normalize(rootword.text, cwd) or ""
        # The repository's conftest files add options of their own (`--run-optional no_jupyter`): pytest knows
        # which take a value before it reads the command line, and so does the audit.
        valued = valued_options(root, rootdir, _anchors(root, cwd, scan, ini))
        scan = _scan(every, valued) if valued else scan
        # An unknown value matters only to an option that selects tests (`-k $K`), not to `--cov-report=$X`.
        choosing = [v for n, v in scan.options if v and not v.known and (n in SELECTING or n in valued)]
        for w in [w for w in scan.positional if not w.known] + choosing:
            unreadable.append(f"`{w.text}` is not known before the job runs")
        unreadable += [UNREADABLE[f] for f in scan.flags if f in UNREADABLE]
        unreadable += [f"-o {v.text}" for n, v in scan.options if n in ("-o", "--override-ini") and v and _sel(v)]
        selected = (
            _selected(scan.positional, cwd, root, unreadable) if scan.positional else _default_paths(root, cwd, ini)
        )

        def rel_values(*names: str) -> tuple[tuple[str, str], ...]:
            out = []
            for n, v in scan.options:
                if n in names and v is not None and v.known:
                    base = rootdir if n == "--deselect" else cwd
                    out.append((normalize(v.text, base) or "", v.text))
            return tuple(out)

        keyword = scan.value("-k")
        mark = scan.value("-m")
        return cls(
            text=text,
            cwd=cwd,
            rootdir=rootdir,
            paths=tuple(selected),
            ignore=rel_values("--ignore"),
            ignore_glob=rel_values("--ignore-glob"),
            deselect=rel_values("--deselect"),
            keyword=keyword.text if keyword is not None and keyword.known and keyword.text.strip() else None,
            markexpr=mark.text if mark is not None and mark.known and mark.text.strip() else None,
            unreadable=tuple(dict.fromkeys(unreadable)),
            runs_tests=not any(f in NO_RUN for f in scan.flags),
            open_paths=tuple(w.text for w in scan.positional if not w.known),
        )

    def decide(self, test: NodeId, root: Path) -> Decision:
        """Whether this command runs `test`; the first filter that drops it, or why that is unknown."""
        if not self.runs_tests:
            return Decision("dropped", f"`{self.text}` only collects, it runs no test", scope=True)
        if not any(_selects(p, test) for p, _ in self.paths):
            if self.open_paths:
                unknown = ", ".join(f"`{w}`" for w in self.open_paths)
                return Decision("undecided", f"{unknown} may select it: not known before the job runs")
            shown = ", ".join(s for _, s in self.paths) or "none"
            return Decision("dropped", f"not under the paths `{self.text}` selects ({shown})", scope=True)
        for rel, shown in self.ignore:
            if under(test.module, rel):
                return Decision("dropped", f"--ignore={shown}")
        for pattern, shown in self.ignore_glob:
            if any(fnmatch.fnmatchcase(p, pattern) for p in _self_and_parents(test.module, self.cwd)):
                return Decision("dropped", f"--ignore-glob={shown}")
        for prefix, shown in self.deselect:
            if test.raw.startswith(prefix):
                return Decision("dropped", f"--deselect {shown}")
        selected = self._expressions(test, root)
        if selected.verdict != RUN or self.unreadable:
            return selected if selected.verdict != RUN else Decision("undecided", "; ".join(self.unreadable))
        return RUNS

    def _expressions(self, test: NodeId, root: Path) -> Decision:
        """-k and -m, through pytest's own expression module; markers are read from the test's source."""
        if self.keyword is None and self.markexpr is None:
            return RUNS
        markers = selectors.markers_of(test, root)
        known = markers if not isinstance(markers, str) else frozenset()
        try:
            names = (*selectors.names_of(test, self.rootdir), *known)
            if self.keyword is not None and not selectors.evaluate("-k", self.keyword, names, exact=False):
                return Decision("dropped", f'-k "{self.keyword}"')
            if self.markexpr is None:
                return RUNS
            if isinstance(markers, str):
                return Decision("undecided", f'-m "{self.markexpr}": {markers}')
            if not selectors.evaluate("-m", self.markexpr, markers, exact=True):
                return Decision("dropped", f'-m "{self.markexpr}"')
        except selectors.Unsupported as e:
            return Decision("undecided", str(e))
        return RUNS


def _configuration(args: tuple[Word, ...], cwd: str, root: Path, unreadable: list[str]) -> Ini | None:
    """The pytest configuration the command reads: `-c FILE`, or the one pytest finds from its paths and `cwd`."""
    cli = _scan(args)
    config_word = cli.value("-c", "--config-file")
    if config_word is None or not config_word.known:
        return find_ini(root, cwd, [normalize(w.text.partition("::")[0], cwd) for w in cli.positional if w.known])
    config_path = normalize(config_word.text, cwd)
    ini = read_ini(root, config_path) if config_path is not None else None
    if ini is None:
        unreadable.append(f"-c {config_word.text} cannot be read")
    return ini


def _selected(positional: list[Word], cwd: str, root: Path, unreadable: list[str]) -> list[tuple[str, str]]:
    """(repo-relative path or node id, as written) for each known path word that names something in the checkout."""
    selected: list[tuple[str, str]] = []
    for w in positional:
        if not w.known:
            continue
        rel, node = normalize(w.text.partition("::")[0], cwd), w.text.partition("::")[2]
        if rel is None or not (root / rel).exists():
            unreadable.append(f"`{w.text}` is not a path in the repository")
        else:
            selected.append((f"{rel}::{node}" if node else rel, w.text))
    return selected


def _sel(value: Word) -> bool:
    return not value.known or value.text.split("=", 1)[0].strip() in ("addopts", "testpaths", "python_files")


def _anchors(root: Path, cwd: str, scan: _Scan, ini: Ini | None) -> list[str]:
    """The paths pytest starts from: the path arguments that exist, else its default ones."""
    given = [normalize(w.text.partition("::")[0], cwd) for w in scan.positional if w.known]
    found = [p for p in given if p is not None and (root / p).exists()]
    return found or [p for p, _ in _default_paths(root, cwd, ini)]


def _default_paths(root: Path, cwd: str, ini: Ini | None) -> list[tuple[str, str]]:
    """What pytest runs with no path arguments: `testpaths` when run from the rootdir, else the directory."""
    if ini is not None and ini.testpaths and ini.directory == cwd:
        found: list[tuple[str, str]] = []
        for pattern in ini.testpaths:
            for hit in sorted(glob.glob(pattern, root_dir=root / cwd, recursive=True)):
                rel = normalize(hit, cwd)
                if rel is not None:
                    found.append((rel, f"testpaths {pattern}"))
        if found:
            return found
    return [(cwd, cwd or ".")]


def _selects(selected: str, test: NodeId) -> bool:
    path, _, node = selected.partition("::")
    if not node:
        return under(test.module, path)
    if test.module != path:
        return False
    rest = "::".join(test.parts)
    return rest == node or rest.startswith(node + "::") or rest.startswith(node + "[")


def _self_and_parents(module: str, cwd: str) -> list[str]:
    out = [module]
    parent = posixpath.dirname(module)
    while parent and under(parent, cwd) and parent != cwd:
        out.append(parent)
        parent = posixpath.dirname(parent)
    return out
