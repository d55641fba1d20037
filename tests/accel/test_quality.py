"""promote accel's quality yardstick: the team's evaluation run both ways, paired item by item, with real processes."""

from __future__ import annotations

import json
import sys
from importlib.resources import files
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from promote.core.errors import EXIT_BLOCKED, EXIT_OK, EXIT_UNDECIDED
from tests.helpers.cli import run, run_json
from tests.helpers.gitrepos import commit, git, make_fleet
from tests.helpers.packages import write_config, write_package

PY = json.dumps(sys.executable)

# The team's evaluation: items from plan.json, each passed or not with the switch (FAST) off and on; the path's
# own ledger line per item (served with the switch on unless the plan says it declines everything).
EVALUATE = """
import json, os, sys, time
out, plan = sys.argv[1], json.load(open("plan.json"))
fast = os.environ["FAST"] == "1"
ledger = os.environ.get("PROMOTE_LEDGER")
with open(out, "w") as f:
    for n, (item, off, on) in enumerate(plan["items"]):
        if fast and item in plan.get("missing_on", []):
            continue
        f.write(json.dumps({"item": item, "passed": on if fast else off}) + "\\n")
        f.flush()
        if ledger:
            served = fast and not plan.get("declines") and n < plan.get("declines_from", len(plan["items"]))
            outcome = "served" if served else "declined"
            reason = None if outcome == "served" else "not this one"
            line = {"accel": "Fast", "outcome": outcome, "reason": reason, "seconds": 0.01, "request": {"n": n}}
            open(ledger, "a").write(json.dumps(line) + "\\n")
        if fast and plan.get("slow_after") == n:
            time.sleep(30)
    if plan.get("duplicate") and fast:
        f.write(json.dumps({"item": plan["items"][0][0], "passed": True}) + "\\n")
"""

# Token parity that drifts on request 1 from position 41 with the switch on (a real generation would).
DRIFTS = """
import json, os, sys
requests = [[(7 * i + r) % 50 for i in range(48)] for r in range(3)]
fast = os.environ["FAST"] == "1"
if fast:
    requests[1][41:] = [t + 1 for t in requests[1][41:]]
json.dump(requests, open(sys.argv[1], "w"))
for r in range(3):
    line = {"accel": "Fast", "outcome": "served" if fast else "declined", "reason": None if fast else "off",
            "seconds": 0.01, "request": {"r": r}}
    open(os.environ["PROMOTE_LEDGER"], "a").write(json.dumps(line) + "\\n")
"""


def plan(both: int, on_only: int, off_only: int, neither: int, **extra: object) -> dict[str, object]:
    """Items solved both ways, only with the path on, only off, neither (the 2x2 table, item by item)."""
    cells = [(True, True)] * both + [(False, True)] * on_only + [(True, False)] * off_only
    cells += [(False, False)] * neither
    return {"items": [[f"item-{i:03d}", off, on] for i, (off, on) in enumerate(cells)], **extra}


def configure(root: Path, the_plan: dict[str, object], *, parity: bool = False, quality: str = "") -> Path:
    config = write_config(root, [])
    lines = ["[[promote.accelerations]]", 'name = "Fast"', 'switch = { env = "FAST", on = "1", off = "0" }']
    if parity:
        lines.append(f'parity = {{ command = [{PY}, "drifts.py", "{{out}}"] }}')
    lines.append(f'quality = {{ command = [{PY}, "evaluate.py", "{{out}}"]{quality} }}')
    config.write_text(config.read_text() + "\n".join([*lines, ""]))
    (root / "evaluate.py").write_text(EVALUATE)
    (root / "drifts.py").write_text(DRIFTS)
    (root / "plan.json").write_text(json.dumps(the_plan))
    return config


def accel(root: Path) -> tuple[int, dict[str, Any], dict[str, Any]]:
    code, data = run_json(root, "accel")
    schema = json.loads(files("promote").joinpath("schemas/accel.schema.json").read_text("utf-8"))
    jsonschema.validate(data, schema)
    [path] = data["accelerations"]
    return code, data, path


def checks(data: dict[str, Any]) -> dict[str, str]:
    return {f["check"]: f["severity"] for f in data["findings"]}


def test_the_incidents_split_is_non_inferior_and_lets_the_drift_stand_as_a_warning(tmp_path: Path) -> None:
    # 152 vs 150 of 164, the two paths disagreeing on 2 problems, both solved only with the path.
    configure(tmp_path, plan(150, 2, 0, 12), parity=True)

    code, data, path = accel(tmp_path)

    q = path["quality"]
    assert (code, data["verdict"], q["verdict"]) == (EXIT_OK, "holds", "non-inferior")
    assert (q["items"], q["on_passed"], q["off_passed"], q["on_only"], q["off_only"]) == (164, 152, 150, 2, 0)
    assert q["p_value"] == pytest.approx(0.5, abs=1e-6)
    d = q["difference"]
    assert (round(d["low"] * 100, 1), round(d["estimate"] * 100, 1), round(d["high"] * 100, 1)) == (-1.4, 1.2, 4.2)
    assert (q["margin"], q["confidence"], q["unpaired"], q["saturated"]) == (0.02, 0.95, 0, False)
    assert checks(data) == {"parity-differs": "warning"}
    [differs] = data["findings"]
    assert differs["message"].startswith("output differs from token 41 of request 1: 1 of 3 requests differ")
    assert (
        "quality non-inferior: 152 vs 150 of 164, 2 / 0 discordant, difference +1.2 points [-1.4, +4.2], "
        in (differs["message"])
    )
    assert [r["request"] for r in path["parity"]["requests"]] == [0, 1, 2]
    assert path["parity"]["requests"][1] == {
        "request": 1, "verdict": "differs", "first_divergence": 41, "differing": 7, "length_off": 48, "length_on": 48,
    }  # fmt: skip
    # The path served every item with the switch on: the verdict is the path's.
    assert q["ledger"]["on"]["served"] == 164
    text = run(tmp_path, "accel").stdout
    assert "non-inferior: 152 vs 150 of 164, 2 / 0 discordant" in text and "covers 164 of 164 items" in text
    assert "1 of 3 requests differ, first at token 41" in text
    assert text.rstrip().endswith("every accelerated path holds")


def test_the_same_totals_with_fourteen_and_twelve_discordant_are_inconclusive(tmp_path: Path) -> None:
    configure(tmp_path, plan(138, 14, 12, 0))

    code, data, path = accel(tmp_path)

    q = path["quality"]
    assert (code, data["verdict"], q["verdict"]) == (EXIT_UNDECIDED, "undecided", "inconclusive")
    assert (q["on_passed"], q["off_passed"], q["on_only"], q["off_only"]) == (152, 150, 14, 12)
    assert (round(q["difference"]["low"] * 100, 1), round(q["difference"]["high"] * 100, 1)) == (-5.1, 7.6)
    # At the same rates, roughly 600 items would put the interval above -2 points.
    assert 550 <= q["to_decide"] <= 650
    assert checks(data) == {"quality-inconclusive": "warning"}
    [undecided] = data["undecided"]
    assert (undecided["step"], f"about {q['to_decide']:,} items" in undecided["error"]) == ("quality", True)


def test_an_audit_leaves_tested_undecided_where_the_yardstick_cannot_decide_as_accel_does(tmp_path: Path) -> None:
    fleet = make_fleet(tmp_path, names=("origin",))
    write_package(fleet.work, "pkg", {"test_a.py": "def test_ok():\n    pass\n"})
    config = configure(fleet.work, plan(138, 14, 12, 0))
    config.write_text(config.read_text() + '\n[[promote.packages]]\nname = "pkg"\npath = "pkg"\n')
    commit(fleet.work, "package and yardstick")
    git(fleet.work, "push", "-q", "origin", "main")

    code, data = run_json(fleet.work, "audit")

    tested = data["gates"]["tested"]
    assert tested["status"] == "undecided" and code == EXIT_UNDECIDED
    [said] = [line for line in tested["evidence"] if line.startswith("Fast: quality undecided: ")]
    assert "items" in said and tested["lead"][1] == "1 accelerated-path step undecided (see Accelerated paths)"


def test_output_that_differs_without_a_non_inferior_yardstick_stays_an_error(tmp_path: Path) -> None:
    configure(tmp_path, plan(138, 14, 12, 0), parity=True)

    code, data, _ = accel(tmp_path)

    assert (code, checks(data)) == (EXIT_BLOCKED, {"parity-differs": "error", "quality-inconclusive": "warning"})
    [differs] = [f for f in data["findings"] if f["check"] == "parity-differs"]
    assert differs["message"].endswith("quality inconclusive: 152 vs 150 of 164, 14 / 12 discordant, "
                                       "difference +1.2 points [-5.1, +7.6], margin 2 points")  # fmt: skip


def test_twenty_lost_items_are_inferior(tmp_path: Path) -> None:
    configure(tmp_path, plan(130, 0, 20, 14))

    code, data, path = accel(tmp_path)

    q = path["quality"]
    assert (code, data["verdict"], q["verdict"], q["off_only"]) == (EXIT_BLOCKED, "broken", "inferior", 20)
    assert q["difference"]["high"] < -0.02
    assert checks(data) == {"quality-inferior": "error"}
    assert "130 vs 150 of 164, 0 / 20 discordant" in data["findings"][0]["message"]


def test_a_yardstick_near_its_ceiling_is_said_to_be_saturated(tmp_path: Path) -> None:
    configure(tmp_path, plan(160, 1, 0, 3))

    code, data, path = accel(tmp_path)

    assert (path["quality"]["on_passed"], path["quality"]["saturated"]) == (161, True)
    assert (code, path["quality"]["verdict"]) == (EXIT_OK, "non-inferior")
    assert checks(data) == {"quality-saturated": "warning"}
    assert "the gap is a floor" in data["findings"][0]["message"]


def test_an_item_missing_from_one_arm_is_unpaired_named_and_failed_by_that_arm(tmp_path: Path) -> None:
    # item-170 fails with the path off; with it on the evaluation leaves it out: a failure either way.
    configure(tmp_path, plan(160, 0, 0, 41, missing_on=["item-170"]))

    code, _, path = accel(tmp_path)

    q = path["quality"]
    assert (code, q["verdict"]) == (EXIT_OK, "non-inferior")
    assert (q["items"], q["unpaired"], q["unpaired_items"], q["on_passed"], q["off_passed"]) == (
        201, 1, ["item-170"], 160, 160,
    )  # fmt: skip
    said = "1 unpaired (item-170), each counted as failed by the arm that did not write it"
    assert said in run(tmp_path, "accel").stdout


def test_an_arm_that_answers_900_of_1000_items_is_judged_on_all_1000(tmp_path: Path) -> None:
    # The switched-on arm silently skips the last 100 items, 95 of which the path off solves.
    configure(tmp_path, plan(900, 0, 95, 5, missing_on=[f"item-{i:03d}" for i in range(900, 1000)]))

    code, data, path = accel(tmp_path)

    q = path["quality"]
    assert (q["items"], q["unpaired"], q["on_passed"], q["off_passed"], q["off_only"]) == (1000, 100, 900, 995, 95)
    # Never non-inferior: the items the path did not answer are items it did not solve.
    assert (code, q["verdict"], checks(data)["quality-inferior"]) == (EXIT_BLOCKED, "inferior", "error")


def test_a_path_that_declines_every_item_makes_the_yardstick_vacuous(tmp_path: Path) -> None:
    configure(tmp_path, plan(150, 2, 0, 12, declines=True), parity=True)

    code, data, path = accel(tmp_path)

    assert path["quality"]["verdict"] == "non-inferior" and path["quality"]["ledger"]["on"]["served"] == 0
    # Non-inferior on items the path never served lets nothing stand: the drift stays an error.
    assert (code, checks(data)) == (EXIT_BLOCKED, {"parity-differs": "error", "quality-vacuous": "error"})
    assert "covers 0 of 164 items" in run(tmp_path, "accel").stdout


def test_a_path_that_serves_only_some_items_says_how_many(tmp_path: Path) -> None:
    configure(tmp_path, plan(150, 2, 0, 12, declines_from=120))

    code, data, path = accel(tmp_path)

    assert (code, path["quality"]["verdict"], path["quality"]["ledger"]["on"]["served"]) == (
        EXIT_OK,
        "non-inferior",
        120,
    )
    assert "quality-vacuous" not in checks(data)
    assert "covers 120 of 164 items" in run(tmp_path, "accel").stdout


def test_an_item_written_twice_is_the_commands_error(tmp_path: Path) -> None:
    configure(tmp_path, plan(10, 0, 0, 0, duplicate=True))

    code, data, path = accel(tmp_path)

    q = path["quality"]
    assert (code, q["verdict"], [u["step"] for u in data["undecided"]]) == (EXIT_UNDECIDED, "error", ["quality"])
    assert "evaluate.py '{out}'` (switch on) wrote item \"item-000\" twice" in q["error"]


def test_an_arm_stopped_at_its_time_limit_is_said_and_counted_never_judged(tmp_path: Path) -> None:
    configure(tmp_path, plan(30, 0, 0, 0, slow_after=9), quality=", timeout_s = 3")

    code, data, path = accel(tmp_path)

    q = path["quality"]
    assert (code, q["verdict"], q["timed_out"]) == (EXIT_UNDECIDED, "timed-out", ["on"])
    # What the switched-on arm wrote before the limit is counted; the rest of its items are unpaired.
    assert (q["items"], q["unpaired"], q["on_passed"], q["off_passed"]) == (30, 20, 10, 30)
    assert "still running after 3s, stopped" in q["error"]
    assert not {"quality-inferior", "quality-inconclusive"} & set(checks(data))


@pytest.mark.parametrize(
    ("quality", "says"),
    [
        (f"{{ command = [{PY}, 'evaluate.py'] }}", "promote.accelerations[0].quality.command: expected the evaluation"),
        (f"{{ command = [{PY}, '{{out}}'], margin = 2 }}", "quality.margin: expected a fraction of items in (0, 1]"),
        (f"{{ command = [{PY}, '{{out}}'], confidence = 1 }}", "quality.confidence: expected a level from 0.5"),
        # A score per item may come later: today it is a key promote does not know.
        (f"{{ command = [{PY}, '{{out}}'], score = true }}", "quality.score: unknown key; expected one of command"),
    ],
)
def test_a_bad_quality_table_is_a_usage_error_naming_the_key(tmp_path: Path, quality: str, says: str) -> None:
    config = write_config(tmp_path, [])
    config.write_text(
        config.read_text() + '[[promote.accelerations]]\nname = "Fast"\nswitch = { env = "FAST" }\n'
        f"quality = {quality}\n"
    )

    result = run(tmp_path, "accel")

    assert result.exit_code == 2 and says in result.stderr, result.stderr
