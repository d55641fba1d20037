"""Every CI finding points at the workflow file it is about, as a field (SARIF and annotations read it)."""

from __future__ import annotations

from pathlib import Path

from promote.checks.ci import survey_ci
from promote.core.findings import Location
from tests.checks.test_ci import BROKEN_YML, CI_YML, COLLECTED, SOURCES, UNIT_YAML, workspace


def test_filtered_unreachable_and_invalid_workflows_are_located_at_their_files(tmp_path: Path) -> None:
    files = {
        **SOURCES,
        ".github/workflows/ci.yml": CI_YML,
        ".github/workflows/unit.yaml": UNIT_YAML,
        ".github/workflows/broken.yml": BROKEN_YML,
    }

    report = survey_ci(tmp_path, workspace(tmp_path, files), COLLECTED)

    ci, unit = Location(".github/workflows/ci.yml"), Location(".github/workflows/unit.yaml")
    assert {f.subject: (f.check, f.location) for f in report.findings} == {
        ".github/workflows/broken.yml": ("ci-workflow-invalid", Location(".github/workflows/broken.yml", 5)),
        ".github/workflows/ci.yml: job mac": ("ci-unreachable-runner", ci),
        ".github/workflows/ci.yml: job upstream": ("ci-unreachable-runner", ci),
        ".github/workflows/ci.yml: job tests: --ignore=tests/test_stream.py": ("ci-filtered", ci),
        '.github/workflows/ci.yml: job tests: -k "not device"': ("ci-filtered", ci),
        ".github/workflows/unit.yaml: job unit (gpu-box)": ("ci-unreachable-runner", unit),
    }


def test_tests_no_job_covers_name_the_workflows_directory_and_have_no_location(tmp_path: Path) -> None:
    workflow = "on: push\njobs:\n  t:\n    runs-on: ubuntu-latest\n    steps:\n      - run: echo no tests\n"
    files = {**SOURCES, ".github/workflows/ci.yml": workflow}

    report = survey_ci(tmp_path, workspace(tmp_path, files), COLLECTED)

    assert [(f.check, f.subject, f.location) for f in report.findings] == [("ci-filtered", ".github/workflows", None)]
