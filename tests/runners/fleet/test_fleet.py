"""A package over a fleet (here and two stations, each a real sshd on loopback): one pytest session, each test
placed where its requirements are met, records back in xdist's channel."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import sshd
from tests.helpers.remote import of, package, promote_test, station_errors, workspace

pytestmark = pytest.mark.slow

SUITE = {
    "test_fleet.py": """
        import json, os, time
        import pytest

        def say(name):
            with open(os.environ["FLEET_WITNESS"], "a") as f:
                seen = {"test": name, "cwd": os.getcwd(), "worker": os.environ["PYTEST_XDIST_WORKER"]}
                f.write(json.dumps(seen) + "\\n")

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


def fleet_repo(tmp_path: Path, mini: sshd.Sshd, training: sshd.Sshd, suite: dict[str, str], **keys: object) -> Path:
    witness = tmp_path / "witness.jsonl"
    body = package(
        "pkg", stations=["local", "mini", "training"], workers=1, env={"FLEET_WITNESS": str(witness)}, **keys
    )
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
    # test_fails ran again after the run: alone on its station, then alone on another.
    first = {s["test"]: s for s in reversed(seen)}
    assert sorted(s["test"] for s in seen if s["test"] != "test_fails") == sorted(
        [f"test_anywhere[{i}]" for i in range(8)] + ["test_needs_the_checkpoint"]
    )
    for test, s in first.items():
        assert Path(s["cwd"]).resolve() == where[placed[f"test_fleet.py::{test}"]].resolve(), s
    # The test no station can run ran nowhere, and says what it needs.
    blocked = [f for f in report["findings"] if f["check"] == "impossible-requirement"]
    assert len(blocked) == 1 and "checkpoint:huge" in blocked[0]["message"]


SLOW = {
    "test_slow.py": """
        import json, os, time
        import pytest

        @pytest.mark.parametrize("i", range(30))
        def test_slow(i):
            time.sleep(0.3)
            with open(os.environ["FLEET_WITNESS"], "a") as f:
                f.write(json.dumps({"test": f"test_slow[{i}]", "cwd": os.getcwd()}) + "\\n")

        @pytest.mark.requires("dataset:only-on-mini")
        def test_only_mini_can():
            pass
    """,
}


def test_a_station_that_drops_mid_run_crashes_what_ran_there_and_its_queue_runs_elsewhere(
    tmp_path: Path, mini: sshd.Sshd, training: sshd.Sshd
) -> None:
    witness = tmp_path / "witness.jsonl"
    body = package("pkg", stations=["mini", "training"], env={"FLEET_WITNESS": str(witness)})
    body += mini.station_toml(
        "mini", python=sys.executable, workdir=str(tmp_path / "at-mini"), workers=2, resources=["dataset:only-on-mini"]
    )
    body += training.station_toml("training", python=sys.executable, workdir=str(tmp_path / "at-training"), workers=2)
    repo = workspace(tmp_path, {"pkg": SLOW}, body)
    cmd = [sys.executable, "-m", "promote", "-C", str(repo), "test", "--json"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    at_mini = str((tmp_path / "at-mini").resolve())
    deadline = time.monotonic() + 120
    while not any(s["cwd"].startswith(at_mini) for s in witnessed(tmp_path)):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    sshd.stop(mini)  # the listener and every session: the station is gone
    out, err = proc.communicate(timeout=300)
    report = json.loads(out)

    pkg = of(report, "pkg")
    placed = pkg["placement"]
    # Nothing counted twice, nothing lost: every slow test passed once, or crashed on mini as it dropped.
    assert pkg["passed"] + pkg["crashed"] == 30, pkg
    crashes = [f for f in report["findings"] if f["check"] == "worker-crash"]
    crashed = [f["subject"] for f in crashes]
    assert 1 <= len(crashed) <= 2 and all(placed[t] == "mini" for t in crashed), crashed
    # Not "a segfault" nor "ran in a replacement worker": its station went away.
    assert all("on station mini (ssh" in f["message"] and "stopped answering" in f["message"] for f in crashes)
    # A test mini finished just as it dropped, before its report left, counts as crashed there: each test is counted
    # once, as the controller saw it (at least once in the tests' own witness).
    assert len({s["test"] for s in witnessed(tmp_path)}) >= pkg["passed"]
    # The queue went on at training after mini dropped.
    assert sum(1 for s in placed.values() if s == "training") >= 20
    [error] = [f for f in station_errors(report) if "stopped answering once the run began" in f["message"]]
    assert error["subject"] == "mini" and "crashed there" in error["message"], error
    [never] = [f for f in station_errors(report) if "never ran" in f["message"]]
    assert "test_only_mini_can" in never["message"]
    # What crashed on mini is not rerun here and called anything: mini is gone, the verdict says so.
    undecided = {f["subject"]: f["message"] for f in report["findings"] if f["check"] == "rerun-undecided"}
    assert set(undecided) == set(crashed) and all("stopped answering" in m for m in undecided.values())
    assert proc.returncode == 1, err


MLX = {
    "test_mlx.py": """
        import threading
        import mlx.core as mx
        import pytest

        SITES = [pytest.param(s, marks=pytest.mark.requires(f"site:{s}")) for s in ("mini", "training")]

        @pytest.mark.parametrize("site", SITES)
        def test_computes_on_the_main_thread(site):
            assert threading.current_thread() is threading.main_thread()
            assert mx.sum(mx.arange(4)).item() == 6

        @pytest.mark.requires("site:mini")
        def test_seeds_the_global_generator_on_mini():
            mx.random.seed(3)

        @pytest.mark.requires("site:training")
        def test_seeds_the_global_generator_on_training():
            mx.random.seed(4)
    """,
}


def test_mlx_runs_in_each_stations_workers_with_its_leak_probes(
    tmp_path: Path, mini: sshd.Sshd, training: sshd.Sshd
) -> None:
    pytest.importorskip("mlx.core")
    body = package("pkg", stations=["mini", "training"])
    body += mini.station_toml("mini", python=sys.executable, workdir=str(tmp_path / "at-mini"), resources=["site:mini"])
    body += training.station_toml(
        "training", python=sys.executable, workdir=str(tmp_path / "at-training"), resources=["site:training"]
    )
    repo = workspace(tmp_path, {"pkg": MLX}, body)

    code, report, stderr = promote_test(repo)

    pkg = of(report, "pkg")
    assert code == 0, (stderr, report["findings"])  # a leak no failure follows is a warning
    assert (pkg["passed"], pkg["failed"], pkg["blocked"]) == (4, 0, 0), pkg
    assert {test: station for test, station in pkg["placement"].items()} == {
        "test_mlx.py::test_computes_on_the_main_thread[mini]": "mini",
        "test_mlx.py::test_computes_on_the_main_thread[training]": "training",
        "test_mlx.py::test_seeds_the_global_generator_on_mini": "mini",
        "test_mlx.py::test_seeds_the_global_generator_on_training": "training",
    }
    # Each station's worker probed MLX's state and named its own test for the seed it changed.
    [leak] = [f for f in report["findings"] if f["check"] == "leaked-state"]
    assert "mx.random.seed" in leak["message"]
    for station in ("mini", "training"):
        assert f"test_seeds_the_global_generator_on_{station}" in leak["message"], leak
    # The workers there recorded with MLX imported (its version is in each worker's results).
    results = [json.loads(p.read_text()) for p in Path(pkg["results"]).rglob("results-*.json")]
    assert len(results) == 2 and all(r["mlx"] for r in results)


WHERE = {
    "test_where.py": """
        import os
        import pytest

        @pytest.mark.parametrize("i", range(8))
        def test_not_on_training(i):
            assert "at-training" not in os.getcwd()
    """,
}


def test_a_failure_is_rerun_on_its_station_and_alone_on_another(
    tmp_path: Path, mini: sshd.Sshd, training: sshd.Sshd
) -> None:
    body = package("pkg", stations=["mini", "training"])
    body += mini.station_toml("mini", python=sys.executable, workdir=str(tmp_path / "at-mini"), workers=2)
    body += training.station_toml("training", python=sys.executable, workdir=str(tmp_path / "at-training"), workers=2)
    repo = workspace(tmp_path, {"pkg": WHERE}, body)

    code, report, stderr = promote_test(repo)

    pkg = of(report, "pkg")
    placed = pkg["placement"]
    failed = {v["test"]: v for v in pkg["reruns"]}
    assert code == 1 and failed, stderr
    # Every failure was on training, rerun there (it fails alone there too), and passed alone on mini.
    for test, verdict in failed.items():
        assert placed[test] == "training"
        assert (verdict["verdict"], verdict["station"], verdict["passes_on"]) == ("genuine", "training", ["mini"])
    assert {t for t, s in placed.items() if s == "training"} == set(failed)
    reruns = Path(pkg["results"]) / "reruns"
    # Its reruns on training, and the ones alone on mini after it, each in a directory of their own.
    assert sorted(p.name for p in reruns.iterdir()) == ["mini-after-training", "training"]


HANGS = {
    "test_hangs.py": """
        import time
        import pytest

        def test_hangs():
            time.sleep(120)

        @pytest.mark.parametrize("i", range(4))
        def test_quick(i):
            pass
    """,
}


def test_a_test_past_the_timeout_on_a_station_is_ended_from_here_and_the_rest_runs(
    tmp_path: Path, mini: sshd.Sshd
) -> None:
    body = package("pkg", stations=["mini"], timeout_s=3)
    body += mini.station_toml("mini", python=sys.executable, workdir=str(tmp_path / "at-mini"))
    repo = workspace(tmp_path, {"pkg": HANGS}, body)
    started = time.monotonic()

    code, report, stderr = promote_test(repo)

    assert time.monotonic() - started < 90, "the hanging test was not ended"
    pkg = of(report, "pkg")
    assert code == 1, stderr
    assert pkg["passed"] == 4 and station_errors(report) == [], report["findings"]
    [late] = [f for f in report["findings"] if f["check"] == "timeout"]
    assert late["subject"] == "test_hangs.py::test_hangs" and "timeout_s = 3 s" in late["message"]
    assert pkg["placement"]["test_hangs.py::test_hangs"] == "mini"


LONGEST = {
    "test_order.py": """
        import time
        import pytest

        @pytest.mark.parametrize("i", range(5))
        def test_quick(i):
            pass

        def test_long():
            time.sleep(0.5)
    """,
}


def test_the_longest_tests_of_the_last_run_are_sent_first(tmp_path: Path) -> None:
    repo = workspace(tmp_path, {"pkg": LONGEST}, package("pkg", stations=["local"]))

    def started() -> list[str]:
        code, report, stderr = promote_test(repo)
        assert code == 0, stderr
        [log] = (Path(of(report, "pkg")["results"]) / "parallel").glob("progress-*.jsonl")
        return [e["nodeid"] for e in map(json.loads, log.read_text().splitlines()) if e["event"] == "start"]

    first, second = started(), started()
    assert first[-1] == "test_order.py::test_long"  # no history yet: the collection's order
    assert second[0] == "test_order.py::test_long"  # the last run said it takes longest
    assert sorted(first) == sorted(second)


def test_a_fleet_no_station_of_which_answers_is_undecided_never_green(tmp_path: Path) -> None:
    from promote.config import load_config
    from promote.evidence import gates
    from promote.runners.suite import run_tests
    from tests.helpers.sshd import free_port

    body = package("pkg", stations=["mini"]) + (
        f'[promote.stations.mini]\nssh = "nobody@127.0.0.1"\nport = {free_port()}\n'
        'ssh_options = ["-F", "/dev/null", "-o", "StrictHostKeyChecking=no"]\n'
    )
    repo = workspace(tmp_path, {"pkg": {"test_a.py": "def test_a():\n    pass\n"}}, body)

    run = run_tests(load_config(repo))

    assert not run.green
    [pkg] = run.packages
    assert pkg.stations_down == ("mini",) and sum(pkg.counts.values()) == 0
    # A fleet of one: its station's own error says why nothing ran, once.
    [error] = [f.message for f in pkg.findings if f.check == "station-error"]
    assert "cannot connect" in error
    gate = gates.tested(run, None, None)
    assert gate.status == "undecided", gate
    assert any("no station of its fleet answered (`mini`): nothing ran" in line for line in gate.evidence)


def test_the_page_says_which_station_each_red_test_failed_on(tmp_path: Path) -> None:
    from promote.config import load_config
    from promote.evidence import gates
    from promote.evidence.failures import failures
    from promote.runners.suite import run_tests

    files = {"test_b.py": "def test_bad():\n    assert 0\n\ndef test_good():\n    pass\n"}
    repo = workspace(tmp_path, {"pkg": files}, package("pkg", stations=["local"], workers=2))

    run = run_tests(load_config(repo))

    [group] = failures(run)
    [red] = group["tests"]
    assert (red["test"], red["station"], red["rerun"]["verdict"]) == ("test_b.py::test_bad", "local", "genuine")
    evidence = gates.tested(run, None, None).evidence
    assert any("pkg ran on local, on 2 workers" in g for g in evidence), evidence


def test_durations_from_a_damaged_stored_run_are_none_never_a_traceback(tmp_path: Path) -> None:
    from promote.runners.stored_runs import durations_of

    part = tmp_path / "run" / "pkg" / "all"
    part.mkdir(parents=True)
    for i, text in enumerate(["[" * 100_000, '{"schema": 1, "tests": "x"}', "\x00", '{"schema": 1e999}']):
        (part / f"results-gw{i}.json").write_text(text)
        assert durations_of(part.parent) == {}
        (part / f"results-gw{i}.json").unlink()
