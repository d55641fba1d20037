"""The manual's pre-commit set-up (docs/ci.md), exactly as written: the hook runs `promote check` on `git push`."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.gitrepos import commit, git, make_fleet

pytestmark = pytest.mark.slow

ROOT = Path(__file__).parent.parent
CI_PAGE = (ROOT / "docs" / "ci.md").read_text(encoding="utf-8")


def pre_commit() -> list[str]:
    if shutil.which("pre-commit", path=str(Path(sys.executable).parent)) is None:
        pytest.fail("pre-commit is not installed beside this interpreter (it is in the dev extra)")
    return [str(Path(sys.executable).parent / "pre-commit")]


def test_the_pre_push_hook_blocks_a_push_that_would_discard_a_mirrors_commits(tmp_path: Path) -> None:
    if not (ROOT / ".git").exists():
        pytest.skip("the hook is installed from this repository's own commits; this copy is not a git repository")
    fleet = make_fleet(tmp_path, names=("origin", "mini"))
    # The manual's configuration, with this repository (at its checked-out commit) as the hook's source.
    [config] = [text for text in re.findall(r"```yaml\n(.*?)```", CI_PAGE, re.S) if "promote-check" in text]
    rev = git(ROOT, "rev-parse", "HEAD")
    text = config.replace("<this repository>", str(ROOT)).replace("rev: v0.1.0", f"rev: {rev}")
    (fleet.work / ".pre-commit-config.yaml").write_text(text)
    commit(fleet.work, "hook config", {".gitignore": ".promote/\n"})
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home")}
    [install] = [line.split("#")[0].strip() for line in CI_PAGE.splitlines() if line.startswith("pre-commit install")]
    subprocess.run([*pre_commit(), *install.split()[1:]], cwd=fleet.work, env=env, check=True, capture_output=True)

    # A second developer pushed to `mini`: the candidate lacks that commit.
    other = fleet.clone_of("mini", "other")
    commit(other, "someone else's work")
    git(other, "push", "-q", "origin", "main")
    before = fleet.refs()

    blocked = subprocess.run(
        ["git", "push", "origin", "HEAD:refs/heads/feature"], cwd=fleet.work, env=env, capture_output=True, text=True
    )

    assert blocked.returncode != 0
    assert "promote check" in blocked.stdout + blocked.stderr
    assert "mini" in blocked.stdout + blocked.stderr
    assert fleet.refs() == before  # nothing was pushed
    # Its environment holds promote alone: checking needs neither MLX nor mlx-lm.
    installed = {p.name.split("-")[0].lower() for p in (tmp_path / "pre-commit-home").rglob("*.dist-info")}
    assert "promote_release" in installed
    assert not {"mlx", "mlx_lm", "transformers"} & installed
