"""Skips that name a device count against the station inventory: real unittest tests, real MLX, `promote test`."""

from __future__ import annotations

from pathlib import Path

import pytest

from promote.runners.plugin.requirement_rules import DEFAULT_RULES, infer_skip
from tests.helpers.cli import run_json
from tests.helpers.packages import write_package

pytestmark = pytest.mark.slow
mx = pytest.importorskip("mlx.core")
if mx.metal.is_available() or mx.is_available(mx.gpu):
    pytest.skip("this machine has a GPU: its device skips do not skip", allow_module_level=True)

TESTS = """
    import unittest

    import mlx.core as mx


    def cuda_available():
        cuda = getattr(mx, "cuda", None)
        return cuda is not None and cuda.is_available()


    class TestKernels(unittest.TestCase):
        @unittest.skipIf(not mx.metal.is_available(), "Metal only")
        def test_metal_kernel(self):
            pass

        @unittest.skipUnless(cuda_available(), "requires CUDA")
        def test_cuda_kernel(self):
            pass

        def test_gpu_stream(self):
            if not mx.is_available(mx.gpu):
                self.skipTest("No GPU available")

        @unittest.skip("slow, run by hand")
        def test_plain_skip(self):
            pass

        def test_cpu(self):
            self.assertEqual(mx.add(mx.array(1), mx.array(1)).item(), 2)
"""

TRAINING = '\n[promote.stations.training]\nplatform = "darwin-arm64"\ndevices = ["metal", "cpu"]\nmemory_gb = 128\n'


def configure(root: Path, stations: str) -> None:
    write_package(root, "pkg", {"tests/test_kernels.py": TESTS})
    config = '[promote]\ntrunk = "main"\n\n[[promote.packages]]\nname = "pkg"\npath = "pkg"\n'
    (root / "promote.toml").write_text(config + stations)


def blockers(report: dict) -> dict[str, tuple[str, list[str], list[str]]]:  # type: ignore[type-arg]
    pkg = report["packages"][0]
    return {b["test"].rsplit("::", 1)[1]: (b["check"], b["requirements"], b["stations"]) for b in pkg["blockers"]}


def test_device_skips_are_blocked_against_a_cpu_only_inventory(tmp_path: Path) -> None:
    configure(tmp_path, "")

    code, report = run_json(tmp_path, "test")

    assert blockers(report) == {
        "test_metal_kernel": ("impossible-requirement", ["device:metal"], []),
        "test_cuda_kernel": ("impossible-requirement", ["device:cuda"], []),
        "test_gpu_stream": ("impossible-requirement", ["device:gpu"], []),
    }
    pkg = report["packages"][0]
    # A skip that names no device stays an ordinary skip.
    assert (pkg["passed"], pkg["skipped"], pkg["blocked"]) == (1, 1, 3)
    assert code == 1


def test_device_skips_are_station_bound_when_a_configured_station_has_the_device(tmp_path: Path) -> None:
    configure(tmp_path, TRAINING)

    code, report = run_json(tmp_path, "test")

    assert blockers(report) == {
        "test_metal_kernel": ("station-bound", ["device:metal"], ["training"]),
        "test_cuda_kernel": ("impossible-requirement", ["device:cuda"], []),
        # MLX's GPU is Metal on a Mac: a station with Metal runs it.
        "test_gpu_stream": ("station-bound", ["device:gpu"], ["training"]),
    }
    assert code == 1


def test_the_table_reads_the_device_a_skip_reason_names() -> None:
    reasons = {
        "Metal only": "device:metal",
        "metal is not available": "device:metal",
        "No GPU available": "device:gpu",
        "GPU-only test": "device:gpu",
        "requires CUDA": "device:cuda",
        "CUDA not available": "device:cuda",
        "slow, run by hand": None,
        "no network": None,
    }
    assert {r: infer_skip(r, DEFAULT_RULES) for r in reasons} == reasons
