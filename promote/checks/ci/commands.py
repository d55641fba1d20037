"""Recognise test commands in a shell invocation: pytest, unittest, nox, and launchers the audit cannot read."""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from promote.checks.ci.pytest_run import PytestRun
from promote.checks.ci.shell import SHELLS, Invocation
from promote.checks.ci.terms import Word, normalize, show
from promote.checks.ci.tools import ToolCall
from promote.checks.ci.unittest_run import UnittestRun

_PYTHON = re.compile(r"(python[0-9.]*|pypy[0-9.]*|py)")
_RUNNERS = {"uv", "poetry", "pipenv", "pdm", "rye", "hatch", "conda", "mamba", "micromamba", "pixi", "pipx"}
_WRAPPERS = {"uvx", "sudo", "env", "time", "nice", "nohup", "stdbuf", "timeout", "xvfb-run", "catchsegv", "ionice"}
# Options of wrappers and runners that take a value (so the value is not mistaken for the program).
_VALUED = {
    "-u", "-n", "-k", "-s", "-p", "--name", "--prefix", "--with", "--python", "--extra", "--group", "--package",
    "--project", "--directory", "--env-file", "--index", "--index-url", "--extra-index-url", "--only-group",
    "--no-group", "--with-requirements", "--with-editable", "-e", "--environment", "--spec",
}  # fmt: skip
_COVERAGE_VALUED = {
    "--source", "--rcfile", "--omit", "--include", "--data-file", "--context", "--concurrency", "--debug",
}  # fmt: skip
_NOX_MULTI = {"-s", "--session", "--sessions", "-e", "-p", "--python", "--pythons", "--extra-pythons", "--extra-python"}
_NOX_VALUED = {"-f", "--noxfile", "--envdir", "-db", "--default-venv-backend", "-fb", "--force-venv-backend"}
_LAUNCHERS = {"make", "just", "task", "invoke", "inv"}
_PY_CLUSTER = re.compile(r"-[bBdEhiIOPqsSuvVx]+[mc]")  # python's flags given together, ending in -m or -c
_XMLRUNNER_VALUED = {"-o", "--output", "--output-file", "--outsuffix"}
# Programs that read a test module without running it (a linter on tests/test_x.py runs no test).
_FILE_READERS = {
    "mypy", "ruff", "black", "flake8", "isort", "pyright", "pylint", "pyflakes", "pycodestyle", "codespell",
    "cat", "cp", "mv", "rm", "ln", "git", "diff", "grep", "sed", "awk", "head", "tail", "echo", "ls", "wc",
    "touch", "chmod", "pre-commit", "cython", "sha256sum",
}  # fmt: skip
# Programs known to run no test of the project, whatever their arguments: shell builtins and utilities, package
# managers and installers, publishers, and the modules `python -m` runs to build or install. Any other program
# may run tests (`./ci.sh`, `python -m tornado.test`, `just cov`): undecided, never "runs no tests".
_NO_TESTS = {
    "cd", "export", "set", "unset", "source", ".", "exit", "return", "true", "false", ":", "test", "[", "[[",
    "printf", "read", "shift", "local", "declare", "readonly", "trap", "wait", "sleep", "mkdir", "rmdir", "tee",
    "sort", "uniq", "tr", "cut", "find", "tar", "zip", "unzip", "gzip", "gunzip", "curl", "wget", "which", "type",
    "command", "hash", "pwd", "basename", "dirname", "realpath", "readlink", "date", "uname", "id", "whoami",
    "df", "du", "free", "nproc", "ulimit", "chown", "jq", "yq", "base64", "openssl", "gpg", "ps", "kill",
    "pkill", "ssh-keygen", "ssh-add", "ssh", "scp", "rsync", "apt", "apt-get", "dpkg", "yum", "dnf", "apk",
    "brew", "choco", "snap", "pip", "pip3", "npm", "yarn", "pnpm", "gh", "codecov", "twine", "sphinx-build",
    "mkdocs", "coverage", "virtualenv", "venv", "build", "wheel", "ensurepip", "setuptools_scm", "pipdeptree",
    "check-manifest", "check-wheel-contents", "towncrier", "bump-my-version", "export_env", "sha512sum", "md5sum",
    "xcode-select", "sw_vers", "system_profiler", "nvidia-smi", "ccache", "sccache", "rustup", "tree",
    "dot", "doxygen", "zizmor", "actionlint", "shellcheck", "yamllint", "markdownlint", "typos", "vulture",
    "pip-audit", "safety", "bandit", "deptry", "pyupgrade", "autoflake", "docformatter", "interrogate",
    "site", "dir", "rstcheck", "doc8", "certutil", "doctest", "pydoc", "sysctl", "ldd", "otool", "file",
    "cargo", "rustc", "go", "maturin", "node", "deno", "bun",
}  # fmt: skip
# `python setup.py COMMAND`: the commands that build or install (`setup.py test` runs the tests).
_SETUP_BUILDS = {"sdist", "bdist_wheel", "build", "build_ext", "build_py", "install", "develop", "egg_info", "check"}


@dataclass(frozen=True)
class NoxCall:
    """`nox -s NAME ... -- POSARGS`: the sessions it runs come from the noxfile."""

    text: str
    cwd: str
    noxfile: str
    sessions: tuple[str, ...] | None  # None: the noxfile's default sessions
    posargs: tuple[Word, ...] = ()
    unreadable: tuple[str, ...] = ()


@dataclass(frozen=True)
class Opaque:
    """A command that may run tests in a way the audit cannot read (tox, `make test`, `$PYTHON -m pytest`)."""

    text: str
    why: str


@dataclass(frozen=True)
class ShellCall:
    """`uv run bash scripts/test.sh ARGS`: a shell a project runner starts, its script followed as a `run:` step's."""

    text: str
    inv: Invocation


Classified = PytestRun | UnittestRun | NoxCall | ToolCall | ShellCall | Opaque | None


@dataclass
class _Peeled:
    """What is left of a command once its wrappers are peeled: the program's argv, env, directory, runner."""

    argv: list[Word]
    cwd: str | None
    env: dict[str, str] = field(default_factory=dict)
    runner: str = ""  # the project runner (`hatch run`, `pdm run`, ...) the program was started by


def classify(inv: Invocation, root: Path) -> Classified:
    """What test command, if any, `inv` is."""
    text = show(inv.argv)
    peeled = _peel(inv, text)
    if not isinstance(peeled, _Peeled):
        return peeled
    argv, cwd = peeled.argv, peeled.cwd
    program = posixpath.basename(argv[0].text)
    args = tuple(argv[1:])
    if program in ("pytest", "py.test", "unittest", "xmlrunner", "nox", "tox") and cwd is None:
        return Opaque(text, "it runs in a directory the audit cannot follow (`cd` to an unknown place)")
    if program in ("pytest", "py.test"):
        assert cwd is not None
        run = PytestRun.parse(args, text=text, cwd=cwd, root=root, addopts_env=_addopts(inv, peeled.env))
        return run if run.runs_tests else None
    if program in ("unittest", "xmlrunner"):
        # unittest-xml-reporting's runner takes unittest's command line, and where to write its reports.
        assert cwd is not None
        args = _without(args, _XMLRUNNER_VALUED) if program == "xmlrunner" else args
        return UnittestRun.parse(args, text=text, cwd=cwd, root=root)
    if program == "nox":
        assert cwd is not None
        return _nox(args, text, cwd)
    if program in ("tox", "make"):
        # Each tells the commands it would run (tools.py asks it): `make docs` may run pytest too.
        if cwd is None:
            return Opaque(text, "it runs in a directory the audit cannot follow (`cd` to an unknown place)")
        if program == "tox":
            args = _tox_env(inv, peeled.env, args)
        return ToolCall(text, "tox" if program == "tox" else "make", cwd, args)
    if program in _LAUNCHERS:
        return Opaque(text, f"what `{program}` runs is not read by the audit")
    if program in SHELLS and peeled.runner:
        return ShellCall(text, Invocation(tuple(argv), cwd, (*inv.env, *peeled.env.items())))
    if peeled.runner == "hatch run" and cwd is not None:
        # Any name after `hatch run` may be a script of the project's (`hatch run full`): hatch says which.
        return ToolCall(text, "hatch", cwd, tuple(argv))
    if peeled.runner and ("test" in program or ":" in program):
        # `pdm run test`, `pixi run test`: a script of the project's own, whatever its name says.
        return Opaque(text, f"`{peeled.runner} {program}` runs a project script the audit does not read")
    module = next((a.text for a in args if _test_module(a, cwd, root)), None)
    # Builtins and utilities by name only: `./test` or `scripts/build` is the repository's own script.
    if program in _FILE_READERS or (module is None and program in _NO_TESTS and "/" not in argv[0].text):
        return None
    if module is not None:
        # `mpirun -np 8 python tests/mpi_test.py`, `mlx.launch tests/ring_test.py`: a launcher runs the module.
        return Opaque(text, f"`{program}` runs {module}, which the audit does not read")
    return Opaque(text, f"what `{program}` runs is not read by the audit")


def _test_module(word: Word, cwd: str | None, root: Path) -> bool:
    """`word` names a Python module of the repository whose name says it holds tests."""
    if not word.known or not word.text.endswith(".py") or "test" not in posixpath.basename(word.text).lower():
        return False
    path = normalize(word.text, cwd or "")
    return path is not None and (root / path).is_file()


def _without(args: tuple[Word, ...], valued: set[str]) -> tuple[Word, ...]:
    """`args` without the options in `valued` and their values (`-o DIR`, `--output=DIR`)."""
    out: list[Word] = []
    skip = False
    for a in args:
        if skip:
            skip = False
        elif a.text in valued:
            skip = True
        elif a.text.partition("=")[0] not in valued:
            out.append(a)
    return tuple(out)


def _tox_env(inv: Invocation, extra_env: dict[str, str], args: tuple[Word, ...]) -> tuple[Word, ...]:
    """tox's arguments with `-e` from TOX_ENV (tox 4 takes any option from `TOX_<NAME>`) or from TOXENV (as tox 3
    did) when none is given."""
    if any(a.text in ("-e", "--env") or a.text.startswith(("-e", "--env=")) for a in args):
        return args
    for name in ("TOX_ENV", "TOXENV"):
        set_, value = (True, extra_env[name]) if name in extra_env else inv.getenv(name)
        if set_:
            break
    if not set_:
        return args
    env = Word(value) if value is not None else Word(f"${name}", known=False)
    dash = next((i for i, a in enumerate(args) if a.text == "--"), len(args))
    return (*args[:dash], Word("-e"), env, *args[dash:])


def _addopts(inv: Invocation, extra_env: dict[str, str]) -> Word | None:
    """PYTEST_ADDOPTS as the program sees it: set by `env X=...`, by the script, or not at all."""
    if "PYTEST_ADDOPTS" in extra_env:
        return Word(extra_env["PYTEST_ADDOPTS"])
    set_, addopts = inv.getenv("PYTEST_ADDOPTS")
    if not set_:
        return None
    return Word(addopts) if addopts is not None else Word("$PYTEST_ADDOPTS", known=False)


def _peel(inv: Invocation, text: str) -> _Peeled | Opaque | ToolCall | None:
    """Peel wrappers (`sudo`, `env X=1`, `uv run`, `coverage run -m`, `python -m`) down to the program."""
    peeled = _Peeled(list(inv.argv), inv.cwd)
    while peeled.argv:
        head = peeled.argv[0]
        name = posixpath.basename(head.text)
        if not head.known and peeled.runner == "hatch run" and peeled.cwd is not None:
            # `hatch run test.py${{ matrix.python }}:test` outside a matrix: hatch says it is only known then.
            return ToolCall(text, "hatch", peeled.cwd, tuple(peeled.argv))
        if not head.known:
            # A program only the run knows (`$PYTHON`, a matrix value) may run tests: it is never "none".
            return Opaque(text, f"`{head.text}` is not known before the job runs")
        if name in _WRAPPERS or name in _RUNNERS:
            stop = _unwrap(peeled, name, text)
            if stop is not True:
                return stop
        elif name == "coverage" and len(peeled.argv) > 1 and peeled.argv[1].text == "run":
            peeled.argv = _coverage_target(peeled.argv[2:])
        elif _PYTHON.fullmatch(name):
            target = _python_target(peeled.argv[1:], text)
            if isinstance(target, Opaque):
                return target
            peeled.argv = target
        else:
            return peeled
    return None


def _unwrap(peeled: _Peeled, name: str, text: str) -> Literal[True] | Opaque | None:
    """Drop one wrapper or runner and its options from `peeled`; True to go on, else what classify returns."""
    argv = peeled.argv
    runner_verb = name in _RUNNERS and len(argv) > 1 and argv[1].text in ("run", "exec")
    if name in _RUNNERS and not runner_verb and name not in ("hatch", "pipx"):
        return None
    if name == "pipx" and len(argv) > 1 and argv[1].text in ("install", "inject", "upgrade", "ensurepath", "list"):
        return None
    if name == "hatch" and len(argv) > 1 and argv[1].text == "test":
        return Opaque(text, "`hatch test` runs pytest with hatch's own settings")
    argv = argv[2:] if runner_verb else argv[1:]
    peeled.runner = f"{name} run" if runner_verb else peeled.runner
    if name == "timeout":
        argv = _skip_options(argv)[1:]
    while argv and (argv[0].text.startswith("-") or (name == "env" and "=" in argv[0].text)):
        option = argv.pop(0).text
        if "=" in option and not option.startswith("-"):
            key, _, value = option.partition("=")
            peeled.env[key] = value
        elif option == "--directory" and argv and peeled.cwd is not None:
            peeled.cwd = normalize(argv[0].text, peeled.cwd)
        if option in _VALUED and argv:
            argv.pop(0)
    peeled.argv = argv
    return True


def _skip_options(argv: list[Word]) -> list[Word]:
    while argv and argv[0].text.startswith("-"):
        argv = argv[2:] if argv[0].text in ("-s", "-k", "--signal", "--kill-after") else argv[1:]
    return argv


def _coverage_target(argv: list[Word]) -> list[Word]:
    """`coverage run [opts] -m pytest ...` -> `pytest ...`; `coverage run [opts] script ...` -> `script ...`."""
    while argv and argv[0].text.startswith("-") and argv[0].text != "-m":
        option = argv.pop(0).text
        if option in _COVERAGE_VALUED and argv:
            argv.pop(0)
    if argv and argv[0].text == "-m":
        return argv[1:]
    return argv


def _python_target(argv: list[Word], text: str) -> list[Word] | Opaque:
    """`python [opts] -m MOD args` -> `MOD args`; `python -c CODE` that mentions tests is opaque."""
    while argv:
        option = argv[0].text
        if _PY_CLUSTER.fullmatch(option):
            # Flags given together (`-Im pytest`, `-bBc CODE`): the last one may take the next word.
            option = "-" + option[-1]
        if option == "-m":
            return argv[1:]
        if option == "-c":
            code = argv[1].text if len(argv) > 1 else ""
            if "pytest" in code or "unittest" in code:
                return Opaque(text, "`python -c` code is not read by the audit")
            return []
        if option in ("-X", "-W"):
            argv = argv[2:]
        elif option.startswith("-"):
            argv = argv[1:]
        else:
            if posixpath.basename(option) == "setup.py" and len(argv) > 1 and argv[1].text in _SETUP_BUILDS:
                return []
            return Opaque(text, f"what {option} runs is not read by the audit")
    return []


def _nox(args: tuple[Word, ...], text: str, cwd: str) -> NoxCall | None:
    sessions: list[str] | None = None
    noxfile = "noxfile.py"
    unreadable: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i].text
        i += 1
        name, eq, attached = arg.partition("=")
        if arg == "--":
            return NoxCall(text, cwd, normalize(noxfile, cwd) or noxfile, _t(sessions), args[i:], tuple(unreadable))
        if name in _NOX_MULTI:
            values = [attached] if eq else []
            while not eq and i < len(args) and not args[i].text.startswith("-"):
                values.append(args[i].text)
                i += 1
            if name in ("-s", "--session", "--sessions", "-e"):
                sessions = (sessions or []) + values
        elif name in _NOX_VALUED:
            value = attached if eq else (args[i].text if i < len(args) else "")
            i += 0 if eq else 1
            if name in ("-f", "--noxfile"):
                noxfile = value
        elif name in ("-k", "--keywords", "-t", "--tags"):
            unreadable.append(f"nox {name} selects sessions by expression")
            i += 0 if eq else 1
        elif name in ("-l", "--list", "--list-sessions", "--json", "--help", "-h", "--version"):
            return None
    return NoxCall(text, cwd, normalize(noxfile, cwd) or noxfile, _t(sessions), (), tuple(unreadable))


def _t(sessions: list[str] | None) -> tuple[str, ...] | None:
    return None if sessions is None else tuple(sessions)
