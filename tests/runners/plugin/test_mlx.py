"""Real MLX (CPU): stream provenance across threads, and leaked MLX state named at its cause."""

from __future__ import annotations

import threading

import pytest

from promote.core.findings import Location
from tests.runners.support import record

pytest_plugins = ["pytester"]
mx = pytest.importorskip("mlx.core")

SHARED_STREAM = """
    import threading
    from concurrent.futures import ThreadPoolExecutor

    import mlx.core as mx
    import pytest

    @pytest.fixture(scope="session")
    def made_on_a_helper():
        box = {}
        maker = threading.Thread(target=lambda: box.update(s=mx.new_stream(mx.cpu)), name="stream-maker")
        maker.start()
        maker.join()
        return box["s"]

    @pytest.fixture(scope="session")
    def made_on_main():
        return mx.new_stream(mx.cpu)

    def test_first_user(made_on_a_helper, made_on_main):
        pass

    def test_unrelated():
        pass

    def test_uses_helper_stream(made_on_a_helper):
        mx.eval(mx.add(mx.array(1), mx.array(2), stream=made_on_a_helper))

    def test_uses_main_stream_from_a_pool(made_on_main):
        with ThreadPoolExecutor(1) as pool:
            pool.submit(lambda: mx.eval(mx.ones(2, stream=made_on_main))).result()
"""


def _streams_are_per_thread() -> bool:
    """Whether this MLX refuses a stream made on another thread (older releases, 0.26 among them, do not)."""
    box = {}
    maker = threading.Thread(target=lambda: box.update(s=mx.new_stream(mx.cpu)))
    maker.start()
    maker.join()
    try:
        mx.eval(mx.ones(1, stream=box["s"]))
    except RuntimeError:
        return True
    return False


@pytest.mark.skipif(not _streams_are_per_thread(), reason=f"mlx {mx.__version__} shares streams across threads")
def test_cross_thread_stream_names_the_test_whose_fixture_made_the_stream(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_streams=SHARED_STREAM)

    rec = record(pytester, subprocess=True)

    rec.run.assert_outcomes(passed=2, failed=2)
    found = {f.subject: f for f in rec.findings("cross-thread-stream")}
    assert set(found) == {
        "test_streams.py::test_uses_helper_stream",
        "test_streams.py::test_uses_main_stream_from_a_pool",
    }
    assert {f.cause for f in found.values()} == {"test_streams.py::test_first_user"}
    # Each at the failing test's def, relative to the rootdir (the runner makes it relative to the repository).
    source = (pytester.path / "test_streams.py").read_text().splitlines()
    assert {f.subject: f.location for f in found.values()} == {
        f"test_streams.py::{name}": Location("test_streams.py", source.index(f"def {name}({arg}):") + 1)
        for name, arg in (
            ("test_uses_helper_stream", "made_on_a_helper"),
            ("test_uses_main_stream_from_a_pool", "made_on_main"),
        )
    }
    helper = found["test_streams.py::test_uses_helper_stream"].message
    assert "Stream(cpu, 1)" in helper
    assert "fixture 'made_on_a_helper' during setup of test_streams.py::test_first_user" in helper
    assert "thread 'stream-maker'" in helper and "had already exited" in helper
    pooled = found["test_streams.py::test_uses_main_stream_from_a_pool"].message
    assert "thread 'MainThread'" in pooled and "was still running" in pooled
    streams = {s.index: s for s in rec.results[0].streams}
    assert (streams[1].thread_name, streams[1].fixture, streams[1].phase) == (
        "stream-maker",
        "made_on_a_helper",
        "setup",
    )


PHASES = """
    import mlx.core as mx
    import pytest

    @pytest.fixture
    def made_in_teardown():
        yield
        mx.new_stream(mx.cpu)

    def test_makes_one_in_its_body(made_in_teardown):
        mx.new_stream(mx.cpu)
"""


def test_each_stream_records_the_phase_it_was_made_in(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_phases=PHASES)

    rec = record(pytester, subprocess=True)

    rec.run.assert_outcomes(passed=1)
    made = sorted((s.index, s.phase, s.created_by) for s in rec.results[0].streams if s.phase != "default")
    test = "test_phases.py::test_makes_one_in_its_body"
    assert [(phase, by) for _, phase, by in made] == [("call", test), ("teardown", test)]


COMPILE = """
    import mlx.core as mx

    def test_a_turns_compile_off():
        mx.disable_compile()

    def test_b():
        pass

    def test_c():
        pass

    def test_d():
        pass

    def test_e():
        pass

    def test_f():
        pass

    def test_g_compile_is_on():
        traces = []

        def double(x):
            traces.append(1)
            return x * 2

        fn = mx.compile(double)
        for _ in range(3):
            mx.eval(fn(mx.array([1.0])))
        assert len(traces) == 1
"""


@pytest.mark.parametrize(("policy", "later"), [("restore", "passed"), ("report", "failed")])
def test_disabled_compile_six_tests_earlier_is_named_as_the_cause(
    pytester: pytest.Pytester, policy: str, later: str
) -> None:
    pytester.makepyfile(test_compile=COMPILE)

    rec = record(pytester, "--promote-leaks", policy, subprocess=True)

    tests = rec.tests()
    assert (
        tests["test_compile.py::test_g_compile_is_on"].index - tests["test_compile.py::test_a_turns_compile_off"].index
        == 6
    )
    assert rec.outcomes()["test_compile.py::test_g_compile_is_on"] == later
    [leak] = rec.findings("leaked-state")
    assert (leak.subject, leak.cause) == ("test_compile.py::test_a_turns_compile_off",) * 2
    assert "mlx.compile_enabled: True -> False" in leak.message


def test_default_stream_random_state_and_cache_limit_are_restored(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_state="""
        import mlx.core as mx

        def test_changes_everything():
            mx.set_default_stream(mx.new_stream(mx.cpu))
            mx.random.seed(7)
            mx.set_cache_limit(1234)

        def test_sees_it_back():
            assert repr(mx.default_stream(mx.cpu)) == "Stream(Device(cpu, 0), 0)"
            assert mx.random.state[0].tolist() != mx.random.key(7).tolist()
            previous = mx.set_cache_limit(1234)
            mx.set_cache_limit(previous)
            assert previous != 1234
        """
    )

    rec = record(pytester, "--promote-leaks", "restore", subprocess=True)

    rec.run.assert_outcomes(passed=2)
    [leak] = rec.findings("leaked-state")
    assert leak.subject == "test_state.py::test_changes_everything"
    assert "mlx.default_stream[cpu]: Stream(Device(cpu, 0), 0) -> Stream(Device(cpu, 0), 1)" in leak.message
    assert "mlx.random.state (mx.random.seed): not called -> mx.random.seed called" in leak.message
    assert "mlx.memory[cache_limit]:" in leak.message and "-> 1234" in leak.message


RANDOM = """
    from functools import partial

    import mlx.core as mx
    import mlx.nn as nn

    seen = {}

    def test_a_draws():
        seen["key"] = mx.random.state[0].tolist()
        mx.random.normal((4,))
        mx.random.uniform(shape=(2,))
        nn.Linear(3, 3)

    def test_b_draws_through_a_compiled_sampler():
        assert mx.random.state[0].tolist() == seen["key"]

        @partial(mx.compile, inputs=mx.random.state, outputs=mx.random.state)
        def sample(logits):
            return mx.random.categorical(logits)

        for _ in range(3):
            sample(mx.zeros((4,)))
        assert mx.random.state[0].tolist() != seen["key"]

    def test_b2_seeds_and_seeds_back_to_the_key_it_found():
        hi, lo = mx.random.state[0].tolist()
        mx.random.seed(5)
        mx.random.normal((2,))
        mx.random.seed((hi << 32) | lo)
        mx.random.normal((2,))

    def test_c_sees_the_key_from_before_the_draws():
        assert mx.random.state[0].tolist() == seen["key"]

    def test_d_seeds():
        mx.random.seed(7)

    def test_e_replaces_the_state():
        if isinstance(mx.random.state, list):  # MLX versions whose state is a plain list
            mx.random.state[0] = mx.random.key(7)
        else:  # MLX 0.32's state object takes no assignment: rebinding is how a test replaces it
            mx.random.state = [mx.random.key(7)]

    def test_f_sees_the_generator_as_it_was():
        assert not isinstance(mx.random.state, list) or len(mx.random.state) == 1
        assert mx.random.state[0].tolist() == seen["key"]
"""


def test_drawing_random_numbers_is_restored_quietly_and_seeding_or_replacing_is_a_leak(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_random=RANDOM)

    rec = record(pytester, "--promote-leaks", "restore", subprocess=True)

    rec.run.assert_outcomes(passed=7)
    found = rec.findings("leaked-state")
    assert [f.subject for f in found] == ["test_random.py::test_d_seeds", "test_random.py::test_e_replaces_the_state"]
    assert "mlx.random.state (mx.random.seed): not called -> mx.random.seed called" in found[0].message
    assert "(attribute rebound)" in found[1].message or "(key not from a draw)" in found[1].message
    assert all(f.message.count("mlx.random.state") == 1 for f in found)
    # The three tests that only drew (one between seeding and seeding back) had the key put back, counted.
    assert rec.results[0].random_draws_restored == 3


def test_a_key_is_told_from_a_draw_by_the_successor_chain_mlx_advances() -> None:
    from promote.runners.plugin.mlx_probes import MlxProbes
    from promote.runners.plugin.mlx_random import RandomSnapshot

    probes = MlxProbes(mx)
    try:
        tracker = probes.random
        start = tracker.snapshot()
        # By value, not by the wrappers' notes: what a compiled sampler leaves behind.
        drawn = mx.random.split(mx.random.split(start.key)[0])[0]
        assert tracker.drew_only(start, RandomSnapshot(start.state, drawn, start.seeds))
        assert not tracker.drew_only(start, RandomSnapshot(start.state, mx.random.key(7), start.seeds))
        # Seeded: a leak, unless the key is back on the chain (seeded back to the key it found, then drew).
        assert not tracker.drew_only(start, RandomSnapshot(start.state, mx.random.key(7), start.seeds + 1))
        assert tracker.drew_only(start, RandomSnapshot(start.state, drawn, start.seeds + 1))
        assert not tracker.drew_only(start, RandomSnapshot([drawn], drawn, start.seeds))
        # Through the wrapped drawing functions: followed by identity alone.
        mx.random.normal((2,))
        mx.random.bernoulli()
        after = tracker.snapshot()
        assert after.key is not start.key and tracker._follow(after.key, start.key) is start.key
    finally:
        probes.uninstall()


def test_without_mlx_nothing_is_said_about_mlx_and_the_other_probes_still_run(pytester: pytest.Pytester) -> None:
    pytester.makeconftest("import sys\nsys.modules['mlx'] = None  # as if mlx were not installed\n")
    pytester.makepyfile(
        test_plain="""
        import os

        def test_leaks():
            os.environ["SANCTUM_MLX_DFLASH2"] = "0"

        def test_other():
            pass
        """
    )

    rec = record(pytester, subprocess=True)

    rec.run.assert_outcomes(passed=2)
    # A package without MLX has no MLX state to leak: no line about it.
    found = rec.findings("leaked-state")
    assert [(f.severity, f.subject) for f in found] == [("warning", "test_plain.py::test_leaks")]
    assert rec.results[0].mlx is None and rec.results[0].streams == ()


def test_a_broken_mlx_install_is_said_once_and_the_other_probes_still_run(pytester: pytest.Pytester) -> None:
    # An `mlx` that is there but cannot load its core (a missing shared library, a wrong wheel).
    pytester.makepyfile(**{"mlx/__init__.py": "", "mlx/core.py": "raise ImportError('libmlx.so: cannot open')\n"})
    pytester.makepyfile(test_plain="def test_other():\n    pass\n")

    rec = record(pytester, subprocess=True)

    rec.run.assert_outcomes(passed=1)
    (found,) = rec.findings("leaked-state")
    assert (found.severity, found.subject) == ("info", "mlx")
    assert found.message == (
        "MLX probes are off: mlx is not importable here (ImportError: libmlx.so: cannot open); "
        "the other probes still run"
    )


def test_mlx_functions_are_put_back_when_the_session_ends(pytester: pytest.Pytester) -> None:
    originals = (
        mx.new_stream,
        mx.set_cache_limit,
        mx.set_wired_limit,
        mx.enable_compile,
        mx.disable_compile,
        mx.random.seed,
        mx.random.normal,
    )
    pytester.makepyfile(
        test_wrapped="""
        import mlx.core as mx

        def test_wrapped():
            assert mx.new_stream.__wrapped__ is not None
            assert mx.disable_compile.__wrapped__ is not None
            assert mx.random.seed.__wrapped__ is not None and mx.random.normal.__wrapped__ is not None
        """
    )

    rec = record(pytester)

    rec.run.assert_outcomes(passed=1)
    now = (mx.new_stream, mx.set_cache_limit, mx.set_wired_limit, mx.enable_compile, mx.disable_compile)
    assert (*now, mx.random.seed, mx.random.normal) == originals
