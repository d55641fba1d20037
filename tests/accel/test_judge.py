"""The verdicts a serving team would give: a switch that does not switch, tests red both ways, drafts nobody kept."""

from __future__ import annotations

import json
import re
import shutil
import sys
from importlib.resources import files
from pathlib import Path

import jsonschema
import pytest

from tests.accel.test_ledger import WRITER, accel_json, by_check, configure
from tests.helpers.cli import run, run_json
from tests.helpers.gitrepos import commit, git, make_fleet
from tests.helpers.packages import write_package

PY = json.dumps(sys.executable)

# A drafter in plain Python: SPEC switches it, PATH_MODE says how well it does its job, and every request
# goes to the ledger through the stdlib writer, as a package would vendor it.
PATH = """
import json, os, sys, time

import ledger

MODE = os.environ.get("PATH_MODE", "works")


def answer(request):
    started = time.perf_counter()
    on = os.environ.get("SPEC") == "1" or MODE == "ignores-switch"
    if not on:
        ledger.record("Spec", "declined", reason="SPEC=0", seconds=time.perf_counter() - started, request=request)
        return sum(request["prompt"])
    time.sleep(0.01)
    accepted = 0 if MODE == "accepts-nothing" else 3
    ledger.record("Spec", "served", seconds=time.perf_counter() - started, request=request, drafted=4,
                  accepted=accepted)
    return sum(request["prompt"])


def sweep(out):
    with open(out, "w") as f:
        for t in (0.0, 0.5):
            for i in range(3):
                request = {"temperature": t, "prompt": [i, 2]}
                started = time.perf_counter()
                if os.environ.get("SPEC") == "1":
                    time.sleep(0.01)
                answer(request)
                f.write(json.dumps({"request": request, "ok": True, "error": None,
                                    "seconds": time.perf_counter() - started}) + "\\n")


if __name__ == "__main__":
    if sys.argv[1] == "parity":
        tokens = [answer({"prompt": p, "temperature": 0.0}) for p in ([1, 2], [3, 4], [5, 6])]
        open(sys.argv[2], "w").write(json.dumps(tokens))
    elif sys.argv[1] == "sweep":
        sweep(sys.argv[2])
"""

TESTS = """
import os

import path


def test_the_path_answers():
    assert path.answer({"prompt": [1, 2], "temperature": 0.0}) == 3
"""

# Red whichever way the switch is: each asks the path once, then fails (promote reruns each to find why).
RED = """
import path


def test_red_one():
    path.answer({"prompt": [1], "temperature": 0.0})
    assert False, "red both ways"


def test_red_two():
    path.answer({"prompt": [2], "temperature": 0.0})
    assert False, "red both ways"
"""


def workspace(root: Path, mode: str, *, steps: tuple[str, ...] = ("parity",), red: bool = False) -> Path:
    files = {
        "path.py": PATH,
        "tests/test_path.py": TESTS,
        "pyproject.toml": '[tool.pytest.ini_options]\npythonpath = ["."]\n',
    }
    if red:
        files["tests/test_red.py"] = RED
    pkg = write_package(root, "pkg", files)
    shutil.copy(WRITER, pkg / "ledger.py")
    configure(root, "Spec", "SPEC", mode, steps)
    return root


def test_a_switch_that_leaves_the_path_serving_is_switch_ineffective(tmp_path: Path) -> None:
    workspace(tmp_path, "ignores-switch")
    code, data = accel_json(tmp_path, "--no-bench")
    [found] = by_check(data)["switch-ineffective"]
    assert found["severity"] == "error" and found["subject"] == "Spec" and found["cause"] == "SPEC=0"
    assert found["message"] == (
        "SPEC=0 still served 1 of 1 requests in its tests, 3 of 3 parity requests: the kill switch does not switch "
        "the path off"
    )
    assert code == 1
    text = run(tmp_path, "accel", "--no-bench").stdout
    assert "switch-ineffective  Spec: SPEC=0 still served" in text
    assert "BROKEN" in text


def test_a_switch_that_switches_the_path_off_is_not_flagged(tmp_path: Path) -> None:
    workspace(tmp_path, "works")
    code, data = accel_json(tmp_path, "--no-bench")
    assert "switch-ineffective" not in by_check(data)
    assert data["accelerations"][0]["parity"]["ledger"]["off"]["served"] == 0
    assert code == 0


def test_tests_red_both_ways_are_named_and_the_path_does_not_hold(tmp_path: Path) -> None:
    workspace(tmp_path, "works", red=True)
    code, data = accel_json(tmp_path, "--no-bench")
    failing = by_check(data)["acceleration-tests-fail"]
    assert sorted(f["subject"] for f in failing) == [
        "tests/test_red.py::test_red_one",
        "tests/test_red.py::test_red_two",
    ]
    assert all(f["severity"] == "error" for f in failing)
    assert failing[0]["message"] == (
        "Spec: fails with the path off (SPEC=0) and on (SPEC=1): the package's tests must pass both ways"
    )
    assert data["verdict"] == "broken" and code == 1
    # Three tests ask the path once each; promote's own reruns of the two red ones are not the path's requests.
    ledger = data["accelerations"][0]["switch"]["ledger"]
    assert (ledger["on"]["served"], ledger["off"]["declined"]) == (3, 3)
    # Red both ways, the switch does not explain them: neither way's run asks for their causes again.
    for way in ("off", "on"):
        run_id = data["accelerations"][0]["switch"][way]["run"]
        stored = json.loads((tmp_path / ".promote" / "runs" / run_id / "run.json").read_text())
        assert stored["packages"][0]["reruns"] == [] and stored["packages"][0]["failed"] == 2


def test_a_path_that_drafts_what_nobody_accepts_is_idle_with_its_rate_shown(tmp_path: Path) -> None:
    workspace(tmp_path, "accepts-nothing")
    code, data = accel_json(tmp_path, "--no-bench")
    parity = data["accelerations"][0]["parity"]["ledger"]
    assert parity["on"]["acceptance"] == {"drafted": 12, "accepted": 0, "rate": 0.0}
    assert parity["off"]["acceptance"] is None
    [idle] = by_check(data)["acceleration-idle"]
    assert idle["severity"] == "warning"
    assert idle["message"] == (
        "served 4 of 4 requests with SPEC=1, but accepted 0 of 16 drafted tokens (0.0%): no faster by design"
    )
    assert code == 0
    text = run(tmp_path, "accel", "--no-bench").stdout
    assert (
        "parity covers 3 of 3 requests (switched off it served 0 of 3; accepted 0 of 12 drafted tokens (0.0%))" in text
    )


def test_a_drafter_that_is_accepted_is_not_idle(tmp_path: Path) -> None:
    workspace(tmp_path, "works")
    _, data = accel_json(tmp_path, "--no-bench")
    assert data["accelerations"][0]["parity"]["ledger"]["on"]["acceptance"] == {
        "drafted": 12,
        "accepted": 9,
        "rate": 0.75,
    }
    assert "acceleration-idle" not in by_check(data)


def test_ledger_lines_with_impossible_token_counts_are_unparseable(tmp_path: Path) -> None:
    from promote.accel.ledger import read_tally

    base = {"accel": "Spec", "outcome": "served", "reason": None, "seconds": 0.1, "request": {}}
    lines = [
        {**base, "drafted": 4, "accepted": 0},
        {**base, "drafted": 4, "accepted": 5},
        {**base, "accepted": 1},
        {**base, "drafted": -1},
        {**base, "drafted": True},
        {**base, "drafted": 2.5},
    ]
    ledger = tmp_path / "ledger.jsonl"
    ledger.write_text("".join(json.dumps(line) + "\n" for line in lines))
    t = read_tally(ledger, "Spec")
    assert (t.served, t.unparseable) == (1, 5)
    assert t.acceptance is not None and (t.acceptance.drafted, t.acceptance.accepted, t.acceptance.rate) == (4, 0, 0.0)


def test_an_audit_does_not_pass_tested_for_a_switch_that_does_not_switch(tmp_path: Path) -> None:
    fleet = make_fleet(tmp_path, names=("origin",))
    workspace(fleet.work, "ignores-switch")
    config = fleet.work / "promote.toml"
    config.write_text(config.read_text().replace('trunk = "main"', 'trunk = "main"\nmirrors = ["origin"]'))
    commit(fleet.work, "package and config")
    git(fleet.work, "push", "-q", "origin", "main")
    code, data = run_json(fleet.work, "audit")
    assert data["gates"]["tested"]["status"] == "fail"
    assert "switch-ineffective: Spec" in data["gates"]["tested"]["evidence"]
    assert code == 1


def test_a_finding_about_the_path_does_not_name_it_twice(tmp_path: Path) -> None:
    workspace(tmp_path, "ignores-switch")
    config = tmp_path / "promote.toml"
    # A speed target without parity, and a ledger written by nobody but the tests: findings whose subject is the path.
    config.write_text(
        config.read_text().replace(
            "parity = {", "bench = { rounds = 5, warmup = 0, command = [" + PY + ', "-c", "pass"] }\n#'
        )
    )
    result = run(tmp_path, "accel", "--json")
    data = json.loads(result.stdout)
    about_path = [f for f in data["findings"] if f["subject"] == "Spec"]
    assert {f["check"] for f in about_path} >= {"parity-missing", "switch-ineffective"}
    assert not [f for f in about_path if f["message"].startswith("Spec")]
    assert "Spec: Spec" not in run(tmp_path, "accel").stdout


def test_the_sweep_shows_each_class_latency_off_and_on_and_its_acceptance(tmp_path: Path) -> None:
    workspace(tmp_path, "works", steps=("sweep",))
    code, data = accel_json(tmp_path)
    classes = {c["label"]: c for c in data["accelerations"][0]["sweep"]["classes"]}
    hot = classes["temperature=0.5"]
    # The path on sleeps its 10 ms twice (the front door's and its own): slower than off, as the caller saw.
    assert hot["answered_off_median_s"] is not None and hot["answered_median_s"] > hot["answered_off_median_s"]
    assert hot["seat"]["acceptance"] == {"drafted": 12, "accepted": 9, "rate": 0.75}
    text = run(tmp_path, "accel").stdout
    header = next(line for line in text.splitlines() if "Request class" in line)
    assert header.split() == [
        "Request", "class", "Sent", "Served", "Declined", "Failed", "Answered", "elsewhere", "Accepted", "Median",
        "s,", "off", "Median", "s,", "on",
    ]  # fmt: skip
    row = next(line for line in text.splitlines() if line.strip().startswith("temperature=0.5"))
    assert "9 of 12 (75.0%)" in row and row.count("answered ") == 2
    assert code == 0


def test_a_sweep_without_a_ledger_says_not_measured_instead_of_zeros(tmp_path: Path) -> None:
    workspace(tmp_path, "works", steps=("sweep",))
    (tmp_path / "pkg" / "ledger.py").write_text("def record(*args, **kwargs):\n    pass\n")
    code, data = accel_json(tmp_path)
    assert [f["check"] for f in data["findings"]] == ["ledger-missing"]
    assert "whether SPEC=0 switches it off is not measured" in data["findings"][0]["message"]
    row = next(
        line for line in run(tmp_path, "accel").stdout.splitlines() if line.strip().startswith("temperature=0.5")
    )
    cells = re.split(r"\s{2,}", row.strip())
    assert cells[:7] == ["temperature=0.5", "3", *["not measured"] * 5]
    assert code == 0


def test_a_missing_model_directory_is_shown_whole_not_masked(tmp_path: Path) -> None:
    workspace(tmp_path, "works")
    models = tmp_path / "no-such-models"
    (tmp_path / "pkg" / "path.py").write_text(
        "import os, pathlib, sys\npathlib.Path(os.environ['SPEC_MODELS'], 'target', 'config.json').read_text()\n"
    )
    config = tmp_path / "promote.toml"
    config.write_text(
        config.read_text().replace('PATH_MODE = "works"', f'PATH_MODE = "works", SPEC_MODELS = "{models}"')
    )
    result = run(tmp_path, "accel", "--no-bench")
    assert f"{models}/target/config.json" in result.stdout
    assert "***" not in result.stdout


def test_undecided_says_which_step_and_why(tmp_path: Path) -> None:
    workspace(tmp_path, "works")
    config = tmp_path / "promote.toml"
    config.write_text(config.read_text().replace('"path.py", "parity"', '"gone.py", "parity"'))
    code, data = accel_json(tmp_path, "--no-bench")
    [undecided] = data["undecided"]
    assert (undecided["name"], undecided["step"]) == ("Spec", "parity")
    assert undecided["error"].startswith("`") and "gone.py" in undecided["error"] and "exited 2" in undecided["error"]
    assert data["verdict"] == "undecided" and code == 3
    text = run(tmp_path, "accel", "--no-bench").stdout
    assert (
        f"UNDECIDED: some evidence could not be decided, in these steps:\n  Spec: parity: {undecided['error']}" in text
    )


def test_the_switch_runs_accel_prints_are_in_the_history_and_not_compared_with_the_packages_own(tmp_path: Path) -> None:
    workspace(tmp_path, "works")
    _, data = accel_json(tmp_path, "--no-bench")
    switch = data["accelerations"][0]["switch"]
    for way, value in (("off", "0"), ("on", "1")):
        code, shown = run_json(tmp_path, "history", switch[way]["run"])
        assert code == 0 and shown["run"] == switch[way]["run"] and shown["kind"] == "accel-switch"
        assert shown["command"].endswith(f"(SPEC={value})")
        assert [t["test"] for t in shown["tests"]] == ["tests/test_path.py::test_the_path_answers"]
    # A later run of the package's own tests has no earlier run of its own to compare with.
    code, tested = run_json(tmp_path, "test")
    code, shown = run_json(tmp_path, "history", tested["run"])
    assert shown["deltas"]["previous"] is None


def test_the_stdlib_writer_records_token_counts_and_refuses_impossible_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    schema = json.loads(files("promote").joinpath("schemas/ledger.schema.json").read_text("utf-8"))
    from promote.accel.ledger_writer import record

    ledger = tmp_path / "ledger.jsonl"
    monkeypatch.setenv("PROMOTE_LEDGER", str(ledger))
    record("Spec", "served", seconds=0.2, request={}, drafted=4, accepted=0)
    record("Spec", "served", seconds=0.2, request={})
    for drafted, accepted in ((4, 5), (None, 1), (-1, None)):
        with pytest.raises(ValueError, match="must be"):
            record("Spec", "served", seconds=0.1, request={}, drafted=drafted, accepted=accepted)
    lines = [json.loads(line) for line in ledger.read_text().splitlines()]
    assert [(line.get("drafted"), line.get("accepted")) for line in lines] == [(4, 0), (None, None)]
    for line in lines:
        jsonschema.validate(line, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**lines[1], "accepted": 1}, schema)
