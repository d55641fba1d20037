"""The evidence pages: Markdown that reads well raw and renders (CommonMark) to what was meant; hostile text inert."""

from __future__ import annotations

import json
import time
from html.parser import HTMLParser
from importlib.resources import files
from pathlib import Path

import jsonschema
import pytest
from markdown_it import MarkdownIt

from promote.core.findings import Finding
from promote.evidence import pages as evidence
from promote.evidence import render as render_pages
from promote.evidence.chart import layout
from promote.evidence.history import StoredRun, TestOutcome
from tests.helpers.evidence import EVIL_MESSAGE, EVIL_TEST, PWN_IMG, PWN_SCRIPT, document, history

# What a docs site does with the page: CommonMark, with GFM tables and strikethrough.
MD = MarkdownIt("commonmark").enable(["table", "strikethrough"])
HOSTILE = [
    EVIL_TEST,
    EVIL_MESSAGE,
    "a_b __init__ _x_ *y* 2*3 snake_case_name",
    "[x]: https://evil.example",
    "# not a heading",
    "- not a list",
    "1. not a list",
    "> not a quote",
    "back\\slash \\* \\_ C:\\path\\file",
    "&amp; &#60; &lt; AT&T a&b",
    "<unset> -> 'mini' <https://autolink.example>",
    "![img](x.png) [link](y) [ref][z]",
    "~~gone~~ ~one~",
    "`one` ``two`` ```",
    "pipes | in | cells",
    "= setext",
    "trailing spaces and\ttabs   ",
]


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


def parsed(html: str) -> Elements:
    e = Elements()
    e.feed(html)
    return e


def one_line(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("text", HOSTILE)
def test_plain_text_renders_to_itself_in_a_paragraph_and_in_a_table_cell(text: str) -> None:
    as_paragraph = parsed(MD.render(f"Seen: {render_pages.md_text(text)}\n"))
    assert "".join(as_paragraph.text).strip() == f"Seen: {one_line(text)}"
    assert as_paragraph.tags == ["p"], "no markup survives"
    at_start = parsed(MD.render(render_pages.md_text(text) + "\n"))
    assert "".join(at_start.text).strip() == one_line(text) and at_start.tags == ["p"]
    table = parsed(MD.render(f"| a | b |\n|---|---|\n| {render_pages.md_text(text)} | end |\n"))
    assert table.tags.count("td") == 2 and "".join(table.text).strip().endswith("end")
    assert one_line(text) in "".join(table.text)


@pytest.mark.parametrize("text", HOSTILE)
def test_a_code_span_renders_its_text_exactly(text: str) -> None:
    html = MD.render(f"x {render_pages.md_code(text)} y\n")
    e = parsed(html)
    assert e.tags == ["p", "code"]
    shown = "".join(e.text).strip()
    assert shown.startswith("x ") and shown.endswith(" y")
    assert shown[2:-2].strip() == one_line(text).strip()


def test_the_raw_markdown_escapes_only_what_markdown_would_read() -> None:
    page = render_pages.markdown(document())
    # Timestamps to the second, with the zone; ids, shas and runs in code spans; ordinary text unescaped.
    assert "2026-11-30 23:01:36 UTC" in page and ".498268" not in page
    front, body = page.split("\n---\n\n", 1)
    assert front.startswith("---\npromote_evidence: page\n") and "\norphan: true" in front
    assert body.splitlines()[0] == "# Promotion evidence: `0123456` on main"
    assert "run `20261130T230136Z-ab12`" in page
    assert "| Merged | **PASS** | main fast-forwarded `9c29a84` to `efbd2ca` on laptop, no force. all 4 mirrors" in page
    assert "sanctum-mlx 36 + sanctum-proxy 249" in page
    for escaped in ("\\-", "\\.", "\\(", "\\`", "\\:", "\\="):
        assert escaped not in page, escaped
    assert page.endswith("\n") and "\n\n\n" not in page


def test_the_rendered_page_says_what_was_meant_and_hostile_text_stays_text() -> None:
    page = render_pages.markdown(document())
    html = MD.render(page)
    e = parsed(html)
    text = "".join(e.text)
    assert "script" not in e.tags and "img" not in e.tags and "b" not in e.tags and "strong" in e.tags
    assert not any(a.startswith("on") for a in e.attrs)
    assert not any("javascript:" in h for h in (html.split('href="')[1:]))
    assert "\\" not in text, "no stray backslash reaches the reader"
    assert EVIL_TEST in text and PWN_SCRIPT in text and PWN_IMG in text
    assert one_line(EVIL_MESSAGE).replace("`code`", "code") in one_line(text)
    assert "All four" not in text
    assert "482 tests across 3 packages (sanctum-mlx 36 + sanctum-proxy 249 + sanctum-train 197)" in text
    # The gates lead as PRODUCT.md's table does: one row per gate (title, status, at most three sentences).
    rows = [r for r in html.split("<tr>")[1:] if "<td>" in r][:4]
    assert [r.split("<td>")[1].split("</td>")[0] for r in rows] == [
        "Everything E2E Tested",
        "in Docs",
        "Merged",
        "And Deployed",
    ]
    assert "<td><strong>FAIL</strong></td>" in rows[0] and rows[0].count(". ") <= 3


NEVER = "no station in the fleet has it, so it can never run"


def test_findings_are_one_line_each_grouped_by_check_cause_only_when_it_differs() -> None:
    leak = "changed global state and did not put it back: os.environ[X]: <unset> -> '1'"
    findings = [
        Finding("leaked-state", "error", "t.py::polluter", leak, cause="t.py::polluter"),
        Finding(
            "order-dependent",
            "error",
            "t.py::victim",
            f"fails only after t.py::polluter; it leaked: {leak}",
            cause="t.py::polluter",
        ),
        Finding("undocumented-feature", "error", "A", "mentioned by none of the 3 page(s)"),
        Finding("undocumented-feature", "error", "B", "mentioned by none of the 3 page(s)"),
        Finding("ci-filtered", "error", "ci.yml: job test", "no CI job runs it", cause="--ignore=tests/x.py"),
        # Two tests of two packages that need the same thing: each says so itself, neither points at the other.
        Finding(
            "impossible-requirement", "error", "a/t.py::one", f"needs checkpoint:big: {NEVER}", cause="a/t.py::one"
        ),
        Finding(
            "impossible-requirement", "error", "b/t.py::two", f"needs checkpoint:big: {NEVER}", cause="b/t.py::two"
        ),
    ]
    doc = document(findings=findings)
    keys = ("severity", "subjects", "cause", "message")
    lines = {g["check"]: [{k: line[k] for k in keys} for line in g["lines"]] for g in doc["findings_by_check"]}
    assert lines["leaked-state"] == [
        {"severity": "error", "subjects": ["t.py::polluter"], "cause": None, "message": leak}
    ]
    assert (
        lines["order-dependent"][0]["message"]
        == "fails only after t.py::polluter; it leaked: see leaked-state for t.py::polluter"
    )
    assert lines["order-dependent"][0]["cause"] is None, "the message names the polluter already"
    assert lines["undocumented-feature"] == [
        {"severity": "error", "subjects": ["A", "B"], "cause": None, "message": "mentioned by none of the 3 page(s)"}
    ]
    assert lines["ci-filtered"][0]["cause"] == "--ignore=tests/x.py"
    assert [line["message"] for line in lines["impossible-requirement"]] == [f"needs checkpoint:big: {NEVER}"]
    assert lines["impossible-requirement"][0]["subjects"] == ["a/t.py::one", "b/t.py::two"]
    page = render_pages.markdown(doc)
    items = [line for line in page.splitlines() if line.startswith("- **")]
    assert len(items) == 5
    assert "- **error** `A`, `B`: mentioned by none of the 3 page(s)" in items
    assert "- **error** `ci.yml: job test`: no CI job runs it (cause: `--ignore=tests/x.py`)" in items
    jsonschema.validate(doc, evidence.schema())


def test_html_page_renders_hostile_text_as_text_under_a_policy_that_forbids_scripts() -> None:
    page = render_pages.html(document())
    e = parsed(page)
    assert "script" not in e.tags and "img" not in e.tags
    assert not any(a.startswith("on") for a in e.attrs)
    text = "".join(e.text)
    assert EVIL_TEST in text and PWN_IMG in text
    assert "default-src 'none'" in page and "script-src" not in page
    assert "<code>promote merge</code>" not in page and "<code>9c29a84</code>" in page


def test_evidence_json_validates_against_the_shipped_schema(tmp_path: Path) -> None:
    doc = document()
    jsonschema.validate(doc, evidence.schema())
    pages = evidence.write(doc, tmp_path)
    jsonschema.validate(json.loads(pages.json.read_text()), evidence.schema())
    with pytest.raises(jsonschema.ValidationError, match="maybe"):
        jsonschema.validate({**doc, "verdict": "maybe"}, evidence.schema())


def test_statements_that_cannot_be_written_leave_the_pages_there_and_say_only_that(tmp_path: Path) -> None:
    from promote.cli.audit_report import unstored_line
    from promote.evidence.audit import Unstored, write_evidence

    out = tmp_path / "run"
    (out / "intoto-pkg.json").mkdir(parents=True)  # where the statement goes, a directory: the write fails
    unstored: list[Unstored] = []

    pages = write_evidence(document(), out, lambda: {"pkg": {"_type": "https://in-toto.io/Statement/v1"}}, unstored)

    assert pages is not None and pages.md.is_file() and pages.html.is_file() and pages.json.is_file()
    assert pages.statements == ()
    [refused] = unstored
    assert refused.what == "statements" and refused.error.startswith(f"cannot write {out / 'intoto-pkg.json'}: ")
    assert unstored_line(unstored, publish=False).startswith("the in-toto statements were not written (the pages were)")


def test_timestamps_show_the_second_and_the_zone() -> None:
    assert render_pages.when("2026-11-30T23:01:36.498268+00:00") == "2026-11-30 23:01:36 UTC"
    assert render_pages.when("2026-11-30T23:01:36+02:00") == "2026-11-30 23:01:36 +02:00"
    assert render_pages.when("2026-03-07T11:30:00Z") == "2026-03-07 11:30:00 UTC"
    assert render_pages.when("not a time") == "not a time"


def test_the_chart_of_one_run_has_a_dated_axis_a_title_labels_and_a_legend() -> None:
    chart = layout(history(1))
    assert chart.title == "Tests per run, 1 comparable run" and chart.runs == 1
    assert (chart.x_label, chart.y_label) == ("run started (UTC)", "tests")
    [bar] = chart.bars
    left, _, right, bottom = chart.plot
    assert abs(bar.x + bar.width / 2 - (left + right) / 2) < 1, "one run stands in the middle"
    assert [s.series for s in bar.segments] == ["passed", "failed", "blocked"]
    assert bar.segments[0].y + bar.segments[0].height == bottom
    assert [label for _, label, _ in chart.x_ticks] == ["2026-06-01 02:00"], "one run, one tick: no span of days"
    assert [label for label, _ in ((lbl, c) for _, lbl, c in chart.legend)] == [
        "passed",
        "failed, errors or crashed",
        "blocked (no station can run them)",
    ]
    assert len({colour for _, _, colour in chart.legend}) == 3
    page = render_pages.html({**document(runs=1)})
    assert page.count('class="swatch"') == 3 and 'class="x-tick"' in page and 'class="axis-label"' in page


def test_the_chart_of_200_runs_stays_readable_and_renders_quickly() -> None:
    runs = history(200)
    chart = layout(runs)
    assert len(chart.bars) == 200 and chart.title == "Tests per run, 200 comparable runs"
    xs = [b.x for b in chart.bars]
    assert xs == sorted(xs) and all(b.x + b.width <= n.x for b, n in zip(chart.bars, chart.bars[1:], strict=False))
    assert 2 <= len(chart.x_ticks) <= 5 and all(label.startswith("2026-") for _, label, _ in chart.x_ticks)
    failing = [b for b in chart.bars if any(s.series == "failed" for s in b.segments)]
    assert len(failing) == 29 and all(s.height >= 2 for b in failing for s in b.segments), "a few failures show"
    doc = document(runs=200)
    started = time.perf_counter()
    page = render_pages.html(doc)
    render_pages.markdown(doc)
    elapsed = time.perf_counter() - started
    assert page.count("<g><title>") == 200
    # The timing itself is in BENCHMARKS.md; this bound only catches a pathological regression.
    assert elapsed < 10, elapsed


def stored(run_id: str, started: str, packages: tuple[str, ...], *, interrupted: bool = False) -> StoredRun:
    tests = tuple(TestOutcome(p, "t.py::a", "passed") for p in packages)
    return StoredRun(run_id, "audit", started, started, None, "promote audit", tests=tests, interrupted=interrupted)


def test_the_chart_compares_only_runs_of_the_same_packages() -> None:
    runs = [
        stored("r4", "2026-01-04T00:00:00", ("a", "b")),
        stored("r3", "2026-01-03T00:00:00", ("b",)),  # promote test --package b
        stored("r2", "2026-01-02T00:00:00", ("a", "b"), interrupted=True),
        stored("r1", "2026-01-01T00:00:00", ("a", "b")),
    ]
    assert [p["run"] for p in evidence.history_points(runs)] == ["r1", "r4"]
    assert evidence.history_points([]) == []


def test_sections_name_no_template_and_the_schema_is_the_shipped_one(tmp_path: Path) -> None:
    doc = document()
    assert doc["sections"] == []
    section = {"key": "accelerations", "title": "Accelerated paths", "data": []}
    jsonschema.validate({**doc, "sections": [section]}, evidence.schema())
    with pytest.raises(jsonschema.ValidationError, match=r"'md', 'html'|'html', 'md'"):
        jsonschema.validate({**doc, "sections": [{**section, "md": "accel.md.j2", "html": "x"}]}, evidence.schema())
    # `$schema` names the schema shipped in the package, by its path there.
    assert doc["$schema"] == evidence.schema()["$id"]
    shipped = doc["$schema"].rsplit(":", 1)[1]
    assert files("promote").joinpath(shipped.removeprefix("promote/")).is_file()
    # The check's verdict is named as such, beside the Merged gate's own status.
    assert doc["merge"]["check_verdict"] == "promotable" and "verdict" not in doc["merge"]


def test_a_finding_says_what_its_own_test_needs_and_what_it_refers_to_comes_first() -> None:
    need = "needs hub:org/model, which no station here has: it cannot run on this fleet"
    findings = [
        # A flaky finding quoting its cause's leaked-state message: a check named before leaked-state.
        Finding(
            "flaky", "warning", "t.py::victim", f"failed after t.py::polluter, which {need} x", cause="t.py::polluter"
        ),
        Finding("leaked-state", "warning", "t.py::polluter", need),
        # One package's finding about a module, another's about a fixture in a module of the same name.
        Finding("impossible-requirement", "error", "tests/test_gen.py", need),
        Finding(
            "impossible-requirement",
            "error",
            "tests/test_gen.py::TestGen::setUpClass",
            f"{need}; 3 test(s) via tests/test_gen.py::TestGen::setUpClass (3)",
            cause="tests/test_gen.py::TestGen::setUpClass",
        ),
    ]
    doc = document(findings=findings)
    groups = {g["check"]: g["lines"] for g in doc["findings_by_check"]}
    assert [line["message"] for line in groups["impossible-requirement"]] == [
        need,
        f"{need}; 3 test(s) via tests/test_gen.py::TestGen::setUpClass (3)",
    ]
    assert groups["flaky"][0]["message"] == "failed after t.py::polluter, which see leaked-state for t.py::polluter x"
    order = [g["check"] for g in doc["findings_by_check"]]
    assert order.index("leaked-state") < order.index("flaky")
    assert order == sorted(order, key=lambda c: (c != "leaked-state", c))
    page = render_pages.markdown(doc)
    assert page.index("t.py::polluter`: needs") < page.index("see leaked-state for")


def test_a_page_whose_ci_runs_no_test_never_says_the_packages_ran_as_their_ci_runs_them() -> None:
    doc = document()
    tested = doc["gates"]["tested"]
    tested["evidence"] = [*tested["evidence"], "CI: 497 of 497 test ids are run by no CI job"]
    row = {"name": "sanctum-mlx", "passed": 497, "failed": 0, "errors": 0, "skipped": 0, "blocked": 0,
           "duration_s": 12.0, "inifile": "pyproject.toml", "rootdir": "packages/sanctum-mlx"}  # fmt: skip
    doc["packages"] = [row]

    md, page = render_pages.markdown(doc), render_pages.html(doc)

    assert "497 of 497 test ids are run by no CI job" in md and "497 of 497 test ids are run by no CI job" in page
    for text in (md, page):
        assert "as its CI runs it" not in text and "CI runs" not in text
    assert "promote ran each package from its own directory, as `cd PACKAGE && python -m pytest` does:" in md
    assert (
        "promote ran each package from its own directory, as <code>cd PACKAGE &amp;&amp; python -m pytest</code>"
        in page
    )
    assert "- `sanctum-mlx` ran with `pyproject.toml` (rootdir `packages/sanctum-mlx`)" in md
