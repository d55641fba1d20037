"""Outputs of the team's own tools read as promised, with real commands: arrays in their own type, every JSON
reader bounded, a yardstick arm that skips items, a bench metric read the right way round."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from promote.core.errors import EXIT_BLOCKED, EXIT_OK, EXIT_UNDECIDED, EXIT_USAGE
from tests.accel.test_ledger import accel_json, by_check
from tests.helpers.cli import run, run_json
from tests.helpers.gitrepos import commit, git, make_fleet
from tests.helpers.packages import write_config, write_package

PY = json.dumps(sys.executable)

# A parity command writing arrays of one kind or another, different with the switch (FAST) on where asked.
ARRAYS = """
import os, sys
import numpy as np
out, mode, fast = sys.argv[1], sys.argv[2], os.environ["FAST"] == "1"
if mode == "complex":
    # The same real parts; the imaginary parts 4 to 9 apart with the path on.
    a = np.array([1 + 2j, 3 + 4j], dtype=np.complex128)
    np.save(out, a + (np.array([4j, 9j]) if fast else 0))
elif mode in ("strings", "strings-differ"):
    words = ["served", "declined", "served"]
    np.save(out, np.array(words if not (fast and mode == "strings-differ") else ["served", "failed", "served"]))
elif mode in ("records", "records-differ"):
    kind = np.dtype([("token", "<i4"), ("logprob", "<f4")])
    rows = [(5, -0.25), (9, -1.5)] if not (fast and mode == "records-differ") else [(5, -0.25), (7, -1.5)]
    np.save(out, np.array(rows, dtype=kind))
elif mode == "dates":
    np.save(out, np.array(["2026-01-01", "2026-01-02"], dtype="datetime64[D]"))
"""


HEADER = '[[promote.accelerations]]\nname = "Fast"\nswitch = { env = "FAST", on = "1", off = "0" }\n'


def with_tool(root: Path, name: str, script: str, steps: str) -> Path:
    """promote.toml with the acceleration Fast and its `steps` (TOML lines), and the tool `name` beside it."""
    config = write_config(root, [])
    config.write_text(config.read_text() + HEADER + steps + "\n")
    (root / name).write_text(script)
    return config


def parity_config(root: Path, mode: str) -> None:
    with_tool(
        root, "arrays.py", ARRAYS, f'parity = {{ command = [{PY}, "arrays.py", "{{out}}", "{mode}"], atol = 0.0 }}'
    )


def test_complex_outputs_are_compared_as_complex(tmp_path: Path) -> None:
    parity_config(tmp_path, "complex")
    code, data = accel_json(tmp_path)
    parity = data["accelerations"][0]["parity"]
    # The imaginary parts count: both values differ, by the magnitude of their difference.
    assert (parity["verdict"], parity["mismatched"], parity["total"]) == ("differs", 2, 2)
    assert parity["max_abs_diff"] == pytest.approx(9.0)
    assert by_check(data)["parity-differs"][0]["severity"] == "error"
    assert code == EXIT_BLOCKED


@pytest.mark.parametrize(
    ("mode", "verdict", "code"),
    [("strings", "identical", EXIT_OK), ("strings-differ", "differs", EXIT_BLOCKED),
     ("records", "identical", EXIT_OK), ("records-differ", "differs", EXIT_BLOCKED)],
)  # fmt: skip
def test_strings_and_records_are_compared_exactly(tmp_path: Path, mode: str, verdict: str, code: int) -> None:
    parity_config(tmp_path, mode)
    got, data = accel_json(tmp_path)
    parity = data["accelerations"][0]["parity"]
    assert (parity["verdict"], got) == (verdict, code)
    if verdict == "differs":
        assert (parity["mismatched"], parity["first_mismatch"]) == (1, "[1]")


def test_an_array_of_a_kind_promote_cannot_compare_is_output_unreadable_by_its_role(tmp_path: Path) -> None:
    parity_config(tmp_path, "dates")
    result = run(tmp_path, "accel", "--json")
    assert "Traceback" not in result.stderr
    data = json.loads(result.stdout)
    [finding] = by_check(data)["output-unreadable"]
    assert (finding["subject"], finding["severity"]) == ("the parity output with the switch off", "warning")
    assert "its array holds datetime64[D] values, which promote cannot compare" in finding["message"]
    assert "promote-parity-" not in result.stdout  # the file by its role, never promote's temporary path
    assert result.exit_code == EXIT_UNDECIDED


# A tool that writes hostile JSON wherever promote reads one: its ledger lines, the yardstick's items, the
# sweep's caller lines, token parity and the bench's metrics file.
HOSTILE = """
import json, os, sys
step, out = sys.argv[1], sys.argv[2]
deep = "[" * 50000 + "]" * 50000
huge = "9" * 400
fast = os.environ["FAST"] == "1"
good = {"accel": "Fast", "outcome": "served" if fast else "declined", "reason": None if fast else "switched off",
        "seconds": 0.01, "request": {"temperature": 0}}
ledger = os.environ.get("PROMOTE_LEDGER")
if ledger:
    nested = json.dumps(good).replace("0}", '{"a":' * 3000 + "0" + "}" * 3001)
    bad = [deep, json.dumps(good).replace("0.01", huge), nested]
    open(ledger, "a").write("\\n".join([*bad, json.dumps(good)]) + "\\n")
if step == "quality":
    lines = [json.dumps({"item": f"item-{i}", "passed": True}) for i in range(400)]
    lines += [deep, '{"item": "item-x", "passed": ' + huge + "}"]
elif step == "sweep":
    lines = [json.dumps({"request": {"temperature": 0}, "ok": True, "error": None, "seconds": 0.01}), deep,
             '{"request": {"temperature": 0}, "ok": true, "error": null, "seconds": ' + huge + "}"]
elif step == "parity":
    lines = [deep]
else:
    lines = ['{"tokens_per_s": ' + huge + "}"]
open(out, "w").write("\\n".join(lines) + "\\n")
"""


def hostile_config(root: Path, *, bench: bool) -> Path:
    cmd = f'[{PY}, "hostile.py", "STEP", "{{out}}"]'
    steps = [f"{step} = {{ command = {cmd.replace('STEP', step)} }}" for step in ("parity", "sweep", "quality")]
    if bench:
        steps.append(f'bench = {{ command = {cmd.replace("STEP", "bench")}, rounds = 5, warmup = 0, '
                     'metric = "tokens_per_s" }')  # fmt: skip
    return with_tool(root, "hostile.py", HOSTILE, "\n".join(steps))


def test_hostile_json_in_every_reader_is_counted_or_one_line_never_a_traceback(tmp_path: Path) -> None:
    hostile_config(tmp_path, bench=True)
    code, data = accel_json(tmp_path)
    [path] = data["accelerations"]
    # Each refused line is counted where the reader counts what it cannot read; the good ones are read.
    assert path["quality"]["unparseable"] == 4 and path["quality"]["items"] == 400
    assert path["quality"]["ledger"]["on"] == path["quality"]["ledger"]["on"] | {"served": 1, "unparseable": 3}
    assert path["sweep"]["caller_unparseable"] == 4
    # A document is refused whole: the parity output by its role, the bench's metrics file by arm and round.
    [unreadable] = by_check(data)["output-unreadable"]
    assert unreadable["subject"] == "the parity output with the switch off"
    assert "nested deeper than 64 levels" in unreadable["message"]
    error = path["bench"]["error"]
    assert "(baseline, round 1): the metrics file it writes to {out} is not a JSON object: " in error
    assert "an integer of 400 digits is out of range" in error
    assert {u["step"] for u in data["undecided"]} == {"parity", "bench"}
    assert code == EXIT_UNDECIDED


def test_an_audit_over_hostile_json_still_writes_its_page(tmp_path: Path) -> None:
    fleet = make_fleet(tmp_path, names=("origin",))
    write_package(fleet.work, "pkg", {"test_a.py": "def test_ok():\n    pass\n"})
    config = hostile_config(fleet.work, bench=False)
    config.write_text(config.read_text() + '\n[[promote.packages]]\nname = "pkg"\npath = "pkg"\n')
    commit(fleet.work, "package and hostile tools")
    git(fleet.work, "push", "-q", "origin", "main")

    code, data = run_json(fleet.work, "audit")

    assert data["gates"]["tested"]["status"] == "undecided" and code == EXIT_UNDECIDED
    assert all((fleet.work / data["pages"][kind]).is_file() for kind in ("md", "html", "json"))
    page = (fleet.work / data["pages"]["md"]).read_text()
    assert "the parity output with the switch off" in page


# A bench whose command writes its time to first token: the path on is really twice as slow.
TTFT = """
import json, os, sys, time
first = 0.3 if os.environ["FAST"] == "1" else 0.15
time.sleep(first)
json.dump({"ttft_s": first, "score": 1.0}, open(sys.argv[1], "w"))
"""


def ttft_config(root: Path, extra: str) -> Path:
    bench = f'bench = {{ command = [{PY}, "ttft.py", "{{out}}"], rounds = 5, warmup = 0, target = 1.5, {extra} }}'
    return with_tool(root, "ttft.py", TTFT, bench)


def test_a_time_metric_without_better_is_lower_is_better_by_its_name(tmp_path: Path) -> None:
    ttft_config(tmp_path, 'metric = "ttft_s"')
    code, data = accel_json(tmp_path)
    bench = data["accelerations"][0]["bench"]
    assert (bench["better"], bench["verdict"], bench["speedup"]) == ("lower", "slower", pytest.approx(0.5, rel=0.05))
    assert by_check(data)["acceleration-slower"][0]["severity"] == "error"
    assert code == EXIT_BLOCKED


def test_a_metric_and_wall_time_that_disagree_leave_the_bench_undecided_with_both_figures(tmp_path: Path) -> None:
    # `better` given the wrong way round: the metric says 2x faster, the clock says about half as fast.
    ttft_config(tmp_path, 'metric = "ttft_s", better = "higher"')
    code, data = accel_json(tmp_path)
    bench = data["accelerations"][0]["bench"]
    assert bench["verdict"] == "undecided" and bench["cases"][0]["wall_interval"][1] < 1 / 1.1
    [undecided] = data["undecided"]
    assert undecided["step"] == "bench"
    assert "2.00x (2.00-2.00) by ttft_s (higher is better) but wall time 0." in undecided["error"]
    assert "they disagree in direction" in undecided["error"]
    assert code == EXIT_UNDECIDED
    assert "ttft_s and wall time disagree" in run(tmp_path, "accel").stdout


def test_a_metric_of_unknown_direction_must_say_better(tmp_path: Path) -> None:
    config = ttft_config(tmp_path, 'metric = "score"')
    result = run(tmp_path, "accel")
    assert result.exit_code == EXIT_USAGE
    [line] = result.stderr.strip().splitlines()
    assert f'{config}: promote.accelerations[0].bench.better: expected "higher" or "lower": which way \'score\'' in line
