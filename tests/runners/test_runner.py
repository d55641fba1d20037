"""The runner's watcher reads progress logs as they grow; what it concludes must match one full read."""

from __future__ import annotations

from pathlib import Path

from promote.runners.progress import ProgressLog, unfinished
from promote.runners.records import progress_path
from promote.runners.runner import Watch


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
