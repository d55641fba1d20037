"""`promote init`: write a starter promote.toml from the repository's remotes and branches."""

from __future__ import annotations

import json
from pathlib import Path

from promote.config import CONFIG_NAME, DEFAULT_TEST_PATHS
from promote.core.errors import UsageError
from promote.core.git import Repo
from promote.core.policies import REPORT

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


def starter_text(repo: Repo) -> str:
    """The text of a starter configuration for `repo`."""
    branches = repo.branches()
    trunk = next((b for b in TRUNK_NAMES if b in branches), None) or repo.current_branch() or "main"
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
    lines += [
        "",
        "# [[promote.packages]]           # a test package that `promote test` runs",
        '# name = "app"',
        '# path = "."',
        "# workers = 1",
        f"# leaks = {json.dumps(REPORT)}   # the default: leaked state is reported and left as the test left it,",
        '#                    # so the run sees what plain pytest sees; "restore" puts it back, then runs',
        "#                    # the tests after a restore again without it, to show what that hid",
    ]
    return "\n".join(lines) + "\n"


def init(start: Path, *, overwrite: bool = False) -> Path:
    """Write promote.toml at the repository root; refuse to replace an existing one unless asked."""
    repo = Repo(start)
    target = repo.root / CONFIG_NAME
    if target.exists() and not overwrite:
        raise UsageError(f"{target} already exists; pass --overwrite to replace it")
    target.write_text(starter_text(repo), encoding="utf-8")
    return target
