"""The HTML evidence page in a real browser (headless Chromium): gates on the first screen, no sideways scrolling,
the chart's text drawn, and no script from a hostile test name run."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from promote.evidence import render as render_pages
from tests.helpers.evidence import document

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium package (.ci/run installs it)")

# Appended to a copy of the page (the page itself runs no script): measures what a reader would see and posts it to
# the frame around it. The frame is exactly the screen asked for (a window is at least 500 px wide and loses height
# to its frame); the harness writes the result into its DOM for --dump-dom to carry out.
PROBE = """<script>
(function () {
  var box = function (el) { var b = el.getBoundingClientRect(); return [b.top, b.bottom, b.left, b.right]; };
  var r = {
    width: window.innerWidth, height: window.innerHeight,
    scrollWidth: document.documentElement.scrollWidth,
    gates: Array.prototype.map.call(document.querySelectorAll(".gate"), box),
    text: Array.prototype.map.call(document.querySelectorAll("svg.chart text"), function (t) {
      var b = t.getBBox(); return [t.getAttribute("class"), t.textContent, b.width, b.height];
    })
  };
  window.addEventListener("load", function () {
    setTimeout(function () {
      r.pwned = document.querySelectorAll("#pwned").length;
      parent.postMessage(JSON.stringify(r), "*");
    }, 300);
  });
})();
</script>"""


def measure(page: str, tmp_path: Path, width: int, height: int = 800) -> dict[str, Any]:
    """Load `page` (without its script-forbidding policy, so escaping alone is what keeps scripts out) and measure."""
    probed = re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", page).replace("</body>", PROBE + "</body>")
    path = tmp_path / f"page-{width}.html"
    path.write_text(probed, encoding="utf-8")
    return _load(path, tmp_path / f"harness-{width}.html", width, height)


def measure_script(page: Path, extra: str, tmp_path: Path, width: int, height: int = 800) -> dict[str, Any]:
    """Load a built site's `page` beside itself (its stylesheets resolve) with `extra` probe statements filling `r`."""
    probe = PROBE.replace("      r.pwned =", extra + "\n      r.pwned =", 1)
    path = page.with_name(f"probed-{width}-{page.name}")
    path.write_text(page.read_text(encoding="utf-8").replace("</body>", probe + "</body>"), encoding="utf-8")
    return _load(path, page.with_name(f"harness-{width}.html"), width, height)


def _load(path: Path, harness: Path, width: int, height: int) -> dict[str, Any]:
    harness.write_text(
        "<!DOCTYPE html><html><body style='margin:0'><script>addEventListener('message', function (e) {"
        "var pre = document.createElement('pre'); pre.id = 'probe'; pre.textContent = e.data;"
        "document.body.appendChild(pre); });</script>"
        f"<iframe src='{path.name}' width='{width}' height='{height}' style='border:0;display:block'></iframe>"
        "</body></html>",
        encoding="utf-8",
    )
    assert CHROMIUM is not None
    done = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--window-size=1600,1000",
            "--virtual-time-budget=5000",
            "--dump-dom",
            harness.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    found = re.search(r'<pre id="probe">(.*?)</pre>', done.stdout, re.S)
    assert found, f"chromium exited {done.returncode}: {done.stderr[-2000:]}"
    data: dict[str, Any] = json.loads(
        found.group(1).replace("&quot;", '"').replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    )
    return data


def test_the_four_gates_are_on_the_first_screen_and_nothing_scrolls_sideways(tmp_path: Path) -> None:
    page = render_pages.html(document(runs=30))
    wide = measure(page, tmp_path, 1280)
    assert (wide["width"], wide["height"]) == (1280, 800), "the screen is the one asked for"
    assert len(wide["gates"]) == 4
    assert all(top >= 0 and bottom <= 800 for top, bottom, _, _ in wide["gates"]), wide["gates"]
    assert wide["scrollWidth"] <= 1280
    narrow = measure(page, tmp_path, 480)
    assert narrow["width"] == 480 and narrow["scrollWidth"] <= 480, narrow["scrollWidth"]
    assert all(right <= 480 for _, _, _, right in narrow["gates"])


@pytest.mark.parametrize("runs", [1, 200])
def test_the_charts_title_axes_and_legend_are_drawn(tmp_path: Path, runs: int) -> None:
    seen = measure(render_pages.html(document(runs=runs)), tmp_path, 1280)
    drawn = {(kind, text) for kind, text, width, height in seen["text"] if width > 0 and height > 0}
    kinds = {kind for kind, _ in drawn}
    assert {"title", "x-tick", "y-tick", "axis-label", "legend"} <= kinds, seen["text"]
    assert ("axis-label", "run started (UTC)") in drawn and ("axis-label", "tests") in drawn
    assert ("title", f"Tests per run, {runs} comparable run{'s' if runs > 1 else ''}") in drawn
    assert any(kind == "x-tick" and text.startswith(("06-", "2026-")) for kind, text in drawn)


def test_no_script_from_a_hostile_test_name_runs(tmp_path: Path) -> None:
    seen = measure(render_pages.html(document()), tmp_path, 1280)
    assert seen["pwned"] == 0
    # The check can fail: the same payload, unescaped, does run.
    raw = render_pages.html(document()).replace(
        "</body>", "<img src=x onerror=\"document.body.insertAdjacentHTML('beforeend','<b id=pwned>y</b>')\"></body>"
    )
    assert measure(raw, tmp_path, 1280)["pwned"] == 1
