"""A package over a fleet (here and two stations, each a real sshd on loopback): one pytest session, each test
placed where its requirements are met, records back in xdist's channel."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import sshd
from tests.helpers.remote import of, package, promote_test, sshd_or_skip, station_errors, workspace

pytestmark = pytest.mark.slow

SUITE = {
    "test_fleet.py": """
        import json, os, time
        import pytest

        def say(name):
            with open(os.environ["FLEET_WITNESS"], "a") as f:
                f.write(json.dumps({"test": name, "cwd": os.getcwd(), "worker": os.environ["PYTEST_XDIST_WORKER"]}) + "\\n")

        @pytest.mark.parametrize("i", range(8))
        def test_anywhere(i):
            time.sleep(0.2)
            say(f"test_anywhere[{i}]")

        @pytest.mark.requires("checkpoint:big")
        def test_needs_the_checkpoint():
            say("test_needs_the_checkpoint")

        @pytest.mark.requires("checkpoint:huge")
        def test_nothing_has_it():
            say("test_nothing_has_it")

        def test_fails():
            say("test_fails")
            assert 1 == 2
    """,
}


@pytest.fixture
def mini(tmp_path: Path) -> Iterator[sshd.Sshd]:
    yield from sshd_or_skip(tmp_path / "sshd-mini")


@pytest.fixture
def training(tmp_path: Path) -> Iterator[sshd.Sshd]:
    yield from sshd_or_skip(tmp_path / "sshd-training")


def fleet_repo(tmp_path: Path, mini: sshd.Sshd, training: sshd.Sshd, suite: dict[str, str], **keys: object) -> Path:
    witness = tmp_path / "witness.jsonl"
    body = package("pkg", stations=["local", "mini", "training"], workers=1, env={"FLEET_WITNESS": str(witness)}, **keys)
    body += mini.station_toml("mini", python=sys.executable, workdir=str(tmp_path / "at-mini"), workers=2)
    body += training.station_toml(
        "training", python=sys.executable, workdir=str(tmp_path / "at-training"), resources=["checkpoint:big"]
    )
    return workspace(tmp_path, {"pkg": suite}, body)


def witnessed(tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / "witness.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []


def test_each_test_runs_where_its_requirements_are_met_in_one_session(
    tmp_path: Path, mini: sshd.Sshd, training: sshd.Sshd
) -> None:
    repo = fleet_repo(tmp_path, mini, training, SUITE)

    code, report, stderr = promote_test(repo)

    pkg = of(report, "pkg")
    assert code == 1, stderr
    assert (pkg["passed"], pkg["failed"], pkg["blocked"]) == (9, 1, 1), pkg
    assert station_errors(report) == []
    placed = pkg["placement"]
    assert placed["test_fleet.py::test_needs_the_checkpoint"] == "training"
    # Everything else went wherever a worker was free: the fleet's three stations all took some.
    anywhere = {placed[f"test_fleet.py::test_anywhere[{i}]"] for i in range(8)}
    assert anywhere == {"local", "mini", "training"}
    # The tests' own witness agrees: each ran in the directory of the station promote says it ran on.
    where = {"local": repo / "pkg", "mini": tmp_path / "at-mini" / "pkg", "training": tmp_path / "at-training" / "pkg"}
    seen = witnessed(tmp_path)
    assert sorted(s["test"] for s in seen) == sorted(
        [f"test_anywhere[{i}]" for i in range(8)] + ["test_needs_the_checkpoint", "test_fails"]
    )
    for s in seen:
        assert Path(s["cwd"]).resolve() == where[placed[f"test_fleet.py::{s['test']}"]].resolve(), s
    # The test no station can run ran nowhere, and says what it needs.
    blocked = [f for f in report["findings"] if f["check"] == "impossible-requirement"]
    assert len(blocked) == 1 and "checkpoint:huge" in blocked[0]["message"]
