"""The runner's watcher reads progress logs as they grow; what it concludes must match one full read."""

from __future__ import annotations

from pathlib import Path

import pytest

from promote import config
from promote.runners.package import Watch
from promote.runners.plugin.progress import ProgressLog, unfinished
from promote.runners.plugin.records import progress_path
from promote.runners.suite import run_tests
from tests.helpers.cli import run
from tests.helpers.packages import write_config, write_package


def test_the_watcher_names_the_same_dead_tests_as_a_full_read_of_the_log(tmp_path: Path) -> None:
    watch = Watch(tmp_path, timeout_s=None)
    first = ProgressLog(tmp_path, "gw0")
    first.start("t.py::test_ok", 1)
    first.finish("t.py::test_ok", 1, "passed", records=[{"nodeid": "t.py::test_ok"}])
    first.start("t.py::test_dies", 2)
    watch.poll()  # mid-run: the test is running, not lost
    assert watch.finished == 1
    # The process died; a replacement worker appends to the same log and is cut short too.
    replacement = ProgressLog(tmp_path, "gw0")
    replacement.start("t.py::test_hangs", 1)
    other = ProgressLog(tmp_path, "gw1")
    other.start("t.py::test_fine", 1)
    other.finish("t.py::test_fine", 1, "passed")
    other.close()
    with progress_path(tmp_path, "gw0").open("a") as f:
        f.write('{"worker": "gw0", "event": "fin')  # a line cut short by a kill
    watch.poll()

    # One read of the whole log, as promote does for a run it did not watch, says the same.
    expected = unfinished(progress_path(tmp_path, "gw0"))
    assert expected == ["t.py::test_dies", "t.py::test_hangs"]
    assert watch.crashed() == tuple((n, "gw0") for n in expected)
    assert watch.finished == 2
    first.close()
    replacement.close()


def test_the_serial_part_runs_only_when_the_parallel_part_said_it_left_tests(tmp_path: Path) -> None:
    none_left, some_left, silent = (tmp_path / d for d in ("none", "some", "silent"))
    for out, left in ((none_left, [0, 0]), (some_left, [0, 3])):
        for worker, count in zip(("gw0", "gw1"), left, strict=True):
            log = ProgressLog(out, worker)
            log.collected(10, serial_left=count)
            log.close()
    ProgressLog(silent, "gw0").close()  # died before collecting: cannot tell

    verdicts = {}
    for out in (none_left, some_left, silent):
        watch = Watch(out, timeout_s=None)
        watch.poll()
        verdicts[out.name] = watch.serial_left()
    assert verdicts == {"none": False, "some": True, "silent": True}


def test_a_collection_error_is_not_a_finished_test(tmp_path: Path) -> None:
    log = ProgressLog(tmp_path, "gw0")
    log.collected(2)
    record = {"nodeid": "t_broken.py", "index": 0, "outcome": "error"}
    log.finish("t_broken.py", 0, "error", records=[record])
    log.start("t.py::test_sub", 1)
    subtests = [{"nodeid": f"t.py::test_sub [{i}]", "index": 1, "parent": "t.py::test_sub"} for i in range(3)]
    log.finish("t.py::test_sub", 1, "passed", records=[{"nodeid": "t.py::test_sub", "index": 1}, *subtests])
    log.start("t.py::test_ok", 2)
    log.finish_passed("t.py::test_ok", 2, 0.1)
    log.close()

    watch = Watch(tmp_path, timeout_s=None)
    watch.poll()

    assert (watch.finished, watch.total) == (2, 2)


PROGRESS = {
    "tests/test_broken.py": "raise RuntimeError('cannot even be imported')\n",
    "tests/test_sub.py": """
        import unittest

        class Sub(unittest.TestCase):
            def test_subtests(self):
                for i in range(4):
                    with self.subTest(i=i):
                        self.assertGreaterEqual(i, 0)

        def test_pytest_subtests(subtests):
            for i in range(3):
                with subtests.test(i=i):
                    assert i >= 0
    """,
    "tests/test_plain.py": "".join(f"def test_{i}():\n    pass\n\n" for i in range(6)),
}


@pytest.mark.slow
def test_progress_never_shows_more_finished_than_collected(tmp_path: Path) -> None:
    write_package(tmp_path, "pkg", PROGRESS)
    path = write_config(tmp_path, [{"name": "pkg", "path": "pkg", "workers": 2}])
    lines: list[tuple[int, int, bool]] = []

    result = run_tests(config.load(path), on_progress=lambda _, done, total, end: lines.append((done, total, end)))

    assert sum(result.packages[0].counts.values()) >= 8
    assert lines and all(done <= total for done, total, _ in lines), lines
    # Two xdist workers each collect the same 8 tests; subtests and the collection error are no tests.
    assert lines[-1] == (8, 8, True)
    # What `promote test` prints at the end says the same.
    printed = [ln for ln in run(tmp_path, "test").stderr.splitlines() if "tests finished" in ln]
    assert printed == ["pkg: 8/8 tests finished"]
