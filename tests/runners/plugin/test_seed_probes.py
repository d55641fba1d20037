"""Print options and seeded generators (MLX, numpy, Python's `random`): each leak named at the test and resource."""

from __future__ import annotations

import pytest

from tests.runners.support import record

pytest_plugins = ["pytester"]
mx = pytest.importorskip("mlx.core")
pytest.importorskip("numpy")
if not hasattr(mx, "get_printoptions"):
    pytest.skip(f"mlx {mx.__version__} has no print options", allow_module_level=True)

SUITE = """
    import random

    import mlx.core as mx
    import numpy as np

    def test_a_sets_print_options():
        mx.set_printoptions(precision=2)

    def test_b_reprs_an_array():
        assert repr(mx.array(1.0)) == "array(1, dtype=float32)"

    def test_c_seeds_numpy():
        np.random.seed(0)

    def test_d_seeds_mlx():
        mx.random.seed(0)

    def test_e_seeds_mlx_to_the_key_already_there():
        before = mx.random.state[0].tolist()
        hi, lo = before
        mx.random.seed((hi << 32) | lo)  # MLX's key for a seed is the seed's two 32-bit words
        assert mx.random.state[0].tolist() == before

    def test_f_seeds_python():
        random.seed(0)

    def test_f2_seeds_and_sets_the_state_back():
        saved, saved_np = random.getstate(), np.random.get_state()
        random.seed(5)
        np.random.seed(5)
        random.random()
        random.setstate(saved)
        np.random.set_state(saved_np)

    def test_g_only_draws():
        np.random.rand()
        random.random()
        mx.eval(mx.random.normal((2,)))
"""

EXPECTED = {
    "test_seeds.py::test_a_sets_print_options": ("mlx.print_options", "set", "mlx.print_options[precision]: -1 -> 2"),
    "test_seeds.py::test_c_seeds_numpy": (
        "numpy.random.state",
        "seed call",
        "numpy.random.state (seed call): not called -> numpy.random.seed called",
    ),
    "test_seeds.py::test_d_seeds_mlx": (
        "mlx.random.state",
        "seed call",
        "mlx.random.state (mx.random.seed): not called -> mx.random.seed called",
    ),
    # Seeded to the very key it found: the call is the leak, though the key did not change.
    "test_seeds.py::test_e_seeds_mlx_to_the_key_already_there": (
        "mlx.random.state",
        "seed call",
        "mlx.random.state (mx.random.seed): not called -> mx.random.seed called",
    ),
    "test_seeds.py::test_f_seeds_python": (
        "random.state",
        "seed call",
        "random.state (seed call): not called -> random.seed called",
    ),
}


@pytest.mark.parametrize("policy", ["report", "restore"])
def test_print_options_and_seeding_calls_are_leaks_named_at_the_test_whatever_value_they_left(
    pytester: pytest.Pytester, policy: str
) -> None:
    pytester.makepyfile(test_seeds=SUITE)

    rec = record(pytester, "-p", "no:randomly", "--promote-leaks", policy, subprocess=True)

    found = {f.subject: f for f in rec.findings("leaked-state") if f.subject != "mlx"}
    assert sorted(found) == sorted(EXPECTED)
    leaked = {leak.test: leak for r in rec.results for leak in r.leaked}
    for test, (resource, kind, shown) in EXPECTED.items():
        assert found[test].cause == test
        assert shown in found[test].message, found[test].message
        # The resource and the kind of change, kept apart for grouping.
        assert leaked[test].kinds == ((resource, kind),)
        assert leaked[test].restored == ((resource,) if policy == "restore" else ())
    # The key a test starts from is its process's history (the clock's, unseeded): never quoted, so two runs
    # of one commit read the same.
    assert not [f.message for f in found.values() if "key[" in f.message]
    # Under `report` the next test sees the print options as the leak left them, as plain pytest does.
    outcome = rec.outcomes()["test_seeds.py::test_b_reprs_an_array"]
    assert outcome == ("failed" if policy == "report" else "passed")


def test_a_restored_seed_puts_back_the_generator_the_test_found(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_back="""
        import random

        import numpy as np

        FIRST = {}

        def test_a_remembers_the_state():
            FIRST["np"], FIRST["py"] = np.random.get_state()[1].tolist(), random.getstate()

        def test_b_seeds_elsewhere():
            np.random.seed(7)
            random.seed(7)

        def test_c_sees_the_state_from_before_b():
            assert np.random.get_state()[1].tolist() == FIRST["np"]
            assert random.getstate() == FIRST["py"]
        """
    )

    rec = record(pytester, "-p", "no:randomly", "--promote-leaks", "restore", subprocess=True)

    rec.run.assert_outcomes(passed=3)


def test_an_mlx_part_this_mlx_lacks_is_said_once_and_the_other_probes_still_run(pytester: pytest.Pytester) -> None:
    # An MLX with set_printoptions but no getter, and no get_memory_limit (as 0.32.2): made so in the
    # tested process itself, before the plugin looks.
    pytester.makeconftest("import mlx.core as mx\n\ndel mx.get_printoptions\ndel mx.get_memory_limit\n")
    pytester.makepyfile(
        test_parts="""
        import mlx.core as mx

        def test_a_sets_print_options():
            mx.set_printoptions(precision=3)

        def test_b_limits_memory():
            mx.set_memory_limit(1 << 30)

        def test_c_disables_compile():
            mx.disable_compile()
        """
    )

    rec = record(pytester, "-p", "no:randomly", subprocess=True)

    rec.run.assert_outcomes(passed=3)
    [said] = [f for f in rec.findings("leaked-state") if f.subject == "mlx"]
    assert (said.severity, said.message) == ("info", f"mlx {mx.__version__}: print options not probed")
    leaks = {f.subject: f.message for f in rec.findings("leaked-state") if f.subject != "mlx"}
    assert sorted(leaks) == ["test_parts.py::test_b_limits_memory", "test_parts.py::test_c_disables_compile"]
    assert "mlx.memory[memory_limit]" in leaks["test_parts.py::test_b_limits_memory"]
