"""A hostile evidence page in a real docs repository, built by every renderer a team's docs site uses: MkDocs
(Python-Markdown), Sphinx + myst-parser (markdown-it) and markdown-it-py (CommonMark as GitHub reads it). No tag or
attribute from the page's untrusted text is live in any of them, and every table row keeps its columns."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from markdown_it import MarkdownIt

from promote.core.findings import Finding
from promote.evidence import render as render_pages
from tests.evidence.test_pages import Elements, parsed
from tests.helpers.evidence import document

BIN = Path(sys.executable).parent
IMG = "<img src=x onerror=alert(2)>"
# A message whose text before a code span ends in a backslash: that backslash must not escape the span's backtick.
BACKSLASH = "RuntimeError: unsupported path C:\\ `<img src=x onerror=alert(3)>`"
# A diverged mirror's commit subject, as the Merged gate quotes it.
SUBJECT = "would discard: `abc1234` hotfix for C:\\`<script>alert(4)</script>`"
# A ledger decline reason with a pipe inside a code span, in the accelerated path's tables.
PIPE = "declined 3 requests: `top_k|top_p` unsupported"


def hostile_page() -> str:
    findings = [
        Finding("order-dependent", "error", "tests/test_a.py::test_a", IMG),
        Finding("package-error", "error", "tests/test_b.py", BACKSLASH),
    ]
    doc: dict[str, Any] = document(findings=findings)
    doc["gates"]["merged"]["evidence"] = [SUBJECT, *doc["gates"]["merged"]["evidence"]]
    doc["gates"]["merged"]["lead"] = [SUBJECT]
    accel = {
        "name": "DFlash2",
        "package": "sanctum-mlx",
        "rows": [("Declined", PIPE), ("Served", f"`a|b` {IMG}")],
        "sweep": {"header": ["class", "requests", "reason"], "rows": [["code", "3", PIPE]]},
        "speedups": [],
        "findings": [],
    }
    doc["sections"] = [{"key": "accelerations", "title": "Accelerated paths", "data": [accel]}]
    return render_pages.markdown(doc)


def assert_inert(html: str) -> None:
    seen = parsed(html)
    assert not {"img", "script"} & set(seen.tags), seen.tags
    assert "onerror" not in seen.attrs, seen.attrs
    text = "".join(seen.text)
    assert IMG in text and "<script>alert(4)</script>" in text and "C:\\" in text
    assert_rows_keep_their_columns(html)


class Rows(Elements):
    """Cells per table row, table by table."""

    def __init__(self) -> None:
        super().__init__()
        self.widths: list[list[int]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self.widths.append([])
        elif tag == "tr":
            self.widths[-1].append(0)
        elif tag in ("td", "th"):
            self.widths[-1][-1] += 1


def assert_rows_keep_their_columns(html: str) -> None:
    rows = Rows()
    rows.feed(html)
    assert len(rows.widths) >= 4, rows.widths  # gates, findings-free tables included: gates, mirrors, accel, sweep
    for table in rows.widths:
        assert len(set(table)) == 1, rows.widths


def test_markdown_it_renders_the_hostile_page_inert() -> None:
    assert_inert(MarkdownIt("commonmark").enable(["table", "strikethrough"]).render(hostile_page()))


def docs_repository(tmp_path: Path) -> Path:
    site = tmp_path / "docs-repo"
    (site / "docs" / "evidence").mkdir(parents=True)
    (site / "docs" / "index.md").write_text("# Home\n")
    (site / "docs" / "evidence" / "run.md").write_text(hostile_page())
    subprocess.run(["git", "init", "-q", str(site)], check=True)
    return site


def test_mkdocs_builds_the_hostile_page_inert(tmp_path: Path) -> None:
    site = docs_repository(tmp_path)
    config = "site_name: T\ndocs_dir: docs\nuse_directory_urls: false\ntheme:\n  name: mkdocs\n"
    (site / "mkdocs.yml").write_text(config)
    built = subprocess.run([str(BIN / "mkdocs"), "build"], cwd=site, capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    html = (site / "site" / "evidence" / "run.html").read_text()
    assert_inert(html.split('role="main"', 1)[1].split("<footer", 1)[0])


def test_sphinx_with_myst_builds_the_hostile_page_inert(tmp_path: Path) -> None:
    pytest.importorskip("myst_parser")
    site = docs_repository(tmp_path)
    docs = site / "docs"
    (docs / "conf.py").write_text(
        'project = "T"\nextensions = ["myst_parser"]\nsource_suffix = {".md": "markdown"}\n'
        'myst_enable_extensions = ["strikethrough"]\nsuppress_warnings = ["myst.strikethrough"]\n'
    )
    built = subprocess.run([str(BIN / "sphinx-build"), "-q", "-b", "html", str(docs), str(site / "out")],
                           capture_output=True, text=True, timeout=300)  # fmt: skip
    assert built.returncode == 0, built.stderr
    html = (site / "out" / "evidence" / "run.html").read_text()
    assert_inert(html.split('role="main"', 1)[1].split('class="sphinxsidebar"', 1)[0])
