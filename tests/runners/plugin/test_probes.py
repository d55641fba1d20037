"""Leaked process state: found, named at its cause, restored or only reported, secrets hidden."""

from __future__ import annotations

import os
import textwrap

import pytest

from promote.core.findings import Finding
from promote.runners.plugin.leaks import LeakWatch, leak_finding
from promote.runners.plugin.probes import Change, Probe
from tests.runners.support import out_dir, record

pytest_plugins = ["pytester"]

KILL_SWITCH = """
    import os

    def test_turns_it_off():
        os.environ["SANCTUM_MLX_DFLASH2"] = "0"

    def test_unrelated():
        pass

    def test_needs_it_on():
        assert os.environ.get("SANCTUM_MLX_DFLASH2") != "0"
"""


def check(watch: LeakWatch, nodeid: str, before: dict[str, object]) -> Finding | None:
    """The finding the plugin writes for what `watch` saw leak (None: nothing)."""
    leaks = watch.check(nodeid, before)
    return leak_finding(leaks[0]) if leaks else None


@pytest.fixture
def guarded_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """In-process runs share os.environ with this process: put back what they leave."""
    for name in ("SANCTUM_MLX_DFLASH2", "API_TOKEN", "DB_PASSWORD", "PROMOTE_SESSION_MODE"):
        monkeypatch.setenv(name, "placeholder")
        monkeypatch.delenv(name)


@pytest.mark.usefixtures("guarded_env")
def test_restore_names_the_leaking_test_and_the_later_test_passes(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_switch=KILL_SWITCH)

    rec = record(pytester, "--promote-leaks", "restore")

    rec.run.assert_outcomes(passed=3)
    [leak] = rec.findings("leaked-state")
    assert (leak.subject, leak.cause) == ("test_switch.py::test_turns_it_off",) * 2
    assert leak.severity == "warning"
    assert "os.environ[SANCTUM_MLX_DFLASH2]: <unset> -> '0'" in leak.message
    # The test did not put it back; promote did, after it: the sentence says who did what.
    assert leak.message == (
        "changed global state and did not put it back: os.environ[SANCTUM_MLX_DFLASH2]: <unset> -> '0' "
        "(promote restored it after the test)"
    )


@pytest.mark.usefixtures("guarded_env")
def test_report_leaves_the_leak_so_the_later_test_fails_but_names_the_cause(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_switch=KILL_SWITCH)

    rec = record(pytester, "--promote-leaks", "report")

    assert rec.outcomes()["test_switch.py::test_needs_it_on"] == "failed"
    [leak] = rec.findings("leaked-state")
    assert (leak.subject, leak.cause, leak.severity) == (
        "test_switch.py::test_turns_it_off",
        "test_switch.py::test_turns_it_off",
        # The plugin cannot know that a later test failed because of it: the runner's group says so.
        "warning",
    )
    assert leak.message.endswith(' (promote left it as is, as leaks = "report" asks)')


@pytest.mark.usefixtures("guarded_env")
def test_values_of_secret_looking_variables_are_redacted(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_secret="""
        import os

        def test_logs_in():
            os.environ["API_TOKEN"] = "tok-4f9a-very-secret"
            os.environ["DB_PASSWORD"] = "hunter2"
        """
    )

    rec = record(pytester)

    [leak] = rec.findings("leaked-state")
    assert "os.environ[API_TOKEN]: <unset> -> ***" in leak.message
    assert "os.environ[DB_PASSWORD]: <unset> -> ***" in leak.message
    written = "".join(p.read_text() for p in out_dir(pytester).iterdir())
    assert "tok-4f9a" not in written and "hunter2" not in written


@pytest.mark.usefixtures("guarded_env")
def test_state_set_up_by_a_session_fixture_is_not_a_leak(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_session="""
        import os
        import pytest

        @pytest.fixture(scope="session", autouse=True)
        def mode():
            os.environ["PROMOTE_SESSION_MODE"] = "fast"
            yield
            del os.environ["PROMOTE_SESSION_MODE"]

        def test_first():
            pass

        def test_second():
            assert os.environ["PROMOTE_SESSION_MODE"] == "fast"
        """
    )

    rec = record(pytester)

    rec.run.assert_outcomes(passed=2)
    assert rec.findings("leaked-state") == []


def test_process_probes_cover_cwd_path_threads_and_logging(pytester: pytest.Pytester) -> None:
    pytester.mkdir("elsewhere")
    pytester.makepyfile(
        test_messy="""
        import logging
        import os
        import sys
        import threading

        stop = threading.Event()

        def test_messes_up():
            os.chdir("elsewhere")
            sys.path.append("/nowhere")
            logging.getLogger().addHandler(logging.NullHandler())
            threading.Thread(target=stop.wait, name="forgotten", daemon=True).start()

        def test_after():
            assert not os.getcwd().endswith("elsewhere")
            assert "/nowhere" not in sys.path
            stop.set()
        """
    )

    rec = record(pytester, "--promote-leaks", "restore", subprocess=True)

    rec.run.assert_outcomes(passed=2)
    [leak] = rec.findings("leaked-state")
    assert leak.subject == "test_messy.py::test_messes_up"
    for key in ("cwd:", "sys.path:", "logging[root.handlers]:", "threads[forgotten]:"):
        assert key in leak.message
    # A running thread cannot be put back: the rest is, and the finding says which is which.
    assert "; could not restore threads)" in leak.message and "(promote restored " in leak.message
    assert leak.severity == "error"


def test_leaks_off_probes_nothing(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SANCTUM_MLX_DFLASH2", "1")
    pytester.makepyfile(test_switch=KILL_SWITCH)

    rec = record(pytester, "--promote-leaks", "off")

    assert rec.findings("leaked-state") == []
    assert rec.outcomes()["test_switch.py::test_needs_it_on"] == "failed"
    assert [r.probe_us_per_test for r in rec.results] == [None]


@pytest.mark.usefixtures("guarded_env")
def test_probe_cost_per_test_is_measured(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_switch=KILL_SWITCH)

    rec = record(pytester)

    [cost] = [r.probe_us_per_test for r in rec.results]
    assert cost is not None and 0 < cost < 100_000


def test_projects_add_probes_through_the_entry_point_group(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = pytester.mkdir("site")
    (site / "counterprobe.py").write_text(
        textwrap.dedent(
            """
            from promote.runners.plugin.probes import Probe

            LEVEL = [1]

            def probes():
                return [Probe("counter.level", lambda: LEVEL[0], lambda v: LEVEL.__setitem__(0, v))]
            """
        )
    )
    dist = site / "counterprobe-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: counterprobe\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[promote.probes]\ncounter = counterprobe:probes\n")
    pytester.makepyfile(
        test_counter="""
        import counterprobe

        def test_raises_level():
            counterprobe.LEVEL[0] = 5

        def test_level_back():
            assert counterprobe.LEVEL[0] == 1
        """
    )
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])))

    rec = record(pytester, "--promote-leaks", "restore", subprocess=True)

    rec.run.assert_outcomes(passed=2)
    [leak] = rec.findings("leaked-state")
    assert leak.subject == "test_counter.py::test_raises_level"
    assert "counter.level: 1 -> 5" in leak.message


class _Ambiguous:
    """A value whose `==` raises, like an array's truth value."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __eq__(self, other: object) -> bool:
        raise ValueError("truth value is ambiguous")

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Ambiguous({self.n})"


def test_a_probe_diff_is_asked_only_when_snapshots_differ_and_raising_equality_still_reports() -> None:
    state = {"level": 1, "array": _Ambiguous(1)}
    asked: list[tuple[object, object]] = []

    def diff(before: int, after: int) -> list[Change]:
        asked.append((before, after))
        return [] if before == after else [Change("level", before, after)]

    watch = LeakWatch(
        [
            Probe("level", lambda: state["level"], None, diff),
            Probe("array", lambda: state["array"], None, lambda b, a: [] if b.n == a.n else [Change("array", b, a)]),
        ],
        restore=False,
    )
    state["array"] = same = _Ambiguous(1)  # the same object before and after: nothing to compare
    before = watch.before_test()
    assert check(watch, "t.py::test_quiet", before) is None
    assert asked == []

    before = watch.before_test()
    state["level"] = 2
    leak = check(watch, "t.py::test_raises_level", before)
    assert leak is not None and "level: 1 -> 2" in leak.message
    assert asked == [(1, 2)]

    before = watch.before_test()
    state["array"] = _Ambiguous(7)  # a new object whose == raises: the per-probe diff decides
    leak = check(watch, "t.py::test_swaps_array", before)
    assert leak is not None and "Ambiguous(1) -> Ambiguous(7)" in leak.message
    assert same is not state["array"]


def test_an_ordinary_change_is_restored_and_counted_without_a_finding_and_a_leak_still_is_one() -> None:
    state = {"counter": 0, "mode": "a"}

    def restore_counter(value: int) -> None:
        state["counter"] = value

    def restore_mode(value: str) -> None:
        state["mode"] = value

    probes = [
        # Counting up is ordinary use (as drawing random numbers is); counting down is not.
        Probe("counter", lambda: state["counter"], restore_counter, ordinary=lambda b, a: a > b),
        Probe("mode", lambda: state["mode"], restore_mode),
    ]
    watch = LeakWatch(probes, restore=True)

    before = watch.before_test()
    state["counter"] = 5
    assert check(watch, "t.py::test_counts", before) is None
    assert state["counter"] == 0 and watch.ordinary == {"counter": 1}

    before = watch.before_test()
    state["counter"], state["mode"] = 3, "b"
    leak = check(watch, "t.py::test_counts_and_switches", before)
    # One finding for the test, naming only the leak; the ordinary change is put back all the same.
    assert leak is not None and leak.subject == "t.py::test_counts_and_switches"
    assert "mode: 'a' -> 'b'" in leak.message and "counter" not in leak.message
    assert state == {"counter": 0, "mode": "a"} and watch.ordinary == {"counter": 2}

    before = watch.before_test()
    state["counter"] = -1
    leak = check(watch, "t.py::test_counts_down", before)
    assert leak is not None and "counter: 0 -> -1" in leak.message and state["counter"] == 0

    reporting = LeakWatch(probes, restore=False)
    before = reporting.before_test()
    state["counter"] = 9
    assert reporting.check("t.py::test_counts", before) == []
    # `leaks = "report"` changes nothing, ordinary use included; it is counted the same way.
    assert state["counter"] == 9 and reporting.ordinary == {} and reporting.used == {"counter": 1}


def test_without_the_flag_a_leak_is_reported_and_left_as_the_test_left_it(pytester: pytest.Pytester) -> None:
    # promote's own default: the next test sees what plain pytest would show it.
    pytester.makepyfile(
        test_env="""
        import os

        def test_a_sets():
            os.environ["PROMOTE_PROBE_DEFAULT"] = "1"

        def test_b_sees_it():
            assert os.environ.get("PROMOTE_PROBE_DEFAULT") == "1"
        """
    )
    rec = record(pytester, subprocess=True)
    rec.run.assert_outcomes(passed=2)
    [leak] = rec.findings("leaked-state")
    assert leak.subject == "test_env.py::test_a_sets" and "PROMOTE_PROBE_DEFAULT" in leak.message


def test_a_directory_pytests_own_importer_puts_on_sys_path_during_setup_is_not_the_tests_leak(
    pytester: pytest.Pytester,
) -> None:
    # A conftest.py that pytest imports only when a fixture asks for it, through pytest's own importer (as it does
    # for conftest files in prepend mode): the directory it inserts is pytest's doing. A test's own insertion of
    # a directory pytest has nothing to do with is still that test's leak.
    pytester.mkdir("helpers")
    pytester.makepyfile(**{"helpers/conftest": "VALUE = 1\n"})
    pytester.makepyfile(
        test_paths="""
        import inspect
        import sys
        from pathlib import Path

        import pytest
        from _pytest.pathlib import ImportMode, import_path

        HELPERS = Path(__file__).parent / "helpers"

        # pytest 8.1 added a required keyword; 8.0 has none.
        NEWER = {"consider_namespace_packages": False} if "consider_namespace_packages" in inspect.signature(
            import_path).parameters else {}

        @pytest.fixture
        def late_conftest(request):
            return import_path(HELPERS / "conftest.py", mode=ImportMode.prepend, root=request.config.rootpath, **NEWER)

        def test_uses_it(late_conftest):
            assert late_conftest.VALUE == 1

        def test_own_insertion():
            sys.path.insert(0, "/somewhere/else")
        """
    )
    (pytester.path / "helpers" / "test_in_helpers.py").write_text("def test_there():\n    pass\n")

    rec = record(pytester)

    rec.run.assert_outcomes(passed=3)
    assert [f.subject for f in rec.findings("leaked-state")] == ["test_paths.py::test_own_insertion"], [
        f.message for f in rec.findings("leaked-state")
    ]
