"""`promote accel` on real mlx-lm speculative decoding: tiny random-weight models saved in the test, no download."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.resources import files
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from promote.core.errors import EXIT_BLOCKED, EXIT_OK
from tests.helpers import specdecode as spec

pytestmark = pytest.mark.slow

OFF_REASON = "SPEC_DECODE=0: speculative decoding is switched off"
SAMPLED_REASON = "temperature 0.8 > 0: only greedy drafts are verified exactly"
# The package's tests make five requests promote counts (three greedy, two sampled) and one into a ledger of its own.
TESTS_SAMPLED = 2
# What a bench may find about speed alone: the target, slower than off, a machine too loaded to tell.
SPEED_CHECKS = {"speed-target-missed", "acceleration-slower", "bench-overloaded"}


def schema(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(files("promote").joinpath(f"schemas/{name}.schema.json").read_text("utf-8"))
    return loaded


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The target and draft models, built once from fixed seeds and saved as mlx-lm checkpoints."""
    pytest.importorskip("mlx_lm")
    root = tmp_path_factory.mktemp("spec-models")
    return spec.write_package(root) / "models"


def workspace(root: Path, models: Path, *, switch: str = spec.SWITCH, bench: bool = True) -> Path:
    spec.write_package(root, models)
    spec.write_config(root, switch=switch, bench=bench)
    return root


def promote(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """promote as a user runs it: its own process, in the workspace, with no switch set by the caller."""
    return subprocess.run(
        [sys.executable, "-m", "promote", *args], cwd=root, env=spec.clean_env(), capture_output=True, text=True
    )


def accel_json(root: Path, *args: str) -> tuple[int, dict[str, Any], dict[str, Any]]:
    """`promote ARGS --json` (accel or bench), its output checked against the schema, and the one path's part."""
    done = promote(root, *args, "--json")
    assert done.stdout, done.stderr
    data = json.loads(done.stdout)
    jsonschema.validate(data, schema("accel"))
    [accel] = data["accelerations"]
    return done.returncode, data, accel


def rows(stdout: str) -> list[str]:
    """The report's lines, each row's measurement and result joined by one space (the columns' padding gone)."""
    return [" ".join(line.split()) for line in stdout.splitlines()]


def row(text: list[str], start: str) -> str:
    """The one row that starts with `start`."""
    [found] = [line for line in text if line.startswith(start)]
    return found


def outcomes(tally: dict[str, Any]) -> tuple[int, int, int]:
    return tally["served"], tally["declined"], tally["failed"]


def reasons(tally: dict[str, Any]) -> dict[str, int]:
    return {r["reason"]: r["count"] for r in tally["declined_reasons"]}


def test_speculative_decoding_switched_on_and_off_holds_with_identical_greedy_tokens(
    tmp_path: Path, models: Path
) -> None:
    root = workspace(tmp_path, models)

    code, data, accel = accel_json(root, "accel", "--no-bench")

    assert (code, data["verdict"], data["findings"]) == (EXIT_OK, "holds", [])
    switch = accel["switch"]
    for way in ("off", "on"):
        assert (switch[way]["passed"], switch[way]["failed"], switch[way]["errors"]) == (spec.TESTS, 0, 0)
    # The path's own counter: served only with the switch on, and only the greedy requests.
    tests = spec.TEST_GREEDY_REQUESTS + TESTS_SAMPLED
    assert outcomes(switch["ledger"]["on"]) == (spec.TEST_GREEDY_REQUESTS, TESTS_SAMPLED, 0)
    assert reasons(switch["ledger"]["on"]) == {SAMPLED_REASON: TESTS_SAMPLED}
    assert outcomes(switch["ledger"]["off"]) == (0, tests, 0)
    assert reasons(switch["ledger"]["off"]) == {OFF_REASON: tests}
    parity = accel["parity"]
    assert (parity["verdict"], parity["tokens"]) == ("identical", True)
    assert (parity["total"], parity["mismatched"]) == (spec.PARITY_TOKENS, 0)
    # Greedy verification at temperature 0: every request's generation is plain decoding's, token for token.
    lengths = [(r["verdict"], r["first_divergence"], r["length_off"], r["length_on"]) for r in parity["requests"]]
    assert lengths == [("identical", None, n, n) for n in spec.PARITY_LENGTHS]
    assert outcomes(parity["ledger"]["on"]) == (spec.PARITY_REQUESTS, 0, 0)
    assert outcomes(parity["ledger"]["off"]) == (0, spec.PARITY_REQUESTS, 0)
    assert (accel["bench"], accel["ledger"]["measured"]) == (None, True)


def test_the_bench_interleaves_the_arms_and_counts_what_each_served(tmp_path: Path, models: Path) -> None:
    root = workspace(tmp_path, models)

    code, data, accel = accel_json(root, "bench", spec.NAME)

    bench = accel["bench"]
    assert (bench["error"], bench["metric"]) == (None, "tokens_per_s")
    assert [c["name"] for c in bench["cases"]] == ["agree", "disagree"]
    for case in bench["cases"]:
        assert case["rounds"] == 5
        low, high = case["interval"]
        assert 0 < low <= case["speedup"] <= high
        assert all(r["metric"] > 0 for arm in case["arms"].values() for r in arm["rounds"])
    served = 2 * 5 * spec.BENCH_REQUESTS
    assert outcomes(bench["ledger"]["on"]) == (served, 0, 0)
    assert outcomes(bench["ledger"]["off"]) == (0, served, 0)
    # Acceptance per workload, from each case's own ledger: the random draft model's proposals are kept on
    # "agree" and never on "disagree", which is idle by itself (pooled, "agree" would hide it).
    agree, disagree = (c["acceptance"]["candidate"] for c in bench["cases"])
    assert agree["rate"] >= 0.05 and disagree["drafted"] > 0 and disagree["accepted"] == 0
    assert all(c["acceptance"]["baseline"] is None for c in bench["cases"])
    idle = [f for f in data["findings"] if f["check"] == "acceleration-idle"]
    assert [(f["severity"], f["subject"]) for f in idle] == [("warning", f"{spec.NAME}, case disagree")]
    # How fast is the machine's to say (its load, the two arms' times), not this test's: whatever else promote
    # found is about speed, and the exit code follows from it.
    checks = {f["check"] for f in data["findings"]} - {"acceleration-idle"}
    assert checks <= SPEED_CHECKS
    errors = any(f["severity"] == "error" for f in data["findings"])
    assert code == (EXIT_BLOCKED if errors else EXIT_OK)


def test_the_terminal_report_says_what_ran_both_ways(tmp_path: Path, models: Path) -> None:
    root = workspace(tmp_path, models, bench=False)

    done = promote(root, "accel")

    assert done.returncode == EXIT_OK, done.stderr
    text = rows(done.stdout)
    assert text[0] == "spec-decode (spec)"
    assert "Kill switch `SPEC_DECODE=0` 6 tests pass off, 6 tests pass on (SPEC_DECODE=1)" in text
    # Each row as far as it reads today: a row may go on to say more (how many drafted tokens were accepted).
    served = f"spec-decode served 3 of 5 requests (declined 2: {SAMPLED_REASON}"
    assert row(text, f"Served in its tests with `SPEC_DECODE=1` {served}")
    parity = "bitwise identical over 41 tokens; parity covers 3 of 3 requests (switched off it served 0 of 3"
    assert row(text, f"Numeric parity {parity}")
    assert text[-1] == "every accelerated path holds"


def test_a_switch_the_module_never_reads_leaves_the_path_serving_when_off(tmp_path: Path, models: Path) -> None:
    # An operator's kill switch named SPEC_DRAFT while the module reads SPEC_DECODE: the path always drafts.
    root = workspace(tmp_path, models, switch="SPEC_DRAFT", bench=False)

    code, data, accel = accel_json(root, "accel")
    text = promote(root, "accel").stdout

    # What promote measured: the switched-off runs served every greedy request, in the tests and in parity.
    assert outcomes(accel["switch"]["ledger"]["off"]) == (spec.TEST_GREEDY_REQUESTS, TESTS_SAMPLED, 0)
    assert outcomes(accel["parity"]["ledger"]["off"]) == (spec.PARITY_REQUESTS, 0, 0)
    assert row(
        rows(text),
        "Numeric parity bitwise identical over 41 tokens; parity covers 3 of 3 requests (switched off it served 3 of 3",
    )
    findings = data["findings"]
    assert (code, data["verdict"], [f["check"] for f in findings]) == (EXIT_BLOCKED, "broken", ["switch-ineffective"])
    assert findings[0]["cause"] == "SPEC_DRAFT=0"
    assert "SPEC_DRAFT=0 still served 3 of 5 requests in its tests, 3 of 3 parity requests" in findings[0]["message"]
    assert text.splitlines()[-1].startswith("BROKEN")


def test_every_line_the_path_writes_is_a_valid_ledger_line(tmp_path: Path, models: Path) -> None:
    pkg = spec.write_package(tmp_path, models)
    ledger_schema = schema("ledger")
    seen = {}
    for switch in ("0", "1"):
        ledger = tmp_path / f"ledger-{switch}.jsonl"
        env = {**spec.clean_env(), spec.SWITCH: switch, "PROMOTE_LEDGER": str(ledger)}
        argv = [sys.executable, "-m", "specserve.parity", "--out", str(tmp_path / f"parity-{switch}.json")]
        subprocess.run(argv, cwd=pkg, env=env, check=True, capture_output=True)
        lines = [json.loads(line) for line in ledger.read_text().splitlines()]
        for line in lines:
            jsonschema.validate(line, ledger_schema)
        seen[switch] = [(line["accel"], line["outcome"], line["request"]["max_tokens"]) for line in lines]
        for line in lines:
            if line["outcome"] == "served":
                assert line["drafted"] >= line["accepted"] >= 0
            else:
                assert "drafted" not in line and "accepted" not in line
    assert seen["1"] == [(spec.NAME, "served", n) for n in spec.PARITY_LENGTHS]
    assert seen["0"] == [(spec.NAME, "declined", n) for n in spec.PARITY_LENGTHS]
    assert (tmp_path / "parity-0.json").read_text() == (tmp_path / "parity-1.json").read_text()
