"""The promote pytest plugin (loaded through the `pytest11` entry point, or `-p promote.runners.plugin`)."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "requires(*resources, device=None, memory_gb=None): what a test needs from the station it runs on",
    )
    config.addinivalue_line("markers", "serial: run this test in a single worker, apart from the parallel ones")
