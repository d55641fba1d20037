"""Reruns that survive a real suite: broken modules elsewhere, tests that hang alone, several victims at once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from promote.runners.causes.rerun import why_not_run
from tests.helpers.cli import run
from tests.helpers.packages import write_config, write_package

pytestmark = pytest.mark.slow

POLLUTED = {
    "polluted.py": "STATE = {}\n",
    "test_a.py": """\
        import polluted

        def test_polluter():
            polluted.STATE["mode"] = "draft"

        def test_victim():
            assert polluted.STATE.get("mode") is None

        def test_genuine():
            assert 1 == 2
        """,
}


def promote_test(root: Path) -> dict[str, Any]:
    result = run(root, "test", "--json")
    assert result.exit_code == 1, result.output
    report: dict[str, Any] = json.loads(result.stdout)
    return report


def verdicts(report: dict[str, Any]) -> list[tuple[str, str]]:
    return [(v["test"], v["verdict"]) for v in report["packages"][0]["reruns"]]


def test_reruns_next_to_modules_that_cannot_be_collected_still_judge_the_victims(tmp_path: Path) -> None:
    files = {
        **POLLUTED,
        # Collected before test_a.py: a whole-tree rerun would be stopped by either of them.
        "test_0_missing.py": "import no_such_package_for_promote\n",
        "test_0_exits.py": "import sys\nsys.exit(1)\n",
    }
    write_package(tmp_path, "pkg", files)
    write_config(tmp_path, [{"name": "pkg", "path": "pkg"}])

    report = promote_test(tmp_path)

    assert verdicts(report) == [("test_a.py::test_victim", "order-dependent"), ("test_a.py::test_genuine", "genuine")]
    [found] = [f for f in report["findings"] if f["check"] == "order-dependent"]
    assert found["cause"] == "test_a.py::test_polluter"
    assert not [f for f in report["findings"] if f["check"] in ("rerun-undecided", "flaky")]


def test_a_victim_that_cannot_run_in_a_rerun_says_why_in_one_line(tmp_path: Path) -> None:
    # The module imports in the run, and fails to in every rerun (which select their tests).
    victim_file = """\
        import sys

        if any(a.startswith(("--promote-select=", "--promote-selections=")) for a in sys.argv):
            raise ImportError("the fixture server is gone")

        def test_victim():
            assert False
        """
    write_package(tmp_path, "pkg", {"test_v.py": victim_file})
    write_config(tmp_path, [{"name": "pkg", "path": "pkg"}])

    report = promote_test(tmp_path)

    [undecided] = [f for f in report["findings"] if f["check"] == "rerun-undecided"]
    assert undecided["subject"] == "test_v.py::test_victim"
    assert "\n" not in undecided["message"]
    assert "ERROR collecting test_v.py: ImportError: the fixture server is gone" in undecided["message"]


def test_a_test_that_hangs_alone_is_killed_at_the_timeout_and_judged_genuine(tmp_path: Path) -> None:
    child_pid = tmp_path / "child.pid"
    files = {
        "polluted.py": "STATE = {}\n",
        "test_a.py": f"""\
            import pathlib, subprocess, sys, time
            import polluted

            def test_first():
                polluted.STATE["ran"] = True

            def test_hangs_alone():
                if "ran" not in polluted.STATE:
                    # A child of the test: killing pytest alone would leave it running.
                    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
                    pathlib.Path({str(child_pid)!r}).write_text(str(child.pid))
                    time.sleep(60)
                assert False
            """,
    }
    write_package(tmp_path, "pkg", files)
    write_config(tmp_path, [{"name": "pkg", "path": "pkg", "timeout_s": 2}])

    report = promote_test(tmp_path)

    [verdict] = report["packages"][0]["reruns"]
    assert (verdict["test"], verdict["verdict"], verdict["reruns"]) == ("test_a.py::test_hangs_alone", "genuine", 1)
    assert "timeout (2 s)" in verdict["detail"]
    assert not [f for f in report["findings"] if f["check"] in ("rerun-undecided", "flaky")]
    # The test's own child went with it: the rerun was killed as a process group.
    assert not alive(int(child_pid.read_text()))


def alive(pid: int) -> bool:
    """Whether `pid` is still running, after a few seconds' grace for a kill to land (a zombie is not running)."""
    for _ in range(100):
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1][:1]
        except FileNotFoundError:
            return False
        except OSError:  # no /proc (macOS): ask the kernel
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return False
            state = "R"
        if state == "Z":
            return False
        time.sleep(0.05)
    return True


def test_several_victims_are_rerun_alone_at_the_same_time(tmp_path: Path) -> None:
    meet = tmp_path / "meet"
    meet.mkdir()
    # In a rerun, each victim waits (a while at most) for another victim's rerun to have started.
    body = f"""\
        import pathlib, sys, time

        def meet(name):
            if not any(a.startswith(("--promote-select=", "--promote-selections=")) for a in sys.argv):
                return
            here = pathlib.Path({str(meet)!r})
            (here / f"started-{{name}}").touch()
            for _ in range(400):
                if len(list(here.glob("started-*"))) > 1:
                    break
                time.sleep(0.05)
            others = sorted(p.name for p in here.glob("started-*") if p.name != f"started-{{name}}")
            (here / f"saw-{{name}}").write_text(" ".join(others))
        """
    tests = "".join(f"\ndef test_{n}():\n    meet('{n}')\n    assert False\n" for n in ("one", "two", "three"))
    write_package(tmp_path, "pkg", {"test_m.py": textwrap.dedent(body) + tests})
    write_config(tmp_path, [{"name": "pkg", "path": "pkg"}])

    report = promote_test(tmp_path)

    # Verdicts in victim order, each victim judged.
    assert verdicts(report) == [(f"test_m.py::test_{n}", "genuine") for n in ("one", "two", "three")]
    if (os.cpu_count() or 1) > 1:
        # The first two victims by id (reruns go in id order, whatever order the run failed them in) started
        # together: each saw the other one's start.
        assert "started-three" in (meet / "saw-one").read_text()
        assert "started-one" in (meet / "saw-three").read_text()


def test_reruns_read_the_ini_file_the_run_read(tmp_path: Path) -> None:
    # Given tests/test_g.py, pytest would look for its ini file from tests/ and find one the run never read.
    files = {
        "pytest.ini": "[pytest]\n",
        "tests/pytest.ini": "[pytest]\naddopts = --no-such-option\n",
        "tests/test_g.py": "def test_genuine():\n    assert 1 == 2\n",
    }
    write_package(tmp_path, "pkg", files)
    write_config(tmp_path, [{"name": "pkg", "path": "pkg"}])

    report = promote_test(tmp_path)

    assert verdicts(report) == [("tests/test_g.py::test_genuine", "genuine")]


def test_why_not_run_names_an_internal_error_and_a_usage_error(tmp_path: Path) -> None:
    log = tmp_path / "pytest.log"
    log.write_text("INTERNALERROR> Traceback (most recent call last):\nINTERNALERROR> SystemExit: 1\n\nno tests ran\n")
    assert why_not_run(log, 3) == "exit 3: INTERNALERROR SystemExit: 1"
    log.write_text("ERROR: usage: python -m pytest [options]\npython -m pytest: error: unrecognized arguments: -x\n")
    assert why_not_run(log, 4) == "exit 4: ERROR: usage: python -m pytest [options]"
    log.write_text("\n==== 3 deselected in 0.01s ====\n")
    assert why_not_run(log, 5) == "exit 5: 3 deselected in 0.01s"


@pytest.mark.skipif(not Path("/proc/self").exists(), reason="reads /proc")
def test_an_interrupted_promote_test_kills_the_reruns_under_way(tmp_path: Path) -> None:
    files = {
        "polluted.py": "STATE = {}\n",
        "test_a.py": """\
            import time
            import polluted

            def test_first():
                polluted.STATE["ran"] = True

            def test_hangs_alone():
                if "ran" not in polluted.STATE:
                    time.sleep(120)
                assert False
            """,
    }
    write_package(tmp_path, "pkg", files)
    write_config(tmp_path, [{"name": "pkg", "path": "pkg"}])  # no timeout: only the interrupt ends the rerun
    proc = subprocess.Popen([sys.executable, "-m", "promote", "test"], cwd=tmp_path, stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not any(tmp_path.glob(".promote/runs/*/pkg/reruns/rerun-001/progress-*.jsonl")):
            assert time.monotonic() < deadline and proc.poll() is None, "the rerun never started"
            time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0
    assert not any(alive(int(p.name)) for p in running_under(tmp_path))


def running_under(path: Path) -> list[Path]:
    """/proc entries of processes whose command line or working directory is under `path`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        if str(path) in cmdline or cwd.startswith(str(path)):
            found.append(entry)
    return found


SEEDED = """\
    import random

    # Seeded once, when the module is imported: a fresh process's first draw is this one.
    random.seed(8675309)
    FIRST = random.Random(8675309).random()

    def test_draws():
        random.random()

    def test_first_draw_is_the_seeded_one():
        assert random.random() == FIRST
    """


def test_a_forked_rerun_keeps_the_random_state_collection_seeded(tmp_path: Path) -> None:
    # CPython reseeds `random` in a forked child; alone in a fresh process the victim passes, so it must here too.
    write_package(tmp_path, "pkg", {"test_seeded.py": SEEDED})
    write_config(tmp_path, [{"name": "pkg", "path": "pkg"}])

    report = promote_test(tmp_path)

    victim = "test_seeded.py::test_first_draw_is_the_seeded_one"
    assert verdicts(report) == [(victim, "order-dependent")]
    [finding] = [f for f in report["findings"] if f["check"] == "order-dependent"]
    assert finding["cause"] == "test_seeded.py::test_draws"
    # The reruns were forked (the path under test), not fresh processes.
    markers = list(tmp_path.glob(".promote/runs/*/pkg/reruns/*/forked.json"))
    assert markers and all(json.loads(p.read_text())["forked"] for p in markers)
