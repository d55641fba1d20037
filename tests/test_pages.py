"""The evidence pages: hostile test names and messages stay inert; the JSON validates against its schema."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import jsonschema

from promote.core.findings import Finding
from promote.evidence import pages as evidence
from promote.evidence import render as render_pages
from promote.evidence.deltas import Deltas
from promote.evidence.gates import Gate
from promote.release.check import CheckResult
from promote.release.mirrors import MirrorStatus

EVIL_TEST = "tests/test_x.py::test_<script>alert(1)</script>"
EVIL_MESSAGE = "**bold** [click](javascript:alert(1)) <img src=x onerror=alert(2)> | cell | `code` # heading"


def hostile_doc() -> dict:  # type: ignore[type-arg]
    sha = "0123456789abcdef0123456789abcdef01234567"
    check = CheckResult(
        verdict="promotable",
        candidate=sha,
        candidate_ref="main",
        trunk="main",
        mirrors=(MirrorStatus("origin", "/srv/o.git", "up-to-date", sha, 0, 0),),
        drift=None,
        findings=(),
    )
    finding = Finding("order-dependent", "error", EVIL_TEST, EVIL_MESSAGE, cause="tests/test_y.py::test_<b>x</b>")
    gates = {
        "tested": Gate("fail", (f"failed: {EVIL_TEST}",)),
        "docs": Gate("pass", ("1 feature, documented",)),
        "merged": Gate("pass", ("all 1 mirrors agree",)),
        "deployed": Gate("undecided", ("no deployed ref configured",)),
    }
    return evidence.document(
        run_id="r1",
        check=check,
        run=None,
        deltas=Deltas("r0", 1, 2),
        gates=gates,
        findings=[finding],
        last_merge=None,
        history=[
            {"run": "r0", "started": "s", "passed": 1, "failed": 1, "blocked": 0},
            {"run": "r1", "started": "t", "passed": 2, "failed": 1, "blocked": 3},
        ],
        provenance={"command": "promote audit", "started": "s", "finished": "t"},
    )


class Elements(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.attrs: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attrs += [name for name, _ in attrs]

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def test_html_page_renders_hostile_text_as_text(tmp_path: Path) -> None:
    page = render_pages.html(hostile_doc())
    parsed = Elements()
    parsed.feed(page)
    assert "script" not in parsed.tags
    assert "img" not in parsed.tags and "b" not in parsed.tags
    assert not any(a.startswith("on") for a in parsed.attrs)
    text = "".join(parsed.text)
    assert "test_<script>alert(1)</script>" in text, "the name is shown, as text"
    assert "<img src=x onerror=alert(2)>" in text
    assert "svg" in parsed.tags and "polyline" in parsed.tags


def test_markdown_page_escapes_markup_and_table_pipes() -> None:
    page = render_pages.markdown(hostile_doc())
    assert "<script>" not in page and "<img" not in page and "<b>" not in page
    assert "&lt;script&gt;alert\\(1\\)&lt;/script&gt;" in page
    assert "\\*\\*bold\\*\\*" in page
    assert "\\[click\\]\\(javascript:alert\\(1\\)\\)" in page
    finding_row = next(line for line in page.splitlines() if line.startswith("| error |"))
    # Four cells (five unescaped pipes): the pipes in the message are escaped, not cell separators.
    assert len(re.findall(r"(?<!\\)\|", finding_row)) == 5
    assert page.splitlines()[0] == "# Promotion evidence: 0123456 on main"


def test_evidence_json_validates_against_the_shipped_schema(tmp_path: Path) -> None:
    doc = hostile_doc()
    jsonschema.validate(doc, evidence.schema())
    pages = evidence.write(doc, tmp_path, {})
    jsonschema.validate(json.loads(pages.json.read_text()), evidence.schema())
    broken = {**doc, "verdict": "maybe"}
    try:
        jsonschema.validate(broken, evidence.schema())
    except jsonschema.ValidationError as e:
        assert "maybe" in e.message
    else:
        raise AssertionError("a wrong verdict must not validate")


def test_backticked_text_becomes_code_and_ids_wrap_at_their_separators() -> None:
    doc = hostile_doc()
    doc["gates"]["merged"]["evidence"] = ["nothing to discard: `promote merge` is safe", "`<script>alert(3)</script>`"]
    page = render_pages.html(doc)
    parsed = Elements()
    parsed.feed(page)

    assert "<code>promote merge</code> is safe" in page
    # Escaped before the backticks are read: a tag inside them is code text, not a tag.
    assert "script" not in parsed.tags and "<code>&lt;script&gt;alert(3)&lt;/script&gt;</code>" in page
    assert "<code>code</code> # heading" in page  # the finding's message
    assert "<code>tests/<wbr>test_x.py::<wbr>test_&lt;script&gt;alert(1)&lt;/<wbr>script&gt;</code>" in page
    assert "<code>tests/<wbr>test_y.py::<wbr>test_&lt;b&gt;x&lt;/<wbr>b&gt;</code>" in page


def test_the_chart_marks_every_run_so_a_first_run_shows() -> None:
    one = render_pages.chart([{"run": "r1", "passed": 4, "failed": 1, "blocked": 0}])
    two = render_pages.chart([{"passed": 4, "failed": 0, "blocked": 0}, {"passed": 2, "failed": 2, "blocked": 0}])

    assert one["dots"]["passed"] == [(0.0, 0.0)] and one["dots"]["failed"] == [(0.0, 120.0)]
    assert two["dots"]["failed"] == [(0.0, 160.0), (640.0, 80.0)]
    assert two["lines"]["failed"] == "0.0,160.0 640.0,80.0"
    doc = hostile_doc()
    doc["history"] = doc["history"][:1]
    page = render_pages.html(doc)
    assert page.count("<circle") == 3 and "last run<" in page
