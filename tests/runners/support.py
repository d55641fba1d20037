"""Run a pytester suite with the promote plugin recording, and read back what it wrote."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import pytest

from promote.core.findings import Finding
from promote.runners.plugin.records import TestRecord, WorkerResults, read_all_results


class Recorded(NamedTuple):
    """A pytester run and the results files its processes wrote."""

    run: pytest.RunResult
    results: list[WorkerResults]

    def tests(self) -> dict[str, TestRecord]:
        """Every recorded test (and subtest) by id."""
        return {t.nodeid: t for r in self.results for t in r.tests}

    def outcomes(self) -> dict[str, str]:
        """Test id -> outcome word."""
        return {k: t.outcome for k, t in self.tests().items()}

    def findings(self, check: str) -> list[Finding]:
        """The findings of one check, from every worker."""
        return [f for r in self.results for f in r.findings if f.check == check]


def out_dir(pytester: pytest.Pytester) -> Path:
    """Where the runs below ask the plugin to write."""
    return pytester.path / "out"


def record(pytester: pytest.Pytester, *args: str, subprocess: bool = False) -> Recorded:
    """Run pytest on the files in `pytester.path` with `--promote-out`, and read the results."""
    argv = ("-p", "no:cacheprovider", "--promote-out", str(out_dir(pytester)), *args)
    run = pytester.runpytest_subprocess(*argv) if subprocess else pytester.runpytest(*argv)
    return Recorded(run, read_all_results(out_dir(pytester)))
