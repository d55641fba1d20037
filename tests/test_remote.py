"""`promote test` on a station over ssh, against a real sshd on loopback: results, and every kind of fault."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import venv
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from promote.stations import local_platform
from tests.helpers import sshd
from tests.helpers.gitrepos import commit, git
from tests.helpers.packages import write_package

pytestmark = pytest.mark.slow

SUITE = {
    "test_suite.py": """
        import pytest

        def test_passes():
            pass

        def test_fails():
            assert 1 == 2

        @pytest.mark.skip(reason="not today")
        def test_skipped():
            pass

        @pytest.mark.parametrize("n", range(4))
        def test_param(n):
            assert n != 3
    """,
}

# The middle test tells the harness it is running (and its pid), then waits to be cut off.
SLEEPER = {
    "test_slow.py": """
        import os
        import time
        from pathlib import Path

        def test_a_before():
            pass

        def test_b_sleeps():
            Path(os.environ["PROMOTE_TEST_MARKER"]).write_text(str(os.getpid()))
            time.sleep(120)

        def test_c_after():
            pass
    """,
}


@pytest.fixture
def server(tmp_path: Path) -> Iterator[sshd.Sshd]:
    try:
        running = sshd.start(tmp_path / "sshd")
    except sshd.SshdUnavailable as e:
        if os.environ.get("PROMOTE_REQUIRE_SSHD"):
            pytest.fail(f"PROMOTE_REQUIRE_SSHD is set but {e}")
        pytest.skip(f"no sshd to test remote stations against: {e}")
    yield running
    sshd.stop(running)


def workspace(tmp_path: Path, packages: dict[str, dict[str, str]], body: str) -> Path:
    """A git repository holding the packages and a promote.toml, all committed (the candidate is HEAD)."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    for name, files in packages.items():
        write_package(repo, name, files)
    (repo / "promote.toml").write_text('[promote]\ntrunk = "main"\n\n' + body)
    commit(repo, "candidate", {})
    return repo


def package(name: str, station: str | None = None, **keys: object) -> str:
    lines = ["[[promote.packages]]", f'name = "{name}"', f'path = "{name}"']
    lines += [f'station = "{station}"'] if station else []
    for key, value in keys.items():
        if isinstance(value, dict):
            value = "{ " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in value.items()) + " }"
        lines.append(f"{key} = {value if isinstance(value, str) else json.dumps(value)}")
    return "\n".join(lines) + "\n\n"


def promote_test(repo: Path) -> tuple[int, dict[str, Any], str]:
    """`promote test --json` in a child process, as a user (or cron) would run it."""
    cmd = [sys.executable, "-m", "promote", "-C", str(repo), "test", "--json"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    return done.returncode, json.loads(done.stdout), done.stderr


def of(report: dict[str, Any], name: str) -> dict[str, Any]:
    return next(p for p in report["packages"] if p["name"] == name)


def station_errors(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [f for f in report["findings"] if f["check"] == "station-error"]


def outcomes(result_dir: Path) -> dict[str, str]:
    found: dict[str, str] = {}
    for path in result_dir.rglob("results-*.json"):
        found.update({t["nodeid"]: t["outcome"] for t in json.loads(path.read_text())["tests"]})
    return found


COUNTS = ("passed", "failed", "errors", "skipped", "blocked", "crashed", "subtests")


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
    # Stored exactly as a local run's: the same files per part, read by the same summary.
    for part in ("parallel", "serial"):
        assert (Path(there["results"]) / part / "junit.xml").is_file()
        assert (Path(there["results"]) / part / "pytest.log").is_file()
    detected = json.loads((Path(there["results"]) / "station.json").read_text())
    assert detected["name"] == "training" and detected["detected"] is True and detected["local"] is False
    # The candidate reached the station by a push to a ref of its own, and is what ran there.
    sha = git(repo, "rev-parse", "HEAD")
    work = tmp_path / "station"
    assert git(work, "for-each-ref", "--format=%(refname)") == f"refs/promote/candidates/{sha}"
    assert git(work, "rev-parse", "HEAD") == sha
    assert not (work / ".promote-out" / report["run"]).exists()


def test_unreachable_station_is_an_error_and_the_other_packages_still_count(tmp_path: Path, server: sshd.Sshd) -> None:
    closed = sshd.free_port()
    station = server.station_toml("training", port=closed, python=sys.executable, workdir=str(tmp_path / "station"))
    body = package("here") + package("there", "training") + station
    repo = workspace(tmp_path, {"here": SUITE, "there": SUITE}, body)

    code, report, _ = promote_test(repo)

    assert code == 1
    assert [of(report, "there")[k] for k in COUNTS[:-1]] == [0] * 6
    assert of(report, "here")["passed"] == 4
    [error] = station_errors(report)
    assert error["severity"] == "error" and error["subject"] == "training"
    assert error["message"] == (
        f"station training (ssh {server.destination}:{closed}): cannot connect to {server.destination} "
        f"(ssh: connect to host 127.0.0.1 port {closed}: Connection refused)"
    )


def test_a_key_the_station_does_not_know_is_refused(tmp_path: Path, server: sshd.Sshd) -> None:
    stranger = str(server.root / "stranger_key")
    station = server.station_toml("training", identity=stranger, python=sys.executable, workdir=str(tmp_path / "st"))
    repo = workspace(tmp_path, {"there": SUITE}, package("there", "training") + station)

    code, report, _ = promote_test(repo)

    assert code == 1
    assert of(report, "there")["passed"] == 0
    [error] = station_errors(report)
    assert "authentication refused" in error["message"]
    assert "Permission denied (publickey)" in error["message"]


def test_a_station_python_without_pytest_is_named(tmp_path: Path, server: sshd.Sshd) -> None:
    bare = tmp_path / "bare-venv"
    venv.create(bare, with_pip=False)
    station = server.station_toml("training", python=str(bare / "bin" / "python"), workdir=str(tmp_path / "station"))
    repo = workspace(tmp_path, {"there": SUITE}, package("there", "training") + station)

    code, report, _ = promote_test(repo)

    assert code == 1
    assert of(report, "there")["passed"] == 0
    [error] = station_errors(report)
    assert "cannot import pytest and pytest-xdist" in error["message"]
    assert "No module named 'pytest'" in error["message"]


@pytest.mark.parametrize("cut", ["connection", "pytest"])
def test_a_run_cut_off_midway_counts_only_what_finished(tmp_path: Path, server: sshd.Sshd, cut: str) -> None:
    marker = tmp_path / "sleeping"
    station = server.station_toml("training", python=sys.executable, workdir=str(tmp_path / "station"))
    body = package("there", "training", env={"PROMOTE_TEST_MARKER": str(marker)}) + station
    repo = workspace(tmp_path, {"there": SLEEPER}, body)
    cmd = [sys.executable, "-m", "promote", "-C", str(repo), "test", "--json"]
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        deadline = time.monotonic() + 120
        while not marker.exists():
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.1)
        pid = int(marker.read_text())
        if cut == "connection":
            assert server.drop_sessions() > 0
        else:
            os.killpg(os.getpgid(pid), 9)
        out, _ = proc.communicate(timeout=120)

    report = json.loads(out)
    assert proc.returncode == 1
    pkg = of(report, "there")
    assert (pkg["passed"], pkg["failed"], pkg["crashed"]) == (1, 0, 1)
    [error] = station_errors(report)
    assert error["subject"] == "training"
    assert "1 test(s) were running and count as crashed: test_slow.py::test_b_sleeps" in error["message"]
    assert "1 of 3 collected tests never ran" in error["message"]
    if cut == "connection":
        assert "the connection was lost" in error["message"]
    # Nothing is left running there: the dropped run's processes were ended.
    assert not alive(pid)


def alive(pid: int) -> bool:
    """Whether `pid` is running (a zombie nobody reaped has ended)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in status


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
    bound = sorted((f["subject"], f["message"]) for f in report["findings"] if f["check"] == "station-bound")
    print(json.dumps(bound, indent=1))
    assert len(bound) == 2
    # Each blocked test names the other station as the one that can run it.
    assert "laptop" in bound[0][1] or "laptop" in bound[1][1]
    assert "training" in bound[0][1] or "training" in bound[1][1]
