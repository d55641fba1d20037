"""The Tested gate says how each package really ran, from real `promote test` runs."""

from __future__ import annotations

from pathlib import Path

from promote.config import load_config
from promote.evidence import gates
from promote.runners.suite import run_tests
from tests.helpers.packages import write_config, write_package

SERIAL = """
    import pytest

    @pytest.mark.serial
    def test_on_its_own(): pass

    def test_anywhere(): pass
"""


def test_the_serial_worker_is_mentioned_only_for_a_package_that_had_serial_tests(tmp_path: Path) -> None:
    write_package(tmp_path, "marked", {"test_m.py": SERIAL})
    write_package(tmp_path, "plain", {"test_p.py": "def test_a(): pass\ndef test_b(): pass\n"})
    write_config(
        tmp_path, [{"name": "marked", "path": "marked", "workers": 2}, {"name": "plain", "path": "plain", "workers": 2}]
    )

    run = run_tests(load_config(tmp_path, None))
    lines = gates.tested(run, None, None).evidence

    here = run.packages[0].station
    assert (
        f"marked ran on {here}, on 2 workers with the tests its `serial` setting or marker names on one worker after"
        in lines
    )
    assert f"plain ran on {here}, on 2 workers" in lines
