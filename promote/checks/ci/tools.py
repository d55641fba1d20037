"""Ask tox, make and hatch which commands they would run, rather than guess from their files.

Each tool is asked the way a user would ask it, without running a test: `tox config` (the resolved `commands`
and `change_dir` of each environment, `{posargs}` filled in), `make --dry-run TARGET`, and `hatch env show
--json` (each environment's scripts, expanded). Asking runs the repository's own configuration code (a
Makefile's `$(shell ...)`, a hatch plugin), as `promote test` runs its tests: it is bounded in time and output.
A tool that is not installed where promote runs is said to be so, once per tool, never guessed around.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import sys
import tempfile
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from promote.checks.ci.shell import Invocation, invocations
from promote.checks.ci.terms import Word
from promote.core import bounded_json
from promote.core.process import run_bounded

Tool = Literal["tox", "make", "hatch"]
TIMEOUT_S = 30.0
MAX_OUTPUT = 1_000_000
# A word known only when the job runs, passed to the tool in its place and read back as unknown.
_HOLE = "__promote_unknown_{}__"
_HOLES = re.compile(r"__promote_unknown_(\d+)__")
_ENTERING = re.compile(r"^make(?:\[\d+\])?: Entering directory ['`](.*)'$")
_LEAVING = re.compile(r"^make(?:\[\d+\])?: Leaving directory")
_UNKNOWN_ENVS = "provided environments not found in configuration file"
_MAKE_COUNTS = {"-j", "--jobs", "-l", "--load-average", "--max-load"}  # their number is optional
_MAKE_VALUED = {"-C", "-f", "-I", "-o", "-W", "--directory", "--file", "--makefile", "--include-dir"}


@dataclass(frozen=True)
class ToolCall:
    """A command of a tool that can tell what it runs: `tox -e py`, `make test`, `hatch run test:cov`."""

    text: str
    tool: Tool
    cwd: str
    args: tuple[Word, ...]  # what follows the program (for hatch, what follows `run`)


@dataclass(frozen=True)
class Answer:
    """What the tool said it runs: (label, invocation) per command, or why it could not tell."""

    runs: tuple[tuple[str, Invocation], ...] = ()
    why: str = ""
    missing: bool = False  # the tool is not installed where promote runs


@dataclass
class Tools:
    """Asks each tool once per question within one audit (matrix entries repeat the same commands).

    `path`: where the tools are looked for; by default beside promote's own interpreter (its venv), then PATH.
    """

    root: Path
    path: str | None = None
    asked: dict[tuple[str, str, tuple[Word, ...]], Answer] = field(default_factory=dict)
    # While collecting, questions are only noted (see `prefetch`): tox answers many environments in one call,
    # and a matrix asks for one environment per entry.
    collecting: bool = False
    noted: list[ToolCall] = field(default_factory=list)
    tox_said: dict[tuple[str, tuple[Word, ...]], dict[str, dict[str, str]]] = field(default_factory=dict)
    hatch_shown: dict[str, tuple[str, str]] = field(default_factory=dict)  # directory -> (`env show --json`, why)

    def prefetch(self) -> None:
        """Ask tox once per directory and posargs for every environment the noted questions name."""
        self.collecting = False
        program = installed("tox", self.path)
        groups: dict[tuple[str, tuple[Word, ...]], list[str]] = {}
        for call in self.noted:
            question = _tox_question(call)
            if call.tool == "tox" and not isinstance(question, str) and question[0]:
                groups.setdefault((call.cwd, question[1]), []).extend(question[0])
        for (cwd, posargs), envs in groups.items() if program is not None else ():
            self.tox_said[(cwd, posargs)] = self._ask_tox(program or "tox", cwd, list(dict.fromkeys(envs)), posargs)

    def _ask_tox(self, program: str, cwd: str, envs: list[str], posargs: tuple[Word, ...]) -> dict[str, dict[str, str]]:
        """tox's sections for `envs`, asked in one call; each environment tox says it does not know is told so.

        tox refuses the whole question for one environment it does not know, naming the ones it does not know:
        those are set aside and the rest asked again (a matrix of twenty entries needs no twenty calls), so a job
        whose environment tox knows is not refused for its neighbour's.
        """
        said: dict[str, dict[str, str]] = {}
        call = ToolCall("tox", "tox", cwd, ())
        while envs:
            out, why = _ran(self.root, call, _tox_argv(program, envs, posargs), whole=True)
            if not why:
                return {**said, **_sections(out)}
            unknown = [e for e in envs if e in why.split()] if _UNKNOWN_ENVS in why else []
            for env in unknown or envs:
                said[env] = {"": f"tox could not tell: {_UNKNOWN_ENVS}: {env}" if unknown else why[:320]}
            envs = [e for e in envs if e not in said]
        return said

    def ask(self, call: ToolCall) -> Answer:
        if self.collecting:
            self.noted.append(call)
            return Answer(why="not asked yet")
        key = (call.tool, call.cwd, call.args)
        if key not in self.asked and call.tool == "tox":
            prefetched = self._prefetched(call)
            if prefetched is not None:
                self.asked[key] = prefetched
        if key not in self.asked:
            program = installed(call.tool, self.path)
            if program is None:
                self.asked[key] = Answer(why=f"{call.tool} is not installed where promote runs", missing=True)
            else:
                asker = {"tox": _tox, "make": _make, "hatch": self._hatch}[call.tool]
                self.asked[key] = asker(self.root, program, call)
        return self.asked[key]

    def _hatch(self, root: Path, program: str, call: ToolCall) -> Answer:
        """hatch's scripts for `call`: every environment is shown in one call per directory, asked once."""
        if call.cwd not in self.hatch_shown:
            self.hatch_shown[call.cwd] = _ran(root, call, [program, "env", "show", "--json"])
        return _hatch(call, *self.hatch_shown[call.cwd])

    def _prefetched(self, call: ToolCall) -> Answer | None:
        """tox's answer from the one call `prefetch` made, when it named every environment `call` asks for."""
        question = _tox_question(call)
        if isinstance(question, str) or not question[0]:
            return None
        envs, posargs = question
        said = self.tox_said.get((call.cwd, posargs), {})
        if not all(env in said for env in envs):
            return None
        refused = next((said[env][""] for env in envs if "" in said[env]), None)
        if refused is not None:
            return Answer(why=refused)
        return _tox_answer(self.root, {env: said[env] for env in envs}, posargs)


def installed(tool: Tool, path: str | None = None) -> str | None:
    """The tool's program, looked for in `path` (default: beside promote's own interpreter, then PATH)."""
    if path is None:
        path = os.pathsep.join((str(Path(sys.executable).parent), os.environ.get("PATH", "")))
    return shutil.which(tool, path=path)


def _holes(args: Sequence[Word]) -> list[str]:
    return [a.text if a.known else _HOLE.format(i) for i, a in enumerate(args)]


def _words(argv: Sequence[str], args: Sequence[Word]) -> tuple[Word, ...]:
    out = []
    for a in argv:
        hole = _HOLES.search(a)
        out.append(Word(args[int(hole.group(1))].text, known=False) if hole else Word(a))
    return tuple(out)


def _ran(root: Path, call: ToolCall, argv: list[str], *, whole: bool = False) -> tuple[str, str]:
    """(stdout, "") of the question, or ("", why it failed); `whole`: all the tool said from its error on."""
    with tempfile.TemporaryDirectory(prefix="promote-ask-") as scratch:
        if call.tool == "tox":
            # To fill in `{envsitepackagesdir}` tox makes the environment: in a scratch directory, not the
            # checkout, and without fetching interpreters (uv would try the network for each one it lacks).
            argv = [*argv[:2], "--workdir", scratch, *argv[2:]]
        # The CI's tox is not told the settings of whoever runs promote (TOXENV, TOX_*).
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TOX_", "TOXENV"))}
        env.update(UV_OFFLINE="1", UV_PYTHON_DOWNLOADS="never", VIRTUALENV_DOWNLOAD="0")
        try:
            done = run_bounded(argv, cwd=root / call.cwd, timeout=TIMEOUT_S, env=env, die_with_promote=True)
        except OSError as e:
            return "", f"{call.tool} could not be started: {e}"
    if done.status is None:
        return "", f"{call.tool} did not answer within {TIMEOUT_S:g} s"
    if not done.ok:
        # tox and make say what went wrong on either stream: the last line that says anything.
        said = [line.strip() for line in (done.stderr + "\n" + done.stdout).splitlines() if line.strip()]
        error = next((i for i, line in enumerate(said) if "error" in line.lower()), max(0, len(said) - 1))
        shown = (" ".join(said[error:]) if whole else " ".join(said[error : error + 3])[:300]) if said else done.reason
        return "", f"{call.tool} could not tell: {shown}"
    return done.stdout[:MAX_OUTPUT], ""


def _tox_question(call: ToolCall) -> tuple[list[str], tuple[Word, ...]] | str:
    """(environments named with -e, none for tox's env_list; the posargs after `--`), or why it is unknown."""
    args = list(call.args)
    if args and args[0].text in ("run", "r", "run-parallel", "p", "exec", "e"):
        args = args[1:]
    envs: list[str] = []
    posargs: tuple[Word, ...] = ()
    i = 0
    while i < len(args):
        word = args[i]
        if word.text == "--":
            posargs = tuple(args[i + 1 :])
            break
        if word.text in ("-e", "--env") and i + 1 < len(args):
            if not args[i + 1].known:
                return f"the tox environment `{args[i + 1].text}` is only known when the job runs"
            envs = args[i + 1].text.split(",")
            i += 1
        elif word.text.startswith(("-e", "--env=")) and word.known:
            envs = (word.text.split("=", 1)[1] if "=" in word.text else word.text[2:]).split(",")
        i += 1
    return [e for e in envs if e], posargs


def _tox_argv(program: str, envs: Sequence[str], posargs: Sequence[Word]) -> list[str]:
    argv = [program, "config", "--no-provision", "-k", "commands", "change_dir"]
    argv += ["-e", ",".join(envs)] if envs else []
    return [*argv, "--", *_holes(posargs)] if posargs else argv


def _tox(root: Path, program: str, call: ToolCall) -> Answer:
    question = _tox_question(call)
    if isinstance(question, str):
        return Answer(why=question)
    envs, posargs = question
    out, why = _ran(root, call, _tox_argv(program, envs, posargs))
    return Answer(why=why) if why else _tox_answer(root, _sections(out), posargs)


def _tox_answer(root: Path, sections: dict[str, dict[str, str]], posargs: Sequence[Word]) -> Answer:
    runs: list[tuple[str, Invocation]] = []
    for env, values in sections.items():
        cwd = _relative(root, values.get("change_dir", ""))
        for line in values.get("commands", "").splitlines():
            try:
                argv = shlex.split(line)
            except ValueError:
                return Answer(why=f"tox environment {env}: `{line}` cannot be split into words")
            if argv:
                runs.append((f"tox env {env}", Invocation(_words(argv, posargs), cwd)))
    return Answer(tuple(runs)) if runs else Answer(why="tox names no command for these environments")


def _sections(text: str) -> dict[str, dict[str, str]]:
    """`[testenv:NAME]` sections of `tox config`: each key's value, continuation lines joined by newlines."""
    found: dict[str, dict[str, str]] = {}
    current: dict[str, str] | None = None
    key = ""
    for line in text.splitlines():
        if line.startswith("[testenv:") and line.endswith("]"):
            current = found.setdefault(line[len("[testenv:") : -1], {})
        elif line.startswith("["):
            current = None
        elif current is not None and line.startswith(" ") and key:
            current[key] = (current[key] + "\n" + line.strip()).strip()
        elif current is not None and " = " in line + " ":
            key, _, value = line.partition(" =")
            key = key.strip()
            current[key] = value.strip()
    return found


def _relative(root: Path, path: str) -> str | None:
    """A tool's absolute directory as the audit's repository-relative one (None: outside the checkout)."""
    if not path:
        return None
    try:
        rel = Path(path).resolve().relative_to(root.resolve())
    except ValueError:
        return None
    return "" if str(rel) == "." else rel.as_posix()


def _make_args(args: Sequence[Word]) -> tuple[list[str], list[str]] | None:
    """(make's arguments for a dry run, the targets among them): targets, variables and the options that say
    where and which Makefile; the job count (`-j $(nproc)`) left out. None when a target is only known when the
    job runs."""
    argv: list[str] = []
    targets: list[str] = []
    rest = deque(args)
    while rest:
        word = rest.popleft()
        if word.text in _MAKE_COUNTS:
            if rest and (not rest[0].known or rest[0].text.isdigit()):
                rest.popleft()
        elif not word.known:
            return None
        elif word.text in _MAKE_VALUED:
            if not rest or not rest[0].known:
                return None
            argv += [word.text, rest.popleft().text]
        elif word.text.startswith(("--directory=", "--file=", "--makefile=")):
            argv.append(word.text)
        elif not word.text.startswith("-"):
            argv.append(word.text)
            targets += [] if "=" in word.text else [word.text]
    return argv, targets


def _make(root: Path, program: str, call: ToolCall) -> Answer:
    read = _make_args(call.args)
    if read is None:
        return Answer(why="the make target is only known when the job runs")
    args, targets = read
    out, why = _ran(root, call, [program, "--dry-run", "--no-print-directory", *args])
    if why:
        return Answer(why=why)
    runs: list[tuple[str, Invocation]] = []
    target = " ".join(targets) or "its default target"
    for line in out.splitlines():
        if _ENTERING.match(line) or _LEAVING.match(line) or not line.strip():
            continue
        for inv in invocations(line, cwd=call.cwd, env={}, read_script=lambda _: None):
            runs.append((f"make {target}", inv))
    return Answer(tuple(runs)) if runs else Answer(why=f"make {target} runs no command")


def _hatch(call: ToolCall, out: str, why: str) -> Answer:
    """The commands of the script `call` names, from what `hatch env show --json` said (`out`, or `why` not)."""
    args = list(call.args)
    if not args or not args[0].known:
        shown = args[0].text if args else ""
        return Answer(why=f"the hatch script `{shown}` is only known when the job runs")
    env, _, script = args[0].text.rpartition(":")
    if why:
        return Answer(why=why)
    try:
        said = bounded_json.loads(out)
    except bounded_json.JsonRejected as e:
        return Answer(why=f"hatch env show --json did not print JSON that can be read: {e}")
    envs: dict[str, bounded_json.Json] = {
        name: table.get("scripts", {})
        for name, table in (said.items() if isinstance(said, dict) else ())
        if isinstance(table, dict) and (name == (env or "default") or name.startswith(f"{env or 'default'}."))
    }
    extra = args[1:]
    runs: list[tuple[str, Invocation]] = []
    for name, scripts in envs.items():
        commands = scripts.get(script) if isinstance(scripts, dict) else None
        if not isinstance(commands, list):
            continue
        for command in commands:
            for inv in invocations(str(command), cwd=call.cwd, env={}, read_script=lambda _: None):
                # Arguments after the script fill its `{args}` or are appended: shown, but not placed by the audit.
                tail = tuple(Word(a.text, known=False) for a in extra)
                runs.append((f"hatch env {name}", Invocation(inv.argv + tail, inv.cwd, inv.env)))
    # No script of that name: hatch runs the program itself in the environment, which is no test command here.
    return Answer(tuple(runs))
