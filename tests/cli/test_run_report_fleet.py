"""The terminal report of a package run over stations: where each test ran, said once and only when it tells."""

from __future__ import annotations

from pathlib import Path

from promote.cli.run_report import run_report
from promote.runners.plugin.records import TestRecord
from promote.runners.rerun_verdict import Verdict
from promote.runners.suite import RunResult
from promote.runners.summary import PackageResult


def result(fleet: tuple[str, ...], tmp_path: Path) -> RunResult:
    tests = (
        TestRecord("t.py::test_bad", "failed", 0.1, "gw0", 1, "MainThread", 1),
        TestRecord("t.py::test_good", "passed", 0.1, "gw1", 1, "MainThread", 1),
    )
    placed = (("t.py::test_bad", fleet[0]), ("t.py::test_good", fleet[-1]))
    verdict = Verdict("t.py::test_bad", "genuine", (), 2, ran_on=fleet[0], passes_on=fleet[1:])
    pkg = PackageResult(
        "pkg", tmp_path, "training (ssh bert@training.local)" if len(fleet) == 1 else "fleet: ...", 1, 1.0, tests,
        (), (), tmp_path, counts={"passed": 1, "failed": 1}, verdicts=(verdict,), placed=placed, fleet=fleet,
    )  # fmt: skip
    return RunResult("r1", "2026-12-03T00:00:00", "2026-12-03T00:00:01", (pkg,), tmp_path)


def test_a_fleet_says_where_each_test_ran_and_where_a_failure_passes_alone(tmp_path: Path) -> None:
    text = run_report(result(("training", "mini"), tmp_path))

    assert "  pkg: ran on mini (1 test), training (1 test)" in text.splitlines()
    assert "  pkg: t.py::test_bad (failed on training; passes alone on mini)" in text.splitlines()


def test_a_fleet_of_one_says_its_station_once_in_the_table(tmp_path: Path) -> None:
    text = run_report(result(("training",), tmp_path))

    assert "training (ssh bert@training.local)" in text
    assert "ran on" not in text and " on training" not in text
    assert "  pkg: t.py::test_bad (failed)" in text.splitlines()
