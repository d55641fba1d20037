"""On a station, a package runs as its CI runs it too: the same differential as a local run, over a real sshd."""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import sshd
from tests.helpers.cli import run_json
from tests.helpers.gitrepos import commit
from tests.helpers.remote import sshd_or_skip
from tests.runners.test_own_configuration import OPTIONS, Layout, build, first_pass, plain_pytest

pytestmark = pytest.mark.slow


@pytest.fixture
def server(tmp_path: Path) -> Iterator[sshd.Sshd]:
    yield from sshd_or_skip(tmp_path / "sshd")


@pytest.mark.parametrize("workers", [1, 2])
def test_a_package_below_the_root_runs_on_a_station_under_its_own_configuration(
    tmp_path: Path, server: sshd.Sshd, workers: int
) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    # filterwarnings = error, -m 'not slow', testpaths, python_files: each changes what plain pytest reports.
    pkg = build(root, Layout("station", options=dict(OPTIONS), workers=workers))
    config = (
        (root / "promote.toml")
        .read_text()
        .replace('path = "packages/engine"', 'path = "packages/engine"\nstation = "training"')
    )
    config += "\n" + server.station_toml("training", python=sys.executable, workdir=str(tmp_path / "station"))
    commit(root, "run it on the station", {"promote.toml": config})
    plain = plain_pytest(pkg, tmp_path)

    code, data = run_json(root, "test")

    (package,) = data["packages"]
    assert package["station"].startswith("training (ssh ")
    ours = first_pass(Path(package["results"]))
    assert ours == plain["tests"]
    assert "failed" in ours.values()  # the DeprecationWarning is an error there, as in the package's CI
    counts = Counter(ours.values())
    assert (package["passed"], package["failed"]) == (counts["passed"], counts["failed"])
    assert (code != 0) == (plain["status"] != 0)
    assert package["inifile"] == "packages/engine/pyproject.toml"
    assert package["rootdir"] == "packages/engine"
