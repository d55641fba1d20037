"""The plugin on every MLX in the declared range, in real venvs from the package index, through `promote test`.

0.32.2 has no `mx.get_memory_limit` (it came in 0.32.3); 0.26.5, the oldest `mlx[cpu]` on the index,
has neither it nor print options. A worker that fails inside pytest is reported with its cause.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.cli import run_json
from tests.helpers.packages import write_config, write_package
from tests.helpers.venvs import mlx_venv

pytestmark = pytest.mark.slow

MLX_TESTS = """
    import mlx.core as mx
    import pytest

    def test_adds():
        assert mx.add(mx.array(1), mx.array(2)).item() == 3

    def test_draws():
        mx.eval(mx.random.normal((4,)))

    def test_limits_memory():
        mx.set_memory_limit(1 << 30)

    def test_compiles():
        assert mx.compile(lambda x: x * 2)(mx.array(3)).item() == 6

    @pytest.mark.skipif(True, reason="not here")
    def test_skipped():
        pass
"""


@pytest.fixture(scope="module", params=["0.32.2", "0.26.5"])
def old_mlx(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    version = str(request.param)
    # Beside the workers' own temporary directories: one venv per version for the whole session.
    return version, mlx_venv(version, tmp_path_factory.getbasetemp().parent)


@pytest.mark.parametrize("workers", [1, 2])
def test_an_older_mlx_runs_green_with_the_right_counts_and_its_leaks_named(
    tmp_path: Path, old_mlx: tuple[str, Path], workers: int
) -> None:
    version, python = old_mlx
    write_package(tmp_path, "pkg", {"tests/test_mlx.py": MLX_TESTS})
    write_config(tmp_path, [{"name": "pkg", "path": "pkg", "workers": workers, "python": str(python)}])

    code, report = run_json(tmp_path, "test")

    pkg = report["packages"][0]
    assert (pkg["passed"], pkg["failed"], pkg["errors"], pkg["skipped"]) == (4, 0, 0, 1), report["findings"]
    assert not [f for f in report["findings"] if f["check"] == "package-error"]
    assert code == 0, report["findings"]
    # The memory limit is probed without `get_memory_limit`: read once by its setter, then followed.
    leaks = [f for f in report["findings"] if f["check"] == "leaked-state" and f["subject"] != "mlx"]
    assert [f["subject"] for f in leaks] == ["tests/test_mlx.py::test_limits_memory"]
    assert "mlx.memory[memory_limit]" in leaks[0]["message"] and "-> 1073741824" in leaks[0]["message"]
    # Whatever this MLX lacks has no setter either (print options in 0.26): nothing it has goes unprobed.
    assert not [f for f in report["findings"] if "not probed" in f["message"]], version


CONFTEST = """
    def pytest_configure(config):
        # In each process that runs tests: an xdist worker, or the one plain pytest process of workers = 1.
        if hasattr(config, "workerinput") or not config.getoption("numprocesses", default=None):
            raise AttributeError("module 'mlx.core' has no attribute 'get_memory_limit'")
"""


@pytest.mark.parametrize("workers", [1, 2])
def test_a_workers_internal_error_is_reported_with_its_cause(tmp_path: Path, workers: int) -> None:
    write_package(tmp_path, "pkg", {"conftest.py": CONFTEST, "tests/test_a.py": "def test_a():\n    pass\n"})
    write_config(tmp_path, [{"name": "pkg", "path": "pkg", "workers": workers}])

    code, report = run_json(tmp_path, "test")

    assert code == 1
    errors = [f["message"] for f in report["findings"] if f["check"] == "package-error"]
    assert errors, report["findings"]
    assert "INTERNALERROR AttributeError: module 'mlx.core' has no attribute 'get_memory_limit'" in errors[0]
    assert "no active workers" not in errors[0]
