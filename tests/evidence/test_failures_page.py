"""Failures by name: a real package with six failing tests and 86 tests that leak the same state, audited by promote;
the page names every failing test with its cause, folds the long finding, and the JSON keeps every id."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from promote.evidence import pages as evidence
from promote.evidence import render as render_pages
from tests.helpers.cli import run
from tests.helpers.evidence import document
from tests.helpers.gitrepos import commit, git, make_fleet
from tests.helpers.packages import write_package

SUITE = """
    import os

    import pytest

    @pytest.mark.parametrize("n", range(6))
    def test_red(n):
        assert n * 10 == 7, f"case {n} is wrong"

    @pytest.mark.parametrize("n", range(86))
    def test_leaks(n):
        os.environ["LEAKY_SWITCH"] = "on"
"""


@pytest.mark.slow
def test_six_failures_by_name_and_an_86_id_finding_folded(tmp_path: Path) -> None:
    fleet = make_fleet(tmp_path, names=("origin",))
    write_package(fleet.work, "packages/app", {"tests/test_app.py": SUITE})
    fleet.config('max_reruns = 20\n[[promote.packages]]\nname = "app"\npath = "packages/app"\nleaks = "restore"\n')
    commit(fleet.work, "app")
    git(fleet.work, "push", "-q", "origin", "main")

    result = run(fleet.work, "audit", "--json")

    assert result.exit_code == 1, result.output
    report = json.loads(result.stdout)
    doc = json.loads(Path(report["pages"]["json"]).read_text())
    jsonschema.validate(doc, evidence.schema())
    md = Path(report["pages"]["md"]).read_text()
    html = Path(report["pages"]["html"]).read_text()
    red = [f"tests/test_app.py::test_red[{n}]" for n in range(6)]
    [group] = doc["failures"]
    assert group["package"] == "app"
    # Six failures through the same line are one cause: one entry under the first, every id in its group.
    [entry] = group["tests"]
    assert entry["test"] == red[0] and entry["group"] == red
    assert entry["cause"] == "AssertionError at tests/test_app.py:8: AssertionError: case 0 is wrong"
    assert entry["rerun"]["verdict"] == "genuine"
    shown = (
        f"- `{red[0]}` and 5 more tests of the same cause (every one in evidence.json) (failed): "
        "AssertionError at tests/test_app.py:8: AssertionError: case 0 is wrong; rerun: genuine"
    )
    assert shown in md, md
    assert render_pages.id_breaks(red[0]) in html and "5 more tests of the same cause" in html
    [same] = [f for g in doc["findings_by_check"] if g["check"] == "same-cause" for f in g["findings"]]
    assert same["tests"] == red
    # The leak: one finding for 86 tests that changed the same thing; the page names ten and counts the rest,
    # the HTML folds all 86, the JSON holds all 86.
    leakers = [f"tests/test_app.py::test_leaks[{n}]" for n in range(86)]
    [leaks] = [g for g in doc["findings_by_check"] if g["check"] == "leaked-state"]
    [finding] = leaks["findings"]
    assert finding["tests"] == leakers and leaks["lines"][0]["tests"] == leakers
    [bullet] = [b for b in md.splitlines() if b.startswith("- **warning** `tests/test_app.py::test_leaks[0]`")]
    assert bullet.count("tests/test_app.py::test_leaks[") == 11 and " and 76 more) " in bullet  # subject + ten
    assert "test_leaks[10]" not in bullet
    assert "<details><summary>all 86</summary>" in html and "test_leaks[85]" in html
    assert str(tmp_path) not in md and str(tmp_path) not in html


def test_more_than_ten_failures_fold_in_both_pages_and_stay_whole_in_the_json() -> None:
    doc = document()
    tests = [{"test": f"t.py::test_{i:02d}", "outcome": "failed", "cause": f"assert {i} == 0", "rerun": None}
             for i in range(23)]  # fmt: skip
    doc["failures"] = [{"package": "big", "tests": tests}]
    jsonschema.validate(doc, evidence.schema())
    md = render_pages.markdown(doc)
    shown = [line for line in md.splitlines() if line.startswith("- `t.py::test_")]
    assert shown == [f"- `t.py::test_{i:02d}` (failed): assert {i} == 0" for i in range(10)]
    assert "- and 13 more (every one in evidence.json, under `failures`)" in md
    html = render_pages.html(doc)
    folded = html.split("<details><summary>13 more</summary>", 1)[1].split("</details>", 1)[0]
    assert folded.count("<li>") == 13 and "t.py::<wbr>test_22" in folded


def test_a_message_that_names_many_tests_shows_ten_and_counts_the_rest() -> None:
    from promote.core.findings import Finding

    ids = [f"tests/test_m.py::test_{i}" for i in range(30)]
    finding = Finding("impossible-requirement", "error", "tests/conftest.py::big", "needs x: " + ", ".join(ids))
    line = {"severity": "error", "subjects": ["s"], "cause": None, "message": finding.message}
    evidence._folded(line, set(ids))
    assert line["tests"] == ids
    assert line["folded"] == "needs x: " + ", ".join(ids[:10]) + " and 20 more"
