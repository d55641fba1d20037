"""The plugin's records: outcomes, order, thread and worker; inert without `--promote-out`."""

from __future__ import annotations

import json
import threading
import time

import pytest

from promote.core.station import Station
from promote.runners import summary
from promote.runners.plugin.progress import read_progress, unfinished
from promote.runners.plugin.records import progress_path, results_path
from tests.runners.support import out_dir, record

pytest_plugins = ["pytester"]

OUTCOMES = """
    import pytest

    @pytest.fixture
    def broken():
        raise RuntimeError("setup broke")

    @pytest.fixture
    def bad_teardown():
        yield
        raise RuntimeError("teardown broke")

    def test_passes():
        pass

    def test_fails():
        assert 1 + 1 == 3, "arithmetic"

    def test_setup_error(broken):
        pass

    def test_teardown_error(bad_teardown):
        pass

    @pytest.mark.skip(reason="not on this box")
    def test_skipped():
        pass

    @pytest.mark.xfail(reason="known bug")
    def test_xfailed():
        assert False

    @pytest.mark.xfail(reason="fixed already")
    def test_xpassed():
        pass
"""


def test_each_test_is_recorded_with_outcome_order_thread_and_worker(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_outcomes=OUTCOMES)

    rec = record(pytester)

    assert [r.worker for r in rec.results] == ["main"]
    tests = list(rec.tests().values())
    assert [(t.nodeid.split("::")[1], t.outcome, t.index) for t in tests] == [
        ("test_passes", "passed", 1),
        ("test_fails", "failed", 2),
        ("test_setup_error", "error", 3),
        ("test_teardown_error", "error", 4),
        ("test_skipped", "skipped", 5),
        ("test_xfailed", "xfailed", 6),
        ("test_xpassed", "xpassed", 7),
    ]
    assert {(t.worker, t.thread_name) for t in tests} == {("main", "MainThread")}
    by_name = {t.nodeid.split("::")[1]: t for t in tests}
    assert "arithmetic" in (by_name["test_fails"].longrepr or "")
    assert "setup broke" in (by_name["test_setup_error"].longrepr or "")
    assert "teardown broke" in (by_name["test_teardown_error"].longrepr or "")
    assert by_name["test_skipped"].skip_reason == "Skipped: not on this box"
    assert by_name["test_xfailed"].skip_reason == "known bug"
    assert by_name["test_passes"].longrepr is None
    assert all(t.duration_s >= 0 for t in tests)


def test_progress_log_has_a_start_and_finish_per_test_and_a_clean_end(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_outcomes=OUTCOMES)

    record(pytester)

    events = read_progress(progress_path(out_dir(pytester), "main"))
    kinds = [e.event for e in events]
    assert kinds[:2] == ["session", "collected"] and kinds[-1] == "end"
    assert events[1].count == 7
    assert kinds[2:-1] == ["start", "finish"] * 7
    assert [e.outcome for e in events if e.event == "finish"][:3] == ["passed", "failed", "error"]
    assert unfinished(progress_path(out_dir(pytester), "main")) == []


def test_a_dying_process_leaves_the_running_test_in_the_progress_log(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_dies="""
        import os

        def test_before():
            pass

        def test_dies():
            os._exit(3)

        def test_never_reached():
            pass
        """
    )

    rec = record(pytester, subprocess=True)

    assert rec.run.ret == 3
    assert rec.results == []  # no session end, so no results file: the progress log is the record
    events = read_progress(progress_path(out_dir(pytester), "main"))
    assert unfinished(progress_path(out_dir(pytester), "main")) == ["test_dies.py::test_dies"]
    assert [e.nodeid for e in events if e.event == "finish"] == ["test_dies.py::test_before"]


def test_unittest_subtests_are_recorded_one_by_one(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_sub="""
        import unittest

        class Parity(unittest.TestCase):
            def test_even(self):
                for i in range(4):
                    with self.subTest(i=i):
                        self.assertEqual(i % 2, 0)

            def test_labelled(self):
                with self.subTest("first"):
                    pass
        """
    )

    rec = record(pytester)

    outcomes = rec.outcomes()
    parent = "test_sub.py::Parity::test_even"
    # pytest 9 leaves this parent passed and counts its failed subtests; the record fails it.
    assert outcomes[parent] == "failed"
    assert outcomes["test_sub.py::Parity::test_labelled"] == "passed"
    if pytest.version_tuple < (9,):
        # pytest 8 (without pytest-subtests) reports no subtests: the first failing one ends the test.
        assert outcomes == {parent: "failed", "test_sub.py::Parity::test_labelled": "passed"}
        assert "AssertionError: 1 != 0" in (rec.tests()[parent].longrepr or "")
        return
    assert "contains 2 failed subtests" in (rec.tests()[parent].longrepr or "")
    assert {k: v for k, v in outcomes.items() if k.startswith(parent + " ")} == {
        f"{parent} (i=0)": "passed",
        f"{parent} (i=1)": "failed",
        f"{parent} (i=2)": "passed",
        f"{parent} (i=3)": "failed",
    }
    assert outcomes["test_sub.py::Parity::test_labelled [first]"] == "passed"
    tests = rec.tests()
    assert tests[f"{parent} (i=1)"].parent == parent
    assert "AssertionError" in (tests[f"{parent} (i=3)"].longrepr or "")
    assert tests[f"{parent} (i=1)"].index == tests[parent].index == 1


# Without the terminal reporter, pytest 9 never turns the parent's passed report into a failed one.
@pytest.mark.parametrize("args", [(), ("-p", "no:terminal")], ids=["terminal", "no-terminal"])
def test_pytest_subtests_fixture_failures_fail_the_parent(pytester: pytest.Pytester, args: tuple[str, ...]) -> None:
    if pytest.version_tuple < (9,):
        pytest.importorskip("pytest_subtests", reason="no `subtests` fixture before pytest 9")
    pytester.makepyfile(
        test_fx="""
        def test_values(subtests):
            for i in range(3):
                with subtests.test(msg="value", i=i, name="x"):
                    assert i != 1
        """
    )

    rec = record(pytester, *args)

    assert rec.outcomes() == {
        "test_fx.py::test_values": "failed",
        "test_fx.py::test_values [value] (i=0, name='x')": "passed",
        "test_fx.py::test_values [value] (i=1, name='x')": "failed",
        "test_fx.py::test_values [value] (i=2, name='x')": "passed",
    }
    assert "contains 1 failed subtest" in (rec.tests()["test_fx.py::test_values"].longrepr or "")
    assert rec.tests()["test_fx.py::test_values [value] (i=1, name='x')"].parent == "test_fx.py::test_values"


@pytest.mark.slow
def test_xdist_workers_each_write_their_own_files_and_the_controller_none(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_many="""
        import threading
        import pytest

        @pytest.mark.parametrize("n", range(12))
        def test_n(n):
            assert threading.current_thread() is threading.main_thread()
        """
    )

    rec = record(pytester, "-n", "2", subprocess=True)

    rec.run.assert_outcomes(passed=12)
    assert sorted(r.worker for r in rec.results) == ["gw0", "gw1"]
    assert not results_path(out_dir(pytester), "main").exists()
    assert len(rec.tests()) == 12
    for r in rec.results:
        assert [t.index for t in r.tests] == list(range(1, len(r.tests) + 1))
        assert {(t.worker, t.thread_name) for t in r.tests} == {(r.worker, "MainThread")}
        assert len({r.pid for r in rec.results}) == 2


def test_without_promote_out_the_plugin_records_nothing(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SANCTUM_MLX_DFLASH2", "1")  # undone afterwards, whatever the run leaves
    pytester.makepyfile(
        test_quiet="""
        import os

        def test_leaks_and_looks(request):
            os.environ["SANCTUM_MLX_DFLASH2"] = "0"
            assert request.config.pluginmanager.get_plugin("promote-recorder") is None

        def test_sees_the_leak():
            assert os.environ.get("SANCTUM_MLX_DFLASH2") == "0"
        """
    )

    result = pytester.runpytest("-p", "no:cacheprovider")

    result.assert_outcomes(passed=2)  # the leak stays: nothing probes or restores it
    written = [p.name for p in pytester.path.rglob("*") if p.suffix in (".json", ".jsonl")]
    assert written == []


def test_loading_by_module_name_beside_the_installed_entry_point(pytester: pytest.Pytester) -> None:
    # How a runner loads the plugin whether or not the package's environment installed promote.
    pytester.makepyfile(test_one="def test_one():\n    pass\n")

    rec = record(pytester, "-p", "no:promote", "-p", "promote.runners.plugin.hooks")

    rec.run.assert_outcomes(passed=1)
    assert list(rec.outcomes().values()) == ["passed"]


def test_markers_are_registered_even_without_the_option(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--markers")

    result.stdout.fnmatch_lines(
        ["@pytest.mark.requires(*resources, device=None, memory_gb=None):*", "@pytest.mark.serial:*"]
    )


def test_results_file_is_plain_json_with_the_documented_keys(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_one="def test_one():\n    pass\n")

    record(pytester)

    data = json.loads(results_path(out_dir(pytester), "main").read_text())
    assert data["schema"] == 1
    assert set(data) >= {"worker", "pid", "leaks", "exitstatus", "probe_us_per_test", "tests", "streams", "findings"}
    assert data["tests"][0]["nodeid"] == "test_one.py::test_one"
    assert data["exitstatus"] == 0


def test_the_progress_log_alone_rebuilds_every_record_the_results_file_holds(pytester: pytest.Pytester) -> None:
    # What promote reads for a worker that died before writing its results file.
    pytester.makepyfile(test_outcomes=OUTCOMES)
    pytester.makepyfile(
        test_more="""
        import threading
        import unittest
        import pytest

        @pytest.mark.requires("checkpoint:x")
        def test_declares_a_requirement():
            pass

        def test_passes_too():
            pass

        class Sub(unittest.TestCase):
            def test_loop(self):
                for i in range(2):
                    with self.subTest(i=i):
                        self.assertLess(i, 1)
        """
    )

    rec = record(pytester, subprocess=True)

    [results] = rec.results
    saved = summary.recovered(out_dir(pytester), workers_with_results=set())
    rebuilt, findings = saved.tests, saved.findings
    assert sorted(rebuilt, key=lambda t: (t.index, t.nodeid)) == sorted(
        results.tests, key=lambda t: (t.index, t.nodeid)
    )
    # Ten tests, and two subtests where pytest reports unittest's (pytest 9).
    assert len(rebuilt) == len(results.tests) == (12 if pytest.version_tuple >= (9,) else 10)
    assert findings == list(results.findings)
    # The passing tests took the short line; the rest carry their records.
    lines = progress_path(out_dir(pytester), "main").read_text().splitlines()
    short = [json.loads(line)["nodeid"] for line in lines if '"duration_s"' in line and '"records"' not in line]
    assert short == ["test_more.py::test_passes_too", "test_outcomes.py::test_passes"]


STATION_TESTS = """
    import pytest

    @pytest.mark.requires("checkpoint:x")
    def test_needs_x():
        pass

    def test_needs_nothing():
        pass
"""


def test_a_station_file_written_after_pytest_started_is_waited_for(pytester: pytest.Pytester) -> None:
    # promote starts pytest first and detects the station meanwhile: the file appears only later.
    pytester.makepyfile(test_station=STATION_TESTS)
    station = pytester.path / "station.json"
    text = json.dumps(Station("late", "linux-x86_64", ("cpu",), 16.0, local=True).to_json())
    log = progress_path(out_dir(pytester), "main")
    wrote_after_start = threading.Event()

    def write_once_the_test_has_started() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if log.is_file() and "test_needs_x" in log.read_text():
                time.sleep(0.5)  # the plugin is now waiting for the file
                station.write_text(text)
                wrote_after_start.set()
                return
            time.sleep(0.01)

    writer = threading.Thread(target=write_once_the_test_has_started)
    writer.start()
    rec = record(pytester, "--promote-station", str(station), subprocess=True)
    writer.join()

    assert wrote_after_start.is_set()
    tests = rec.tests()
    assert tests["test_station.py::test_needs_x"].skip_reason == "Skipped: requires checkpoint:x: not on station late"
    assert tests["test_station.py::test_needs_nothing"].outcome == "passed"


def test_a_station_file_that_never_appears_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makeconftest("import promote.runners.plugin.hooks\npromote.runners.plugin.hooks.STATION_WAIT_S = 0.3\n")
    pytester.makepyfile(test_station=STATION_TESTS)
    missing = pytester.path / "nowhere" / "station.json"

    rec = record(pytester, "--promote-station", str(missing), subprocess=True)

    assert rec.run.ret == 4
    rec.run.stdout.fnmatch_lines([f"*--promote-station {missing}: no such file (waited 0.3 s)*"])
