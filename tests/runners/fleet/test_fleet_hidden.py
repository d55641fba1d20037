"""Under `leaks = "restore"` over a fleet: what the restores hid is measured on the station each worker ran on."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from promote import config
from promote.core.policies import RESTORE
from promote.runners.causes import hidden
from promote.runners.causes.budget import Budget
from promote.runners.plugin.records import LeakRecord
from promote.runners.summary import PackageResult
from tests.helpers import sshd
from tests.helpers.remote import of, package, promote_test, workspace

# Every test pinned to a station, one worker each: each station's order is its collection order.
LEAKY = {
    "test_leaky.py": """
        import json, os
        import pytest

        MINI = pytest.mark.requires("site:mini")
        TRAINING = pytest.mark.requires("site:training")

        def say(name):
            with open(os.environ["FLEET_WITNESS"], "a") as f:
                f.write(json.dumps({"test": name, "cwd": os.getcwd(), "flag": os.environ.get("LEAKY_FLAG")}) + "\\n")

        @MINI
        def test_a_sets_the_flag():
            say("test_a_sets_the_flag")
            os.environ["LEAKY_FLAG"] = "1"

        @MINI
        def test_b_plain():
            say("test_b_plain")

        @MINI
        def test_c_wants_it_unset():
            say("test_c_wants_it_unset")
            assert "LEAKY_FLAG" not in os.environ

        @TRAINING
        def test_d_sets_another():
            say("test_d_sets_another")
            os.environ["OTHER_FLAG"] = "1"

        @TRAINING
        def test_e_does_not_care():
            say("test_e_does_not_care")
    """,
}
VICTIM, POLLUTER = "test_leaky.py::test_c_wants_it_unset", "test_leaky.py::test_a_sets_the_flag"


def witnessed(tmp_path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (tmp_path / "witness.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_what_the_restores_hid_on_a_station_is_found_there_and_its_polluter_named(
    tmp_path: Path, mini: sshd.Sshd, training: sshd.Sshd
) -> None:
    witness = tmp_path / "witness.jsonl"
    body = package("pkg", stations=["mini", "training"], leaks='"restore"', env={"FLEET_WITNESS": str(witness)})
    for name, station in (("mini", mini), ("training", training)):
        at = str(tmp_path / f"at-{name}")
        body += station.station_toml(name, python=sys.executable, workdir=at, workers=1, resources=[f"site:{name}"])
    repo = workspace(tmp_path, {"pkg": LEAKY}, body)

    code, report, stderr = promote_test(repo)

    pkg = of(report, "pkg")
    # The run itself passed everything: the restores kept test_c from seeing the flag.
    assert (pkg["passed"], pkg["failed"]) == (5, 0), (pkg, stderr)
    assert pkg["pass_only_restored"] == [VICTIM], report["findings"]
    [od] = [f for f in report["findings"] if f["check"] == "order-dependent"]
    assert (od["subject"], od["cause"]) == (VICTIM, POLLUTER)
    assert od["message"].startswith("passes only because promote restored state: fails after " + POLLUTER)
    assert not [f for f in report["findings"] if f["check"] == "rerun-undecided"]
    [verdict] = [v for v in pkg["reruns"] if v["test"] == VICTIM]
    assert (verdict["verdict"], verdict["polluters"], verdict["station"]) == ("order-dependent", [POLLUTER], "mini")
    assert code == 1, stderr
    # Each station's worker restored a leak before a later test: one pass on each, in a directory per station.
    unrestored = Path(pkg["results"]) / "unrestored"
    assert sorted(p.name for p in unrestored.iterdir()) == ["mini", "training"]
    assert [p.name for p in (unrestored / "mini").iterdir() if p.name.startswith("pass-")] != []
    # The tests' own witness: test_c saw the flag only without restores, and every run of it was at mini.
    at_mini = (tmp_path / "at-mini" / "pkg").resolve()
    runs = [s for s in witnessed(tmp_path) if s["test"] == "test_c_wants_it_unset"]
    assert {s["flag"] for s in runs} == {None, "1"}, runs
    assert all(Path(s["cwd"]).resolve() == at_mini for s in runs), runs


FLAT = {"test_flat.py": "def test_a():\n    pass\n\ndef test_b():\n    pass\n"}


def progress(out_dir: Path, worker: str, tests: list[str]) -> None:
    """A worker's progress log as the fleet's controller writes it: its session, then each test it started."""
    lines = [{"event": "session", "worker": worker, "t": 0.0}]
    lines += [{"event": "start", "worker": worker, "t": 1.0, "nodeid": t} for t in tests]
    (out_dir / "all").mkdir(parents=True, exist_ok=True)
    (out_dir / "all" / f"progress-{worker}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))


def test_a_pass_whose_station_left_or_is_unknown_is_undecided_never_skipped(tmp_path: Path) -> None:
    repo = workspace(tmp_path, {"pkg": FLAT}, package("pkg", stations=["local"], leaks='"restore"'))
    [pkg] = config.load(repo / "promote.toml").packages
    assert pkg.leaks == RESTORE
    out = tmp_path / "run" / "pkg"
    progress(out, "gw0", ["t::a", "t::b"])
    progress(out, "gw1", ["t::c", "t::d"])
    spec = {"tx": {"local": "popen"}, "stations": {"local": {"name": "local"}}, "scratch": {"local": str(tmp_path)}}
    (out / "fleet-spec.json").write_text(json.dumps(spec))
    leaks = tuple(LeakRecord(t, (("os.environ[X]", "<unset>", "'1'"),), ("environ",)) for t in ("t::a", "t::c"))
    # gw0 ran on mini, which dropped out; gw1 on a station the fleet's description does not name.
    placed = (("t::a", "mini"), ("t::b", "mini"), ("t::c", "gone"), ("t::d", "gone"))
    result = PackageResult(
        "pkg", repo / "pkg", "fleet", 0, 1.0, (), (), (), out, leaks=leaks, placed=placed, stations_down=("mini",)
    )

    measured = hidden.measure(pkg, result, Budget(10))

    said = sorted(f.message for f in measured.findings if f.check == "rerun-undecided")
    assert said == [
        "the pass without restores did not run: its worker ran on mini, which stopped answering: "
        "it cannot be rerun there",
        "the pass without restores did not run: the station its worker ran on is not known (gone)",
    ]
    assert measured.hidden == () and not (out / "unrestored").exists()
