"""A team's repository on mirrors named by URL, and the clone a CI system makes of it."""

from __future__ import annotations

from pathlib import Path

from tests.helpers.gitrepos import Fleet, commit, git, make_fleet
from tests.helpers.packages import write_package


def team_repository(tmp_path: Path) -> Fleet:
    """A team's repository on two mirrors, named by URL; a passing package, docs, and a deployed branch."""
    fleet = make_fleet(tmp_path, names=("origin", "mini"))
    write_package(fleet.work, "packages/proxy", {"tests/test_proxy.py": "def test_route():\n    assert True\n"})
    docs = tmp_path / "docs"
    docs.mkdir()
    git(docs, "init", "-q", "-b", "main")
    commit(docs, "docs", {"docs/index.md": "# Sanctum\n\nDFlash2 drafts tokens.\n"})
    (fleet.work / "promote.toml").write_text(
        '[promote]\ntrunk = "main"\ndeployed = "deployed"\n'
        "[promote.mirrors]\n"
        f'origin = "{fleet.mirrors["origin"]}"\n'
        # Relative to this file: resolved against the configuration's directory, not the working directory.
        'mini = "../mini.git"\n'
        '[[promote.packages]]\nname = "proxy"\npath = "packages/proxy"\n'
        f'[promote.docs]\nrepo = "{docs}"\nfeatures = ["DFlash2"]\n'
    )
    commit(fleet.work, "packages and config")
    for mirror in fleet.mirrors:
        git(fleet.work, "push", "-q", mirror, "main")
    git(fleet.work, "push", "-q", "origin", "main:deployed")
    return fleet


def ci_clone(fleet: Fleet) -> Path:
    """What actions/checkout leaves: a clone of origin only, HEAD detached, no local branch at all."""
    ci = fleet.root / "ci"
    git(fleet.root, "clone", "-q", "--no-checkout", str(fleet.mirrors["origin"]), str(ci))
    git(ci, "checkout", "-q", "--detach", "origin/main")
    git(ci, "branch", "-q", "-D", "main")
    assert git(ci, "remote") == "origin"
    assert git(ci, "for-each-ref", "--format=%(refname)", "refs/heads") == ""
    return ci
