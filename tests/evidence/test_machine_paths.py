"""The evidence pages name no path of the machine they ran on: the repository's paths are relative, the temporary
directory is `$TMPDIR/...` and home is `~/...` in the Markdown, HTML and JSON pages alike."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from promote.core.findings import Finding
from promote.evidence import pages as evidence
from promote.evidence.deltas import Deltas
from promote.release.check import CheckResult
from tests.helpers.evidence import SHA, gates


def test_no_page_names_the_repository_the_temporary_directory_or_home(tmp_path: Path) -> None:
    root = tmp_path / "work" / "sanctum"
    tmp = Path(tempfile.gettempdir())
    home = Path.home()
    leaked = f"'{root}/pkg' -> '{tmp}/pytest-of-bert/pytest-3/test_x0'"
    log = f"exit 4 (log: {root}/.promote/runs/r1/pkg/pytest.log)"
    findings = [
        Finding("leaked-state", "error", "tests/test_cwd.py::test_chdir", f"cwd changed: {leaked}"),
        Finding("package-error", "error", "pkg", log),
        Finding("package-error", "warning", "pkg2", f"cache at {home}/.cache/x and {root}-old stays"),
    ]
    check = CheckResult("promotable", SHA, "main", "main", (), None, ())
    doc = evidence.document(
        run_id="r1", check=check, run=None, deltas=Deltas("r0", 1, 1), gates=gates(), findings=findings,
        last_merge=None, history=[], root=root,
        provenance={"command": f"promote -C {root} audit --publish", "started": "2026-11-30T23:01:30+00:00",
                    "finished": "2026-11-30T23:01:36+00:00"},
    )  # fmt: skip
    pages = evidence.write(doc, tmp_path / "out")
    texts = {"md": pages.md.read_text(), "html": pages.html.read_text(), "json": pages.json.read_text()}
    for kind, text in texts.items():
        for path in {str(root), str(root.resolve()), str(tmp), str(home)} - {"/"}:
            shown = text.replace(f"{root}-old", "")  # a sibling of the repository is not the repository
            assert path not in shown.replace("$TMPDIR", ""), (kind, path)
    md = texts["md"]
    assert "`promote -C . audit --publish`" in md
    assert "(log: .promote/runs/r1/pkg/pytest.log)" in md
    assert "'pkg' -> '$TMPDIR/pytest-of-bert/pytest-3/test_x0'" in json.dumps(json.loads(texts["json"]))
    assert "~/.cache/x" in md
