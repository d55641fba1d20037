"""Both leak policies end to end: random draws are no leak, restores hide nothing, leaks grouped by what changed.

Real `promote test` runs (real pytest processes, MLX on the CPU), as a user types them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from promote import config
from promote.evidence import gates
from promote.runners.suite import run_tests
from tests.helpers.cli import run
from tests.helpers.packages import write_config, write_package

pytestmark = pytest.mark.slow
pytest.importorskip("mlx.core")

RANDOM = {
    "test_random.py": """
        import mlx.core as mx
        import mlx.nn as nn

        def test_a_seeded():
            mx.random.seed(3)

        def test_c_two_draws():
            mx.random.uniform(shape=(2,))
            mx.random.normal(shape=(3,))

        def test_d_model():
            mx.eval(nn.Linear(4, 4).parameters())

        def test_e_lazy():
            mx.random.normal(shape=(2,))
    """,
}

# test_a works in a scratch folder, deletes it and leaves the process in it: plain pytest then fails
# test_b, which reads a file relative to where pytest started.
SCRATCH = {
    "test_a_scratch.py": """
        import os
        import shutil
        import tempfile

        def test_a_works_in_a_scratch_dir():
            scratch = tempfile.mkdtemp()
            os.chdir(scratch)
            shutil.rmtree(scratch)

        def test_a2_plain():
            pass
    """,
    "test_b_data.py": """
        from pathlib import Path

        def test_b_reads_its_data():
            assert Path("data.txt").read_text() == "hello\\n"

        def test_c_plain():
            pass
    """,
    "data.txt": "hello\n",
}


def stored_run(root: Path, output: str) -> dict:  # type: ignore[type-arg]
    """The run.json of the run whose `results:` line `output` printed."""
    results = next(line.removeprefix("results: ") for line in output.splitlines() if line.startswith("results: "))
    return json.loads((Path(results) / "run.json").read_text())  # type: ignore[no-any-return]


@pytest.mark.parametrize("policy", ["restore", "report"])
def test_only_the_seeding_test_is_a_finding_and_the_draws_are_counted_once(tmp_path: Path, policy: str) -> None:
    write_package(tmp_path, "pkg", RANDOM)
    write_config(tmp_path, [{"name": "pkg", "path": "pkg", "leaks": policy}])

    result = run(tmp_path, "test")

    assert result.exit_code == 0, result.output
    stored = stored_run(tmp_path, result.stdout)
    [leak] = stored["findings"]
    assert (leak["check"], leak["severity"], leak["subject"]) == (
        "leaked-state",
        "warning",
        "test_random.py::test_a_seeded",
    )
    assert "mlx.random.state (mx.random.seed): not called -> mx.random.seed called" in leak["message"]
    assert "***" not in result.stdout and "no later test failed because of it" in leak["message"]
    assert stored["packages"][0]["random_draws"] == 3
    left = "the key put back after each" if policy == "restore" else "the generator left as they drew it"
    draws = [line for line in result.stdout.splitlines() if "only drew" in line]
    assert draws == [f"  pkg: 3 test(s) only drew from MLX's random generator, no leak ({left})"]
    assert result.stdout.rstrip().endswith("all green")


@pytest.mark.parametrize("policy", ["restore", "report"])
def test_a_test_that_leaves_the_process_in_a_deleted_folder_is_named_and_nothing_is_green(
    tmp_path: Path, policy: str
) -> None:
    write_package(tmp_path, "pkg", SCRATCH)
    path = write_config(tmp_path, [{"name": "pkg", "path": "pkg", "leaks": policy}])

    result = run_tests(config.load(path))

    [pkg] = result.packages
    assert not result.green
    victim, polluter = "test_b_data.py::test_b_reads_its_data", "test_a_scratch.py::test_a_works_in_a_scratch_dir"
    [od] = [f for f in result.findings if f.check == "order-dependent"]
    assert (od.severity, od.subject, od.cause) == ("error", victim, polluter)
    [leak] = [f for f in result.findings if f.check == "leaked-state"]
    assert (leak.severity, leak.subject) == ("error", polluter)
    assert f"later tests failed because of it (order-dependent): {victim}" in leak.message
    gate = gates.tested(result, None, None)
    assert gate.status == "fail"
    if policy == "restore":
        # The run itself passed everything: only the pass without restores shows what plain pytest sees.
        assert (pkg.passed, pkg.failed, pkg.hidden) == (4, 0, (victim,))
        assert od.message.startswith("passes only because promote restored state: fails after " + polluter)
        assert f"pkg: 1 test passes only because promote restored leaked state: `{victim}`" in gate.evidence
    else:
        assert (pkg.passed, pkg.failed, pkg.hidden) == (3, 1, ())
        assert "pkg: 1 failed" in gate.evidence


SEEDERS = 12
GROUPED = {
    "test_group.py": "import os\nimport mlx.core as mx\n\n"
    + "".join(f"def test_seed_{i:02d}():\n    mx.random.seed(0)\n\n" for i in range(SEEDERS))
    + "".join(f"def test_sets_{c}():\n    os.environ['LEAKY_FLAG'] = '1'\n\n" for c in "xyz")
    + "def test_wants_it_unset():\n    assert 'LEAKY_FLAG' not in os.environ\n",
}


def test_leaks_are_grouped_by_what_changed_and_say_whether_a_later_test_failed(tmp_path: Path) -> None:
    write_package(tmp_path, "pkg", GROUPED)
    path = write_config(tmp_path, [{"name": "pkg", "path": "pkg", "leaks": "restore"}])

    result = run_tests(config.load(path))

    leaks = [f for f in result.findings if f.check == "leaked-state"]
    assert len(leaks) == 2, leaks
    seeded, flagged = leaks
    assert (seeded.severity, seeded.subject) == ("warning", "test_group.py::test_seed_00")
    named = ", ".join(f"test_group.py::test_seed_{i:02d}" for i in range(10))
    assert seeded.message.startswith(f"12 tests ({named} and 2 more) changed global state and did not put it back")
    assert seeded.message.endswith("(promote restored it after the test); no later test failed because of it")
    assert seeded.cause == f"{named} and 2 more"
    assert flagged.severity == "error"
    assert flagged.message.startswith("3 tests (test_group.py::test_sets_x, test_group.py::test_sets_y, ")
    assert "os.environ[LEAKY_FLAG]: <unset> -> '1' (promote restored it after the test)" in flagged.message
    [od] = [f for f in result.findings if f.check == "order-dependent"]
    assert od.subject == "test_group.py::test_wants_it_unset" and od.cause is not None
    # Each of the three makes it fail on its own: each is named.
    assert od.cause == "test_group.py::test_sets_x, test_group.py::test_sets_y, test_group.py::test_sets_z"
    assert flagged.message.endswith(
        f"later tests failed because of it (order-dependent): {od.subject} (after {od.cause})"
    )


VALUED = {
    "test_valued.py": "import os\nimport mlx.core as mx\n\n"
    + "".join(f"def test_seed_{i:02d}():\n    mx.random.seed({i})\n\n" for i in range(15))
    + "".join(f"def test_mode_{c}():\n    os.environ['APP_MODE'] = '{c}'\n\n" for c in "ab"),
}


@pytest.mark.parametrize("policy", ["restore", "report"])
def test_leaks_are_grouped_by_the_state_changed_not_by_the_value_left_behind(tmp_path: Path, policy: str) -> None:
    write_package(tmp_path, "pkg", VALUED)
    path = write_config(tmp_path, [{"name": "pkg", "path": "pkg", "leaks": policy}])

    result = run_tests(config.load(path))

    leaks = [f for f in result.findings if f.check == "leaked-state"]
    # One change a maintainer makes per resource: fifteen seeds are one finding, two values of one variable another.
    assert len(leaks) == 2, [f.message for f in leaks]
    # Grouped in collection order, so two runs of one commit list them alike.
    seeded, moded = leaks
    assert seeded.message.startswith("15 tests (test_valued.py::test_seed_00, ")
    assert "and 5 more) changed global state" in seeded.message
    # Fifteen different seeds read as the one call they share, never as the seeds or keys they left.
    assert "mlx.random.state (mx.random.seed): not called -> mx.random.seed called" in seeded.message, seeded.message
    assert moded.message.startswith("2 tests (test_valued.py::test_mode_a, test_valued.py::test_mode_b) ")
    if policy == "restore":
        assert "os.environ[APP_MODE]: <unset> -> 2 values ('a', 'b')" in moded.message
    else:
        # Under report the second test finds the first one's value: before and after both differ.
        assert "os.environ[APP_MODE]: 2 values (<unset>, 'a') -> 2 values ('a', 'b')" in moded.message
