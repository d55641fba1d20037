"""A fleet places a test whose `skipif` holds here, for what another station has, on that station (a real sshd on
loopback), as it places a `requires` marker; where no station has it, the skip is blocked as on one station."""

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

# Each station runs in a workdir of its own: the rig's skips hold everywhere but in a workdir named `at-rig`, as
# "Metal only" holds everywhere but on a Mac. The sshd station is this machine too, whose detected devices win
# over declared ones (stations.observed), so the station differs by a declared resource and a configured rule
# reads the skip reason; the built-in device rules place "Metal only" the same way (tests/runners/plugin).
SUITE = {
    "test_kernels.py": """
        import json, os
        import pytest

        def say(name):
            with open(os.environ["FLEET_WITNESS"], "a") as f:
                f.write(json.dumps({"test": name, "cwd": os.getcwd()}) + "\\n")

        NOT_THE_RIG = "at-rig" not in os.getcwd()

        @pytest.mark.parametrize("i", range(4))
        @pytest.mark.skipif(NOT_THE_RIG, reason="needs the lab rig")
        def test_on_the_rig(i):
            say(f"test_on_the_rig[{i}]")

        @pytest.mark.skipif("'at-rig' not in os.getcwd()", reason="needs the lab rig attached")
        def test_rig_by_string_condition():
            say("test_rig_by_string_condition")

        @pytest.mark.skipif(True, reason="Metal only")
        def test_metal_kernel():
            say("test_metal_kernel")

        @pytest.mark.skip(reason="not today")
        def test_skipped_everywhere():
            say("test_skipped_everywhere")

        @pytest.mark.parametrize("i", range(4))
        def test_anywhere(i):
            say(f"test_anywhere[{i}]")
    """,
}

RIG_TESTS = [f"test_on_the_rig[{i}]" for i in range(4)] + ["test_rig_by_string_condition"]
RULE = '[[promote.requirements.rules]]\npattern = "(?i)needs the lab rig"\nrequirement = "site:rig"\n\n'


@pytest.fixture
def station(tmp_path: Path) -> Iterator[sshd.Sshd]:
    yield from sshd_or_skip(tmp_path / "sshd")


def fleet(tmp_path: Path, server: sshd.Sshd, workdir: str, **declared: object) -> Path:
    env = {"FLEET_WITNESS": str(tmp_path / "witness.jsonl")}
    body = RULE + package("pkg", stations=["local", "rig"], workers=1, env=env)
    body += server.station_toml("rig", python=sys.executable, workdir=str(tmp_path / workdir), **declared)
    return workspace(tmp_path, {"pkg": SUITE}, body)


def witnessed(tmp_path: Path) -> dict[str, str]:
    path = tmp_path / "witness.jsonl"
    lines = path.read_text().splitlines() if path.is_file() else []
    return {s["test"]: s["cwd"] for s in map(json.loads, lines)}


def blockers(pkg: dict[str, Any]) -> dict[str, tuple[str, list[str], list[str]]]:
    return {b["test"].split("::", 1)[1]: (b["check"], b["requirements"], b["stations"]) for b in pkg["blockers"]}


def test_a_skip_that_holds_here_runs_on_the_station_that_has_what_it_names(tmp_path: Path, station: sshd.Sshd) -> None:
    repo = fleet(tmp_path, station, "at-rig", resources=["site:rig"], devices=["metal", "cpu"])

    code, report, stderr = promote_test(repo)

    pkg = of(report, "pkg")
    assert station_errors(report) == [], report["findings"]
    # Every rig test ran there and passed, none skipped here.
    assert (pkg["passed"], pkg["skipped"], pkg["blocked"], pkg["failed"]) == (9, 1, 1, 0), pkg
    assert code == 1, stderr  # the Metal test, below
    placed = pkg["placement"]
    assert {test: placed[f"test_kernels.py::{test}"] for test in RIG_TESTS} == dict.fromkeys(RIG_TESTS, "rig")
    # The tests' own witness: each ran in the station's workdir; what skips everywhere ran nowhere.
    seen = witnessed(tmp_path)
    assert not {"test_skipped_everywhere", "test_metal_kernel"} & set(seen)
    rig = (tmp_path / "at-rig" / "pkg").resolve()
    assert {t for t, cwd in seen.items() if Path(cwd).resolve() == rig} >= set(RIG_TESTS)
    # This machine's worker left them to the station at collection: not the luck of the queue.
    elsewhere = [p.read_text().splitlines() for p in Path(pkg["results"]).rglob("elsewhere-*.txt")]
    assert sorted(n.split("::", 1)[1] for n in max(elsewhere, key=len)) == sorted(RIG_TESTS)
    # The station was detected without Metal: what it declares does not place a Metal test there.
    assert blockers(pkg) == {"test_metal_kernel": ("impossible-requirement", ["device:metal"], [])}


def test_a_skip_no_station_can_lift_is_blocked_as_on_one_station(tmp_path: Path, station: sshd.Sshd) -> None:
    repo = fleet(tmp_path, station, "at-cpu")

    code, report, stderr = promote_test(repo)

    pkg = of(report, "pkg")
    assert station_errors(report) == [], report["findings"]
    assert (pkg["passed"], pkg["skipped"], pkg["blocked"]) == (4, 1, 6), pkg
    assert code == 1, stderr
    rig, metal = ("impossible-requirement", ["site:rig"], []), ("impossible-requirement", ["device:metal"], [])
    assert blockers(pkg) == {**dict.fromkeys(RIG_TESTS, rig), "test_metal_kernel": metal}
    assert not set(witnessed(tmp_path)) & {*RIG_TESTS, "test_metal_kernel"}
    # Nothing was left to another station: none has the rig.
    assert all(not p.read_text() for p in Path(pkg["results"]).rglob("elsewhere-*.txt"))
