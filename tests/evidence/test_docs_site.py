"""The demo's evidence page as a docs-site citizen: published, left out of the next docs check, built strictly by real
MkDocs (Material) and Sphinx + myst-parser sites with and without explicit navigation, and read in headless Chromium."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from promote.demo import build as demo_build
from tests.evidence.test_browser import CHROMIUM, measure_script
from tests.helpers.gitrepos import git

pytestmark = pytest.mark.slow
pytest.importorskip("mlx.core")
pytest.importorskip("mlx_lm")
BIN = Path(sys.executable).parent


@dataclass(frozen=True)
class Published:
    workspace: Path
    docs: Path
    first: dict[str, object]
    second: dict[str, object]
    page: str  # the evidence page's path in the docs repository
    index: str


def promote(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "promote"), *args], cwd=cwd, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Published]:
    # The demo's workspace, built as `promote demo` builds it; its own audit is tested in tests/demo.
    where = tmp_path_factory.mktemp("demo") / "ws"
    repo = demo_build.build(where).repo
    first = promote(repo, "audit", "--publish", "--json")
    assert first.returncode == 1, first.stderr[-3000:]
    second = promote(repo, "audit", "--json")
    assert second.returncode == 1, second.stderr[-3000:]
    docs = where / "sanctum-docs"
    pages = git(docs, "ls-files", "docs/evidence").split()
    [page] = [p for p in pages if p.endswith(".md") and not p.endswith("/index.md")]
    assert f"{page[: -len('.md')]}.json" in pages, "the evidence JSON is published beside the page"
    yield Published(where, docs, json.loads(first.stdout), json.loads(second.stdout), page, "docs/evidence/index.md")


def test_the_published_page_does_not_document_what_it_reports_missing(published: Published) -> None:
    docs_first = published.first["gates"]["docs"]  # type: ignore[index]
    docs_second = published.second["gates"]["docs"]  # type: ignore[index]
    assert docs_first["status"] == docs_second["status"] == "fail"
    missing = [line for line in docs_first["evidence"] if line.endswith(": no page")]
    assert missing == ["DFlash2: no page", "SANCTUM_MLX_DFLASH2: no page"]
    assert [line for line in docs_second["evidence"] if line.endswith(": no page")] == missing
    assert "2 pages promote wrote left out: evidence is not documentation" in docs_second["evidence"]
    # The index is committed with the page and lists it.
    index = git(published.docs, "show", f"HEAD:{published.index}")
    assert Path(published.page).name in index and "| FAIL | FAIL | FAIL | PASS |" in index


def test_the_page_names_its_failing_test_and_no_path_of_this_machine(published: Published) -> None:
    md = git(published.docs, "show", f"HEAD:{published.page}")
    run_dir = Path(published.first["pages"]["md"]).parent  # type: ignore[index]
    html = (run_dir / "evidence.html").read_text()
    failing = "tests/test_routing.py::test_the_serving_box_answers_when_everything_is_up"
    assert f"`{failing}` (failed): " in md and "rerun: order-dependent after `tests/test_drain.py::" in md
    assert failing.replace("/", "/<wbr>").replace("::", "::<wbr>") in html
    for text in (md, html, git(published.docs, "show", f"HEAD:{published.index}")):
        assert str(published.workspace) not in text and str(published.workspace.resolve()) not in text
    assert re.search(r"\| local \(linux-x86_64\) \| sanctum-mlx, sanctum-proxy \| 3\.\d+\.\d+ \| \d+\.\d+", md)


MKDOCS = """site_name: Sanctum
docs_dir: docs
use_directory_urls: false
theme:
  name: material
"""
NAV = "nav:\n  - Home: index.md\n  - Proxy: proxy.md\n  - Serving: serving.md\n  - Evidence: evidence/index.md\n"


def site_copy(published: Published, tmp_path: Path) -> Path:
    site = tmp_path / "site-src"
    shutil.copytree(published.docs, site, ignore=shutil.ignore_patterns(".git"))
    return site


@pytest.mark.parametrize("nav", [False, True], ids=["no-nav", "nav"])
def test_mkdocs_material_builds_it_strictly_and_it_fits_at_1280px(published: Published, tmp_path: Path,
                                                                  nav: bool) -> None:  # fmt: skip
    pytest.importorskip("material")
    site = site_copy(published, tmp_path)
    (site / "mkdocs.yml").write_text(MKDOCS + (NAV if nav else ""))
    # Material's banner about its own future is not a build warning; the variable it names turns it off.
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    built = subprocess.run([str(BIN / "mkdocs"), "build", "--strict"], cwd=site, capture_output=True, text=True,
                           timeout=300, env=env)  # fmt: skip
    assert built.returncode == 0, built.stderr
    assert "WARNING" not in built.stderr, built.stderr
    # Left out of an explicit nav, the page is still built, and reported only at INFO.
    assert ("evidence/" in built.stderr) == nav
    page = site / "site" / published.page.removeprefix("docs/").replace(".md", ".html")
    index = site / "site" / "evidence" / "index.html"
    assert page.is_file() and index.is_file()
    assert Path(published.page).name.replace(".md", ".html") in index.read_text()
    if CHROMIUM is None:
        pytest.skip("needs Debian's chromium package for the width check")
    seen = measure_script(page, TABLES, tmp_path, 1280)
    tests_table = next(t for t in seen["tables"] if t["head"].startswith("Package"))
    assert tests_table["scroll"] <= tests_table["client"] + 1, tests_table
    assert seen["failing"] and seen["failing"][0] > 0 and seen["failing"][1] <= 1280, seen["failing"]


TABLES = """
  r.tables = Array.prototype.map.call(document.querySelectorAll("article table"), function (t) {
    var wrap = t.closest(".md-typeset__scrollwrap") || t.parentElement;
    return {head: t.querySelector("th").textContent, scroll: Math.max(t.scrollWidth, wrap.scrollWidth),
            client: wrap.clientWidth};
  });
  var hit = Array.prototype.filter.call(document.querySelectorAll("article code"), function (c) {
    return c.textContent === "tests/test_routing.py::test_the_serving_box_answers_when_everything_is_up";
  })[0];
  r.failing = hit ? [hit.getBoundingClientRect().width, hit.getBoundingClientRect().right] : null;
"""

CONF = """project = "Sanctum"
extensions = ["myst_parser"]
source_suffix = {".md": "markdown"}
exclude_patterns = ["_build"]
"""


@pytest.mark.parametrize("glob", [False, True], ids=["listed-toctree", "glob-toctree"])
def test_sphinx_with_myst_builds_it_with_warnings_as_errors(published: Published, tmp_path: Path, glob: bool) -> None:
    pytest.importorskip("myst_parser")
    site = site_copy(published, tmp_path)
    docs = site / "docs"
    (docs / "conf.py").write_text(CONF)
    toctree = ":glob:\n\n*\nevidence/*\n" if glob else "proxy\nserving\n"
    home = (docs / "index.md").read_text()
    (docs / "index.md").write_text(f"{home}\n```{{toctree}}\n{toctree}```\n")
    built = subprocess.run([str(BIN / "sphinx-build"), "-W", "-q", "-b", "html", str(docs), str(site / "_build")],
                           capture_output=True, text=True, timeout=300)  # fmt: skip
    assert built.returncode == 0, built.stderr
    html = (site / "_build" / published.page.removeprefix("docs/").replace(".md", ".html")).read_text()
    assert "test_the_serving_box_answers_when_everything_is_up" in html
    assert Path(published.page).stem + ".html" in (site / "_build" / "evidence" / "index.html").read_text()
