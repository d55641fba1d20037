"""`promote test` on a station over ssh, against a real sshd on loopback: the results come back as a local run's."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from promote import config
from promote.config import load_config
from promote.core.errors import ConfigError
from promote.evidence import gates
from promote.runners.remote.ssh import Target
from promote.runners.stations import local_platform
from promote.runners.suite import run_tests
from tests.helpers import sshd
from tests.helpers.gitrepos import git
from tests.helpers.remote import SUITE, of, outcomes, package, promote_test, sshd_or_skip, station_errors, workspace

pytestmark = pytest.mark.slow

COUNTS = ("passed", "failed", "errors", "skipped", "blocked", "crashed", "subtests")


@pytest.fixture
def server(tmp_path: Path) -> Iterator[sshd.Sshd]:
    yield from sshd_or_skip(tmp_path / "sshd")


def test_a_package_runs_on_the_station_and_comes_back_like_a_local_one(tmp_path: Path, server: sshd.Sshd) -> None:
    station = server.station_toml("training", python=sys.executable, workdir=str(tmp_path / "station"))
    body = package("here", workers=2) + package("there", "training", workers=2) + station
    repo = workspace(tmp_path, {"here": SUITE, "there": SUITE}, body)

    code, report, _ = promote_test(repo)

    assert code == 1
    here, there = of(report, "here"), of(report, "there")
    assert there["station"] == f"training (ssh {server.destination}:{server.port})"
    assert {k: there[k] for k in COUNTS} == {k: here[k] for k in COUNTS}
    assert (there["passed"], there["failed"], there["skipped"]) == (4, 2, 1)
    assert station_errors(report) == []
    assert outcomes(Path(there["results"])) == outcomes(Path(here["results"]))
    # One pytest session here, its two workers there: every test placed on the station, its records back here.
    assert set(there["placement"].values()) == {"training"} and len(there["placement"]) == 7
    assert (Path(there["results"]) / "junit.xml").is_file()
    assert (Path(there["results"]) / "parallel" / "pytest.log").is_file()
    assert len(list((Path(there["results"]) / "parallel").glob("progress-gw*.jsonl"))) == 2
    spec = json.loads((Path(there["results"]) / "fleet-spec.json").read_text())
    detected = spec["stations"]["training"]
    assert detected["name"] == "training" and detected["detected"] is True
    # The run lists the station as it was found there, with the way to reach it kept.
    [listed] = [s for s in report["stations"]["stations"] if s["name"] == "training"]
    assert listed == {**detected, "local": False, "ssh": server.destination}
    # The candidate reached the station by a push to a ref of its own, and is what ran there.
    sha = git(repo, "rev-parse", "HEAD")
    work = tmp_path / "station"
    assert git(work, "for-each-ref", "--format=%(refname)") == f"refs/promote/candidates/{sha}"
    assert git(work, "rev-parse", "HEAD") == sha
    assert not (work / ".promote-out" / report["run"]).exists()


def test_rsync_sync_runs_the_working_tree_as_it_is(tmp_path: Path, server: sshd.Sshd) -> None:
    if shutil.which("rsync") is None:
        if os.environ.get("PROMOTE_REQUIRE_SSHD"):
            pytest.fail("PROMOTE_REQUIRE_SSHD is set but rsync is not installed")
        pytest.skip("rsync is not installed")
    work = tmp_path / "station"
    station = server.station_toml("training", python=sys.executable, workdir=str(work), sync="rsync")
    repo = workspace(tmp_path, {"there": SUITE}, package("there", "training") + station)
    # Not committed: with rsync, the tree as it is goes to the station (git would send HEAD).
    (repo / "there" / "test_suite.py").write_text("def test_only_this():\n    pass\n")
    (repo / "there" / "scratch.log").write_text("ignored\n")
    (repo / ".gitignore").write_text("*.log\n")

    code, report, _ = promote_test(repo)

    assert code == 0, report["findings"]
    assert of(report, "there")["passed"] == 1
    assert outcomes(Path(of(report, "there")["results"])) == {"test_suite.py::test_only_this": "passed"}
    assert not (work / "there" / "scratch.log").exists()
    assert not (work / ".git").exists() and not (work / ".promote").exists()


def test_a_test_past_its_timeout_there_is_killed_there(tmp_path: Path, server: sshd.Sshd) -> None:
    files = {"test_hang.py": "import time\n\ndef test_hangs():\n    time.sleep(300)\n\ndef test_next():\n    pass\n"}
    station = server.station_toml("training", python=sys.executable, workdir=str(tmp_path / "station"))
    repo = workspace(tmp_path, {"there": files}, package("there", "training", timeout_s=3) + station)

    code, report, _ = promote_test(repo)

    assert code == 1
    pkg = of(report, "there")
    assert (pkg["passed"], pkg["failed"], pkg["crashed"]) == (1, 1, 0)
    assert [(f["check"], f["subject"]) for f in report["findings"]] == [("timeout", "test_hang.py::test_hangs")]


def test_requirements_are_judged_on_the_station_the_tests_ran_on(tmp_path: Path, server: sshd.Sshd) -> None:
    files = {
        "test_needs.py": """
            import pytest

            @pytest.mark.requires("checkpoint:big")
            def test_needs_big():
                pass

            @pytest.mark.requires("checkpoint:small")
            def test_needs_small():
                pass
        """
    }
    extra = {"python": sys.executable, "workdir": str(tmp_path / "station"), "resources": ["checkpoint:big"]}
    # This machine is the laptop (same platform, no ssh); only it has the small checkpoint.
    laptop = f'[promote.stations.laptop]\nplatform = "{local_platform()}"\nresources = ["checkpoint:small"]\n\n'
    body = package("here") + package("there", "training") + laptop + server.station_toml("training", **extra)
    repo = workspace(tmp_path, {"here": files, "there": files}, body)

    _, report, _ = promote_test(repo)

    assert (of(report, "there")["passed"], of(report, "there")["blocked"]) == (1, 1)
    assert (of(report, "here")["passed"], of(report, "here")["blocked"]) == (1, 1)
    bound = sorted(f["message"] for f in report["findings"] if f["check"] == "station-bound")
    assert bound == [
        "needs checkpoint:big, which only training has; it did not run here on laptop",
        "needs checkpoint:small, which only laptop has; it did not run here on training",
    ]


def test_station_ssh_keys_load_and_become_one_ssh_command(tmp_path: Path) -> None:
    (tmp_path / "promote.toml").write_text(
        '[promote]\ntrunk = "main"\n[promote.stations.training]\nssh = "bert@training.local"\nport = 2222\n'
        'identity = "keys/id"\nssh_options = ["-o", "StrictHostKeyChecking=accept-new"]\nsync = "rsync"\n'
    )
    [sc] = config.load(tmp_path / "promote.toml").stations
    assert (sc.sync, sc.identity) == ("rsync", str(tmp_path / "keys" / "id"))
    target = Target.from_config(sc)
    assert target.label == "training (ssh bert@training.local:2222)"
    assert target.argv("echo 'hi there'") == [
        "ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=15", "-o", "ServerAliveInterval=10",
        "-o", "ServerAliveCountMax=3", "-p", "2222", "-i", str(tmp_path / "keys" / "id"), "-o", "IdentitiesOnly=yes",
        "-o", "StrictHostKeyChecking=accept-new",
        # One connection per station, shared by promote's ssh calls, in a directory only this user can use.
        "-o", "ControlMaster=auto", "-o", f"ControlPath={tempfile.gettempdir()}/promote-ssh-{os.getuid()}/%C",
        "-o", "ControlPersist=60", "--", "bert@training.local", "sh -c 'echo '\"'\"'hi there'\"'\"''",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ('sync = "scp"', 'promote.stations.training.sync: expected "git" or "rsync", got \'scp\''),
        ('ssh = "-oProxyCommand=x"', "promote.stations.training.ssh: expected user@host (no spaces, no leading -)"),
        ('ssh_options = "-v"', "promote.stations.training.ssh_options: expected a list of ssh arguments"),
    ],
)
def test_bad_station_ssh_keys_name_the_key(tmp_path: Path, line: str, expected: str) -> None:
    (tmp_path / "promote.toml").write_text(f'[promote]\ntrunk = "main"\n[promote.stations.training]\n{line}\n')
    with pytest.raises(ConfigError, match=expected.replace("(", r"\(").replace(")", r"\)")):
        config.load(tmp_path / "promote.toml")


def test_the_tested_gate_says_a_station_package_ran_on_its_workers(tmp_path: Path, server: sshd.Sshd) -> None:
    station = server.station_toml("training", python=sys.executable, workdir=str(tmp_path / "station"))
    repo = workspace(tmp_path, {"there": SUITE}, package("there", "training", workers=2) + station)

    run = run_tests(load_config(repo, None))

    # The command that ran there is ssh's, with no `-n`: the workers come from the runner, not that line.
    [there] = run.packages
    assert there.workers == 2
    assert f"there ran on {there.station}, on 2 workers" in "\n".join(gates.tested(run, None, None).evidence)


def test_ssh_connections_are_shared_only_through_a_directory_private_to_this_user(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from promote.runners.remote.ssh import multiplexing

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    mine = tmp_path / f"promote-ssh-{os.getuid()}"
    assert multiplexing()[3] == f"ControlPath={mine}/%C" and oct(mine.stat().st_mode & 0o777) == "0o700"
    mine.chmod(0o777)  # another user could put a socket of theirs here
    assert multiplexing() == []
    mine.rmdir()
    mine.symlink_to(tmp_path)  # or point it elsewhere
    assert multiplexing() == []


SERIAL = {
    "test_serial.py": """
        import json, os, time
        import pytest

        def say(name):
            start = time.time()
            time.sleep(0.3)
            with open(os.environ["WITNESS"], "a") as f:
                f.write(json.dumps([name, start, time.time(), os.environ["PYTEST_XDIST_WORKER"]]) + "\\n")

        @pytest.mark.parametrize("i", range(6))
        def test_parallel(i):
            say(f"parallel-{i}")

        def test_alone_by_pattern():
            say("pattern")

        @pytest.mark.serial
        def test_alone_by_marker():
            say("marker")
    """,
    "conftest.py": "def pytest_configure(config):\n    config.addinivalue_line('markers', 'serial: alone')\n",
}


def test_serial_tests_run_alone_on_the_station_after_the_others(tmp_path: Path, server: sshd.Sshd) -> None:
    witness = tmp_path / "witness.jsonl"
    station = server.station_toml("training", python=sys.executable, workdir=str(tmp_path / "station"))
    keys = {"workers": 2, "serial": ["*alone_by_pattern"], "env": {"WITNESS": str(witness)}}
    repo = workspace(tmp_path, {"there": SERIAL}, package("there", "training", **keys) + station)

    code, report, stderr = promote_test(repo)

    assert code == 0, stderr
    there = of(report, "there")
    assert (there["passed"], there["failed"], there["crashed"]) == (8, 0, 0)
    assert set(there["placement"].values()) == {"training"} and len(there["placement"]) == 8
    spans = {name: (start, end) for name, start, end, _ in map(json.loads, witness.read_text().splitlines())}
    assert len(spans) == 8
    # Each serial test ran while no other test ran: after every parallel one, and not beside the other.
    for alone in ("pattern", "marker"):
        start, end = spans[alone]
        assert all(e <= start or s >= end for name, (s, e) in spans.items() if name != alone), spans
    assert max(e for name, (_, e) in spans.items() if name.startswith("parallel")) <= min(
        spans["pattern"][0], spans["marker"][0]
    )
    # Two sessions: the one on both workers, then the one for the serial tests.
    assert sorted(p.name for p in Path(there["results"]).iterdir() if p.is_dir()) == ["parallel", "serial"]
