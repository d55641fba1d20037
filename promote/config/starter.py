"""`promote init`: write a starter promote.toml from the repository's remotes and branches."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from promote.config import CONFIG_NAME, DEFAULT_TEST_PATHS
from promote.core.errors import UsageError
from promote.core.git import Repo
from promote.core.policies import REPORT
from promote.core.vocab import Owner

TRUNK_NAMES = ("main", "master", "trunk")
DEPLOYED_NAMES = ("deployed", "production", "prod", "live")


def _toml_string(text: str) -> str:
    """`text` as a TOML basic string that any TOML reader reads back as `text`."""
    # JSON's escapes are TOML's, except that JSON writes a character beyond the BMP as a surrogate pair
    # (`\ud83d\ude80`), which TOML forbids: non-ASCII is written as itself (TOML files are UTF-8), and DEL,
    # which JSON leaves raw and TOML refuses raw, is escaped.
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def _toml_list(items: list[str] | tuple[str, ...]) -> str:
    return "[" + ", ".join(_toml_string(i) for i in items) + "]"


@dataclass(frozen=True)
class Proposed:
    """A test package `promote init` proposes (commented out): where its tests are, how many, who runs them now."""

    name: str
    path: str  # repo-relative, "." for the top
    args: tuple[str, ...]
    tests: str  # the directory its tests are in
    count: int
    owner: Owner  # who runs them before any package is declared: a CI job, maybe one, or nobody
    by: str | None = None  # the CI job
    # The project's interpreter as its `python` key says it; None: none was found, promote's own counted them.
    python: str | None = None
    found_in: str | None = None  # where that environment was found (".venv", "hatch", ...)
    counted_by: str = ""  # the interpreter that counted them
    failed: int = 0  # its test modules pytest could not collect (import), not counted


@dataclass(frozen=True)
class Written:
    """What `promote init` wrote: the file, and the packages it proposed in it."""

    path: Path
    proposed: tuple[Proposed, ...] = ()


# Given the repository's root and its trunk, the packages to propose.
Proposer = Callable[[Path, str], Sequence[Proposed]]


def trunk_of(repo: Repo) -> str:
    """The branch a starter configuration names as trunk."""
    branches = repo.branches()
    return next((b for b in TRUNK_NAMES if b in branches), None) or repo.current_branch() or "main"


def _comment(text: str) -> str:
    """`text` fit for a TOML comment: a line break or control character in a path or a job's name shown escaped."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _proposed(p: Proposed) -> list[str]:
    who = {"ci": f"run by {p.by} only", "ci-undecided": "maybe run by a CI job", "nobody": "run by nothing"}
    note = _comment(f"{p.count} tests in {p.tests}, {who.get(p.owner, 'run by a package')}")
    lines = [f"# [[promote.packages]]           # {note}"]
    if p.python is None:
        # Counted by promote's interpreter, which may not import the project: said where the key would go.
        lines.append(
            f"#{' ' * 32}# counted by promote's own Python: no environment of the project's was found and "
            f'{p.failed} test module(s) failed to import; set python = "PATH" to the project\'s interpreter'
        )
    lines += [f"# name = {_toml_string(p.name)}", f"# path = {_toml_string(p.path)}"]
    if p.python is not None:
        lines.append(
            f"# python = {_toml_string(p.python)}   # the project's own, found in {_comment(p.found_in or '')}"
        )
    if p.args:
        lines.append(f"# args = {_toml_list(p.args)}")
    return [*lines, "# workers = 1", ""]


def _packages(proposed: Sequence[Proposed]) -> list[str]:
    """The commented-out packages: those proposed, else one example."""
    leaks = [
        f"# leaks = {json.dumps(REPORT)}   # the default: leaked state is reported and left as the test left it,",
        '#                    # so the run sees what plain pytest sees; "restore" puts it back, then runs',
        "#                    # the tests after a restore again without it, to show what that hid",
    ]
    if not proposed:
        return [
            "",
            "# [[promote.packages]]           # a test package that `promote test` runs",
            '# name = "app"',
            '# path = "."',
            "# workers = 1",
            *leaks,
        ]
    head = [
        "",
        "# The repository's tests by directory, as `pytest --collect-only` counted them: uncomment a package to run",
        "# it (`promote test`). Each may also say how it runs:",
    ]
    return [*head, *leaks, "", *(line for p in proposed for line in _proposed(p))]


def starter_text(repo: Repo, proposed: Sequence[Proposed] = ()) -> str:
    """The text of a starter configuration for `repo`, with the packages `proposed` commented out."""
    branches = repo.branches()
    trunk = trunk_of(repo)
    deployed = next((b for b in DEPLOYED_NAMES if b in branches), None)
    lines = [
        "# promote configuration: see `promote --help`",
        "[promote]",
        f"trunk = {_toml_string(trunk)}",
        f"mirrors = {_toml_list(sorted(repo.remotes(), key=lambda r: r != 'origin'))}",
    ]
    lines.append(
        f"deployed = {_toml_string(deployed)}"
        if deployed
        else '# deployed = "deployed"   # branch, tag or sha that production serves'
    )
    lines.append(f"test_paths = {_toml_list(DEFAULT_TEST_PATHS)}")
    lines += _packages(proposed)
    return "\n".join(lines).rstrip("\n") + "\n"


def init(start: Path, *, overwrite: bool = False, propose: Proposer | None = None) -> Written:
    """Write promote.toml at the repository root; refuse to replace an existing one unless asked.

    `propose`: the test packages to write commented out (asked only once the file may be written).
    """
    repo = Repo(start)
    target = repo.root / CONFIG_NAME
    if target.exists() and not overwrite:
        raise UsageError(f"{target} already exists; pass --overwrite to replace it")
    proposed = tuple(propose(repo.root, trunk_of(repo))) if propose is not None else ()
    target.write_text(starter_text(repo, proposed), encoding="utf-8")
    return Written(target, proposed)
