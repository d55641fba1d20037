"""promote audit runs each accelerated path's switch and parity: broken ones fail Tested, the page shows them."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.helpers.cli import run_json
from tests.helpers.gitrepos import commit, git, make_fleet
from tests.helpers.packages import write_package

PARITY = """
import json, os, sys
tokens = [4, 8, 15, 16, 23, 42]
if os.environ["FAST"] == "1" and os.environ.get("FLIP"):
    tokens[3] = 17
open(sys.argv[1], "w").write(json.dumps(tokens))
"""


# The team's yardstick: 200 items, 2 solved only with the path on; the path serves each with the switch on.
EVALUATE = """
import json, os, sys
fast = os.environ["FAST"] == "1"
with open(sys.argv[1], "w") as f:
    for i in range(200 if fast else 201):  # item 200: the path off only (unpaired: failed with it on)
        passed = i < 180 or (fast and i < 182)
        f.write(json.dumps({"item": f"<b>item {i}</b>", "passed": passed}) + "\\n")
        line = {"accel": "Fast", "outcome": "served" if fast else "declined", "reason": None if fast else "off",
                "seconds": 0.01, "request": {"i": i}}
        open(os.environ["PROMOTE_LEDGER"], "a").write(json.dumps(line) + "\\n")
"""


def workspace(tmp_path: Path, *, flip: bool, step: str = "bench", switch_test: bool = True) -> Path:
    """The package, parity, and one more step: the bench, or (step = "quality") the yardstick in EVALUATE."""
    py = json.dumps(sys.executable)
    fleet = make_fleet(tmp_path, names=("origin",))
    tests = {"tests/test_fast.py": "import os\n\ndef test_needs_fast():\n    assert os.environ['FAST'] == '1'\n"}
    write_package(fleet.work, "pkg", {
        **(tests if switch_test else {}), "tests/test_plain.py": "def test_plain():\n    assert True\n",
        "parity.py": PARITY, "evaluate.py": EVALUATE,
    })  # fmt: skip
    env = 'env = { FLIP = "1" }\n' if flip else ""
    steps = {
        "bench": f'bench = {{ command = [{py}, "-c", "pass"], rounds = 5, warmup = 0 }}\n',
        "quality": f'quality = {{ command = [{py}, "evaluate.py", "{{out}}"] }}\n',
    }
    (fleet.work / "promote.toml").write_text(
        '[promote]\ntrunk = "main"\nmirrors = ["origin"]\n'
        f'[[promote.packages]]\nname = "pkg"\npath = "pkg"\n{env}'
        '[[promote.accelerations]]\nname = "Fast"\npackage = "pkg"\n'
        'switch = { env = "FAST", on = "1", off = "0" }\n'
        f'parity = {{ command = [{py}, "parity.py", "{{out}}"] }}\n' + steps[step]
    )
    commit(fleet.work, "package and config")
    git(fleet.work, "push", "-q", "origin", "main")
    return fleet.work


def test_a_broken_switch_and_flipped_tokens_fail_tested_and_show_on_the_page(tmp_path: Path) -> None:
    repo = workspace(tmp_path, flip=True)
    code, data = run_json(repo, "audit")
    assert code == 1
    assert data["gates"]["tested"]["status"] == "fail"
    checks = {f["check"]: f for f in data["findings"]}
    assert checks["kill-switch-broken"]["subject"] == "tests/test_fast.py::test_needs_fast"
    assert checks["parity-differs"]["message"].startswith("output differs from token 3 of request 0")
    evidence = "\n".join(data["gates"]["tested"]["evidence"])
    # The parity script keeps no ledger: the figures stand, labelled as not measuring what the path served.
    drift = "1 of 1 request differs, first at token 3; 1 of 6 token positions differ from there on"
    assert f"Fast: numeric parity: {drift}; engagement not measured (no ledger)" in evidence
    assert "ledger-missing" in checks and checks["ledger-missing"]["severity"] == "warning"
    page = Path(data["pages"]["md"]).read_text()
    assert "| Measurement | Result |" in page and "Kill switch" in page and "token positions differ" in page
    # Without --bench the audit runs no A/B.
    doc = json.loads(Path(data["pages"]["json"]).read_text())
    [section] = [s for s in doc["sections"] if s["key"] == "accelerations"]
    assert section["data"][0]["result"]["bench"] is None
    assert "<h3>Fast (pkg)</h3>" in Path(data["pages"]["html"]).read_text()


def test_with_bench_the_audit_times_the_path_and_keeps_it_in_the_history(tmp_path: Path) -> None:
    repo = workspace(tmp_path, flip=False)
    _, data = run_json(repo, "audit", "--bench")
    doc = json.loads(Path(data["pages"]["json"]).read_text())
    [section] = [s for s in doc["sections"] if s["key"] == "accelerations"]
    assert section["data"][0]["result"]["bench"]["rounds"] == 5
    assert section["data"][0]["result"]["parity"]["verdict"] == "identical"
    history = (repo / ".promote" / "accelerations.jsonl").read_text().splitlines()
    assert json.loads(history[-1])["name"] == "Fast" and json.loads(history[-1])["run"] == data["run"]


def test_a_drift_the_yardstick_finds_no_worse_is_a_warning_and_the_page_says_both(tmp_path: Path) -> None:
    repo = workspace(tmp_path, flip=True, step="quality", switch_test=False)

    _, data = run_json(repo, "audit")

    checks = {f["check"]: f["severity"] for f in data["findings"]}
    assert (checks["parity-differs"], "quality-inferior" in checks) == ("warning", False)
    assert not any(line.startswith("parity-differs") for line in data["gates"]["tested"]["evidence"])
    page = Path(data["pages"]["md"]).read_text()
    assert "non-inferior: 182 vs 180 of 201, 2 / 0 discordant" in page
    assert "quality non-inferior: 182 vs 180 of 201" in page  # the finding says both
    assert "| 0 | 3 | 1 | 6 | 6 |" in page  # the request that differs, where and how far
    html = Path(data["pages"]["html"]).read_text()
    # The unpaired item's id is the team's text: shown, inert.
    assert "non-inferior: 182 vs 180 of 201" in html and "1 unpaired (&lt;b&gt;item 200&lt;/b&gt;)" in html
    assert "<b>item" not in html and "1 unpaired (" in page and "<b>item" not in page
