"""SARIF results and GitHub annotations place a finding by its `location` field, never by its text."""

from __future__ import annotations

from typing import Any

from promote.cli.annotations import workflow_commands
from promote.cli.sarif import sarif
from promote.core.findings import Finding, Location

# Text that looks like a place: the message starts `path:line:`, the subject is a path with a test.
LOOKS_PLACED = Finding("package-error", "error", "tests/foo.py::test_x", "foo.py:12: something broke")


def doc(*findings: Finding) -> dict[str, Any]:
    return {"findings": [f.to_json() for f in findings]}


def test_a_finding_without_location_has_no_physical_location_whatever_its_text_names() -> None:
    (result,) = sarif(doc(LOOKS_PLACED))["runs"][0]["results"]

    assert "locations" not in result
    assert result["message"] == {"text": "tests/foo.py::test_x: foo.py:12: something broke"}
    assert workflow_commands(doc(LOOKS_PLACED)) == [
        "::error title=promote package-error::tests/foo.py::test_x: foo.py:12: something broke"
    ]


def test_a_located_finding_is_placed_at_its_path_and_line_and_without_a_line_at_its_file_only() -> None:
    at_line = Finding("ci-workflow-invalid", "error", "w.yml", "bad", location=Location(".github/workflows/w.yml", 5))
    at_file = Finding("order-dependent", "error", "tests/t.py::test_b", "fails", location=Location("pkg/tests/t.py"))

    results = sarif(doc(at_line, at_file))["runs"][0]["results"]

    assert [r["locations"] for r in results] == [
        [
            {
                "physicalLocation": {
                    "artifactLocation": {"uri": ".github/workflows/w.yml", "uriBaseId": "%SRCROOT%"},
                    "region": {"startLine": 5},
                }
            }
        ],
        [{"physicalLocation": {"artifactLocation": {"uri": "pkg/tests/t.py", "uriBaseId": "%SRCROOT%"}}}],
    ]
    assert workflow_commands(doc(at_line, at_file)) == [
        "::error file=.github/workflows/w.yml,line=5,title=promote ci-workflow-invalid::w.yml: bad",
        "::error file=pkg/tests/t.py,title=promote order-dependent::tests/t.py::test_b: fails",
    ]
