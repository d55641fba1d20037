"""The Merged gate, end to end on the demo workspace: an audit, a real merge, and a second audit."""

from __future__ import annotations

from pathlib import Path

import pytest

from promote.demo import build as demo_build
from tests.helpers.cli import run_json
from tests.helpers.gitrepos import git

pytestmark = pytest.mark.slow


def test_after_a_merge_the_second_audit_says_from_what_to_what_on_which_mirrors(tmp_path: Path) -> None:
    pytest.importorskip("mlx_lm")
    example = demo_build.build(tmp_path / "demo")
    laptop = example.mirrors["laptop"]
    before = git(laptop, "rev-parse", "main")

    _, first = run_json(example.repo, "audit")
    lagging = " ".join(first["gates"]["merged"]["evidence"])
    assert first["gates"]["merged"]["status"] == "fail"
    assert "laptop lags 3 commits behind" in lagging and "`promote merge` is safe" in lagging

    code, merged = run_json(example.repo, "merge")
    assert (code, merged["verdict"]) == (0, "merged")
    candidate = merged["candidate"]
    assert git(laptop, "rev-parse", "main") == candidate

    _, second = run_json(example.repo, "audit")
    gate = second["gates"]["merged"]
    assert gate["status"] == "pass"
    assert gate["evidence"] == [
        f"main fast-forwarded `{before[:7]}` to `{candidate[:7]}` on laptop, no force",
        f"all 4 mirrors agree: main is `{candidate[:7]}` on origin, mini, station and laptop",
        "each was verified an ancestor of the candidate before it was pushed, so nothing was discarded",
    ]
