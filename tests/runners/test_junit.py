"""The JUnit XML promote writes per package: what CI servers read, so it must always parse."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from promote.runners.junit import write_junit, xml_text
from promote.runners.plugin.records import TestRecord
from promote.runners.summary import PackageResult

HOSTILE = 'a < b && c > "d"\tend\r\n\x1b[31mred\x1b[0m \x00 \ud800 \ufffe ok: é ✓ \U0001d518'
SHOWN = 'a < b && c > "d"\tend\r\n\\x1b[31mred\\x1b[0m \\x00 \\xd800 \\xfffe ok: é ✓ \U0001d518'


def record(nodeid: str, outcome: str, **extra: object) -> TestRecord:
    return TestRecord(nodeid, outcome, 0.25, "gw0", 1, "MainThread", 1, **extra)  # type: ignore[arg-type]


def result(tests: tuple[TestRecord, ...], crashed: tuple[str, ...] = ()) -> PackageResult:
    return PackageResult("pkg & co", Path("."), 'local "dev"', 1, 1.0, tests, crashed, (), Path("."))


def parse(path: Path) -> ET.Element:
    suite = ET.parse(path).getroot().find("testsuite")
    assert suite is not None
    return suite


def test_every_outcome_becomes_a_testcase_with_counts(tmp_path: Path) -> None:
    tests = (
        record("tests/test_a.py::test_ok", "passed"),
        record("tests/test_a.py::test_bad", "failed", longrepr="assert 1 == 2"),
        record("tests/test_a.py::test_err", "error", longrepr="fixture broke"),
        record("tests/test_a.py::test_skip", "skipped", skip_reason="no metal"),
        record("tests/test_a.py::test_xf", "xfailed", skip_reason="known"),
        record("tests/test_b.py::Sub::test_loop (i=1)", "failed", parent="tests/test_b.py::Sub::test_loop"),
    )

    suite = parse(write_junit(result(tests, crashed=("tests/test_c.py::test_dies",)), tmp_path / "junit.xml"))

    assert {k: suite.get(k) for k in ("name", "hostname", "tests", "failures", "errors", "skipped", "time")} == {
        "name": "pkg & co",
        "hostname": 'local "dev"',
        "tests": "7",
        "failures": "2",
        "errors": "2",
        "skipped": "2",
        "time": "1.500",
    }
    cases = suite.findall("testcase")
    assert [(c.get("classname"), c.get("name")) for c in cases] == [
        ("tests.test_a", "test_ok"),
        ("tests.test_a", "test_bad"),
        ("tests.test_a", "test_err"),
        ("tests.test_a", "test_skip"),
        ("tests.test_a", "test_xf"),
        ("tests.test_b", "Sub::test_loop (i=1)"),
        ("tests.test_c", "test_dies"),
    ]
    assert [[child.tag for child in c] for c in cases] == [
        [], ["failure"], ["error"], ["skipped"], ["skipped"], ["failure"], ["error"]
    ]  # fmt: skip
    assert cases[0].get("time") == "0.250000" and cases[-1].get("time") is None
    failure, skipped, crash = cases[1][0], cases[3][0], cases[6][0]
    assert (failure.get("message"), failure.text) == ("failed", "assert 1 == 2")
    assert (skipped.get("message"), skipped.text) == ("no metal", "no metal")
    assert crash.get("message") == "worker crashed"
    assert crash.text == "the worker died while running tests/test_c.py::test_dies"
    # A failure without text still says it failed.
    assert cases[5][0].get("message") == "failed" and cases[5][0].text is None


def test_text_xml_cannot_hold_is_escaped_visibly_and_the_file_parses(tmp_path: Path) -> None:
    tests = (record(f"t.py::test_x[{HOSTILE}]", "failed", longrepr=HOSTILE, skip_reason=HOSTILE),)

    suite = parse(write_junit(result(tests), tmp_path / "junit.xml"))

    [case] = suite.findall("testcase")
    assert case.get("name") == f"test_x[{SHOWN}]"
    assert case[0].get("message") == SHOWN
    # Character data keeps tabs and newlines; XML normalises a bare \r\n to \n on reading.
    assert case[0].text == SHOWN.replace("\r\n", "\n")


def test_an_empty_package_is_an_empty_suite(tmp_path: Path) -> None:
    suite = parse(write_junit(result(()), tmp_path / "junit.xml"))
    assert (suite.get("tests"), suite.findall("testcase")) == ("0", [])


@pytest.mark.parametrize(
    ("value", "text", "attribute"),
    [
        ("plain", "plain", "plain"),
        ("<&>", "&lt;&amp;&gt;", "&lt;&amp;&gt;"),
        ('say "hi"\n', 'say "hi"\n', "say &quot;hi&quot;&#10;"),
        ("\x07bell", "\\x07bell", "\\x07bell"),
    ],
)
def test_xml_text_escapes_for_text_and_attributes(value: str, text: str, attribute: str) -> None:
    assert (xml_text(value), xml_text(value, attribute=True)) == (text, attribute)
