"""`promote test` isolation end to end: real MLX on the CPU, real pytest workers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers.cli import run
from tests.helpers.packages import write_config, write_package

pytestmark = pytest.mark.slow
pytest.importorskip("mlx.core")

# test_a switches compile off and never switches it back; test_g, six places later, counts
# how often an mx.compile'd function is traced: with compile on, twice (two shapes), off: every call.
COMPILE_LEAK = {
    "test_compile.py": """
        import mlx.core as mx

        def test_a_turns_compile_off():
            mx.disable_compile()

        def test_b(): pass
        def test_c(): pass
        def test_d(): pass
        def test_e(): pass
        def test_f(): pass

        def test_g_counts_traces():
            traces = []

            @mx.compile
            def double(x):
                traces.append(1)
                return x * 2

            for _ in range(3):
                mx.eval(double(mx.array([1.0, 2.0])))
            assert len(traces) == 1
    """,
}


def run_json(root: Path) -> tuple[int, dict]:  # type: ignore[type-arg]
    result = run(root, "test", "--json")
    return result.exit_code, json.loads(result.stdout)


@pytest.mark.parametrize("policy", ["restore", "report"])
def test_leaked_compile_switch_is_named_at_its_cause(tmp_path: Path, policy: str) -> None:
    write_package(tmp_path, "sanctum", COMPILE_LEAK)
    write_config(tmp_path, [{"name": "sanctum", "path": "sanctum", "leaks": policy}])

    code, report = run_json(tmp_path)

    pkg = report["packages"][0]
    leaks = [f for f in report["findings"] if f["check"] == "leaked-state" and f["subject"] != "mlx"]
    assert [(f["subject"], f["cause"]) for f in leaks] == [("test_compile.py::test_a_turns_compile_off",) * 2]
    assert "compile" in leaks[0]["message"]
    # Either way test_g fails as plain pytest runs it, and the leak says so.
    [od] = [f for f in report["findings"] if f["check"] == "order-dependent"]
    assert (od["subject"], od["cause"]) == (
        "test_compile.py::test_g_counts_traces",
        "test_compile.py::test_a_turns_compile_off",
    )
    assert code == 1 and leaks[0]["severity"] == "error"
    assert (
        "later tests failed because of it (order-dependent): test_compile.py::test_g_counts_traces"
        in leaks[0]["message"]
    )
    if policy == "restore":
        # Restored, the run passed test_g; the pass without restores is what shows it failing.
        assert (pkg["passed"], pkg["failed"]) == (7, 0)
        assert "(promote restored it after the test)" in leaks[0]["message"]
        assert pkg["pass_only_restored"] == ["test_compile.py::test_g_counts_traces"]
    else:
        assert (pkg["passed"], pkg["failed"]) == (6, 1)
        assert pkg["pass_only_restored"] == []


def test_tests_run_on_each_workers_main_thread_and_serial_tests_share_one_worker(tmp_path: Path) -> None:
    write_package(
        tmp_path,
        "pkg",
        {
            "test_par.py": """
                import pytest

                @pytest.mark.parametrize("n", range(8))
                def test_parallel(n):
                    pass

                @pytest.mark.serial
                @pytest.mark.parametrize("n", range(4))
                def test_serial(n):
                    pass
            """,
            "test_gpu.py": "def test_listed_as_serial_in_config():\n    pass\n",
        },
    )
    write_config(tmp_path, [{"name": "pkg", "path": "pkg", "workers": 2, "serial": ["test_gpu.py::*"]}])

    code, report = run_json(tmp_path)

    assert code == 0
    assert report["packages"][0]["passed"] == 13
    records = []
    for path in (tmp_path / ".promote" / "runs" / report["run"] / "pkg").rglob("results-*.json"):
        part = path.parent.name
        records += [(part, t) for t in json.loads(path.read_text())["tests"]]
    assert {t["thread_name"] for _, t in records} == {"MainThread"}
    serial = {(part, t["worker"]) for part, t in records if "serial" in t["nodeid"] or "gpu" in t["nodeid"]}
    assert serial == {("serial", "gw0")}
    assert {part for part, t in records if "parallel" in t["nodeid"]} == {"parallel"}


def test_a_test_past_its_timeout_is_failed_and_named_and_the_rest_runs(tmp_path: Path) -> None:
    write_package(
        tmp_path,
        "slowpoke",
        {
            "test_slow.py": """
                import time

                def test_before(): pass
                def test_hangs(): time.sleep(120)
                def test_after(): pass
            """
        },
    )
    write_config(tmp_path, [{"name": "slowpoke", "path": "slowpoke", "timeout_s": 2}])

    code, report = run_json(tmp_path)

    assert code == 1
    pkg = report["packages"][0]
    assert (pkg["passed"], pkg["failed"], pkg["crashed"]) == (2, 1, 0)
    timeouts = [f for f in report["findings"] if f["check"] == "timeout"]
    assert [f["subject"] for f in timeouts] == ["test_slow.py::test_hangs"]
    assert pkg["duration_s"] < 60
