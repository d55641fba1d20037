"""SARIF results and GitHub annotations place a finding by its `location` field, never by its text."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest

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


@pytest.mark.parametrize(
    ("path", "uri"),
    [
        ("pkg/tests/c#1/test_hash.py", "pkg/tests/c%231/test_hash.py"),
        ("pkg/tests/100%/test_p.py", "pkg/tests/100%25/test_p.py"),
        ("pkg/tests/sub dir/test_s.py", "pkg/tests/sub%20dir/test_s.py"),
        ("pkg/tests/q?x/tést.py", "pkg/tests/q%3Fx/t%C3%A9st.py"),
    ],
)
def test_a_path_that_is_not_a_uri_is_percent_encoded_and_decodes_back(path: str, uri: str) -> None:
    placed = Finding("order-dependent", "error", f"{path}::test_a", "fails", location=Location(path))

    (result,) = sarif(doc(placed))["runs"][0]["results"]

    shown = result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
    assert shown == uri
    parts = urlsplit(shown)
    assert (parts.scheme, parts.query, parts.fragment) == ("", "", "") and unquote(parts.path) == path
    # RFC 3986's path characters only: unreserved, sub-delims, ':', '@', '/' and percent-encodings.
    assert re.fullmatch(r"(?:[A-Za-z0-9\-._~!$&'()*+,;=:@/]|%[0-9A-F]{2})*", shown)
