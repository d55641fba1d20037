"""promote accel: the kill switch both ways, numeric parity and the interleaved A/B, with real processes."""

from __future__ import annotations

import json
import platform
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.helpers.cli import run, run_json
from tests.helpers.gitrepos import commit, git
from tests.helpers.packages import write_config, write_package

PY = json.dumps(sys.executable)

# Writes an output chosen by MODE, different with the switch (FAST) on where the case asks for it.
MAKE = """
import json, os, sys
import numpy as np
out, mode, fast = sys.argv[1], sys.argv[2], os.environ["FAST"] == "1"
logits = np.linspace(-3, 3, 24, dtype=np.float32).reshape(2, 12)
if mode == "ulp" and fast:
    logits[1, 5] = np.nextafter(logits[1, 5], np.float32(9))
if mode in ("same", "ulp"):
    np.save(out, logits)  # numpy adds .npy to the path it is given
elif mode == "npz":
    np.savez(out + ".npz", logits=logits, probs=logits * (1.5 if fast else 1.0))
elif mode == "safetensors":
    from safetensors.numpy import save_file
    save_file({"logits": logits}, out + ".safetensors")
elif mode == "tokens":
    tokens = [5, 9, 2, 7, 7, 1]
    if fast:
        tokens[2], tokens[4] = 3, 8
    open(out, "w").write(json.dumps(tokens))
elif mode == "text":
    open(out, "w").write("hello, not an array")
elif mode == "shape":
    np.save(out, logits if fast else logits[:1])
elif mode == "fail":
    sys.exit("parity model failed to load")
"""


def accel_config(root: Path, *, parity: str | None = None, bench: str | None = None, extra: str = "") -> Path:
    config = write_config(root, [])
    lines = ["[[promote.accelerations]]", 'name = "Fast"', 'switch = { env = "FAST", on = "1", off = "0" }']
    if parity is not None:
        lines.append(f'parity = {{ command = [{PY}, "make.py", "{{out}}", "{parity}"] }}')
    if bench is not None:
        lines.append(f"bench = {bench}")
    config.write_text(config.read_text() + "\n".join([*lines, extra, ""]))
    (root / "make.py").write_text(MAKE)
    return config


def parity_of(tmp_path: Path, mode: str) -> tuple[int, dict]:
    accel_config(tmp_path, parity=mode)
    code, data = run_json(tmp_path, "accel")
    [accel] = data["accelerations"]
    return code, accel["parity"] | {"findings": data["findings"]}


def test_a_test_that_fails_only_with_the_switch_off_is_a_broken_kill_switch(tmp_path: Path) -> None:
    write_package(tmp_path, "pkg", {
        "tests/test_fast.py": '''
            import os

            def test_needs_the_fast_path():
                assert os.environ["FAST"] == "1"

            def test_breaks_on_the_fast_path():
                assert os.environ["FAST"] == "0"

            def test_either_way():
                assert os.environ["FAST"] in ("0", "1")
        ''',
    })  # fmt: skip
    config = write_config(tmp_path, [{"name": "pkg", "path": "pkg"}])
    config.write_text(
        config.read_text() + '[[promote.accelerations]]\nname = "Fast"\npackage = "pkg"\n'
        'switch = { env = "FAST", on = "1", off = "0" }\n'
    )
    code, data = run_json(tmp_path, "accel")
    assert code == 1
    [accel] = data["accelerations"]
    assert accel["switch"]["env"] == "FAST"
    assert (accel["switch"]["off"]["passed"], accel["switch"]["off"]["failed"]) == (2, 1)
    assert (accel["switch"]["on"]["passed"], accel["switch"]["on"]["failed"]) == (2, 1)
    switch = {f["check"]: f for f in data["findings"] if f["check"] in ("kill-switch-broken", "acceleration-broken")}
    assert switch["kill-switch-broken"]["subject"] == "tests/test_fast.py::test_needs_the_fast_path"
    assert switch["kill-switch-broken"]["cause"] == "FAST=0"
    assert switch["acceleration-broken"]["subject"] == "tests/test_fast.py::test_breaks_on_the_fast_path"
    # Both ways ran through promote's runner and are stored runs of their own.
    assert accel["switch"]["off"]["run"] != accel["switch"]["on"]["run"]
    # Each way's red test is green the other way: its cause is asked for (a rerun alone repeats it: genuine).
    for way, red in (("off", "test_needs_the_fast_path"), ("on", "test_breaks_on_the_fast_path")):
        stored = json.loads((tmp_path / ".promote" / "runs" / accel["switch"][way]["run"] / "run.json").read_text())
        reruns = stored["packages"][0]["reruns"]
        assert [(r["test"], r["verdict"]) for r in reruns] == [(f"tests/test_fast.py::{red}", "genuine")]
    text = run(tmp_path, "accel").stdout
    assert "Kill switch `FAST=0`" in text and "2 tests pass, 1 fail off" in text


def test_identical_arrays_are_bitwise_identical(tmp_path: Path) -> None:
    code, parity = parity_of(tmp_path, "same")
    assert code == 0
    assert parity["verdict"] == "identical"
    assert (parity["total"], parity["mismatched"], parity["max_ulp"], parity["first_mismatch"]) == (24, 0, 0, None)
    assert "bitwise identical over 24 values" in run(tmp_path, "accel").stdout


def test_one_ulp_in_one_place_differs_and_says_where(tmp_path: Path) -> None:
    code, parity = parity_of(tmp_path, "ulp")
    assert code == 1
    assert parity["verdict"] == "differs"
    assert (parity["mismatched"], parity["total"], parity["max_ulp"]) == (1, 24, 1)
    assert parity["first_mismatch"] == "[1, 5]"
    assert 0 < parity["max_abs_diff"] < 1e-6
    [finding] = [f for f in parity["findings"] if f["check"] == "parity-differs"]
    assert "1 of 24 values" in finding["message"] and "first at [1, 5]" in finding["message"]


def test_one_ulp_within_a_tolerance_passes_as_within_tolerance(tmp_path: Path) -> None:
    accel_config(tmp_path, parity="ulp")
    config = tmp_path / "promote.toml"
    config.write_text(config.read_text().replace('"ulp"] }', '"ulp"], atol = 1e-5 }'))
    code, data = run_json(tmp_path, "accel")
    assert code == 0
    assert data["accelerations"][0]["parity"]["verdict"] == "within-tolerance"
    assert data["accelerations"][0]["parity"]["max_ulp"] == 1


def test_flipped_tokens_are_counted_from_the_first(tmp_path: Path) -> None:
    code, parity = parity_of(tmp_path, "tokens")
    assert code == 1
    assert parity["verdict"] == "differs"
    assert (parity["tokens"], parity["tokens_flipped"], parity["total"], parity["first_mismatch"]) == (
        True, 2, 6, "[2]",
    )  # fmt: skip


def test_npz_and_safetensors_compare_array_by_array(tmp_path: Path) -> None:
    code, parity = parity_of(tmp_path, "npz")
    assert code == 1
    assert (parity["total"], parity["first_mismatch"]) == (48, "probs[0, 0]")
    assert parity["mismatched"] == 24  # every probability (none is 0.0, which scaling would leave alone)
    other = tmp_path / "st"
    other.mkdir()
    code, parity = parity_of(other, "safetensors")
    assert (code, parity["verdict"], parity["total"]) == (0, "identical", 24)


@pytest.mark.parametrize(
    ("mode", "says"),
    [
        ("text", "the parity output with the switch off is not an array (.npy, .npz, .safetensors), a JSON list of"),
        ("shape", "shapes differ: [1, 12] off, [2, 12] on"),
        ("fail", "exited 1: parity model failed to load"),
    ],
)
def test_bad_output_is_one_line_naming_the_command_and_the_rest_still_runs(
    tmp_path: Path, mode: str, says: str
) -> None:
    # The candidate clearly faster: two identical arms would now and then measure "slower" on a busy machine.
    faster = "import os, time; time.sleep(0.02 if os.environ['FAST'] == '1' else 0.06)"
    accel_config(tmp_path, parity=mode, bench=f'{{ command = [{PY}, "-c", "{faster}"], rounds = 5, warmup = 0 }}')
    result = run(tmp_path, "accel", "--json")
    assert result.exit_code == 3
    data = json.loads(result.stdout)
    [accel] = data["accelerations"]
    error = accel["parity"]["error"]
    assert accel["parity"]["verdict"] == "error" and "\n" not in error
    assert "make.py '{out}'" in error and says in error
    assert "Traceback" not in result.stderr
    # Nothing else is lost: the bench ran, and speed without parity is said to be so.
    assert accel["bench"]["rounds"] == 5
    assert "parity-missing" in [f["check"] for f in data["findings"]]


def test_a_candidate_twice_as_fast_measures_about_2x_with_alternating_order(tmp_path: Path) -> None:
    sleep = "import os, time; time.sleep(0.1 if os.environ['FAST'] == '1' else 0.2)"
    accel_config(tmp_path, bench=f'{{ command = [{PY}, "-c", "{sleep}"], rounds = 5, warmup = 0 }}')
    code, data = run_json(tmp_path, "accel")
    [accel] = data["accelerations"]
    bench = accel["bench"]
    assert bench["order"] == ["baseline", "candidate", "baseline", "candidate", "baseline"]
    low, high = bench["interval"]
    assert low <= bench["speedup"] <= high
    assert 1.3 < bench["speedup"] < 2.3
    assert bench["arms"]["baseline"]["median_s"] > bench["arms"]["candidate"]["median_s"]
    assert len(bench["arms"]["candidate"]["rounds"]) == 5
    assert bench["arms"]["baseline"]["load"] is not None  # the 1-minute load average, before and after
    # No target: measured, and a speed figure without parity is speed before parity (a warning); a command that
    # keeps no ledger leaves what the path served unmeasured (a warning too).
    assert bench["verdict"] == "measured"
    assert code == 0
    # A loaded machine (this one is shared) is said when both arms met more runnable tasks than it has cores.
    overloaded = ["bench-overloaded"] if bench["overloaded"] is not None else []
    assert [f["check"] for f in data["findings"]] == ["parity-missing", *overloaded, "ledger-missing"]
    assert bench["cases"] == [bench["cases"][0]] and bench["cases"][0]["name"] is None
    assert bench["cases"][0]["speedup"] == bench["speedup"]


def test_fewer_than_five_rounds_are_refused(tmp_path: Path) -> None:
    accel_config(tmp_path, bench=f'{{ command = [{PY}, "-c", "pass"], rounds = 3 }}')
    result = run(tmp_path, "accel")
    assert result.exit_code == 2
    assert "accelerations[0].bench.rounds: expected an integer from 5 to 1000" in result.stderr
    accel_config(tmp_path, bench=f'{{ command = [{PY}, "-c", "pass"], rounds = 5 }}')
    result = run(tmp_path, "accel", "--rounds", "4")
    assert result.exit_code == 2 and "fewer than 5 rounds" in result.stderr


BURN = """
import os, subprocess, sys, time
if os.environ["FAST"] == "1":
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(3)]
    time.sleep(0.4)
    for b in burners:
        b.kill()
    os._exit(0)  # not waited for: the burners' CPU is the machine's load, not this arm's work
time.sleep(0.4)
"""


def test_a_burner_during_one_arm_only_is_a_load_imbalance(tmp_path: Path) -> None:
    (tmp_path / "burn.py").write_text(BURN)
    accel_config(tmp_path, bench=f'{{ command = [{PY}, "burn.py"], rounds = 5, warmup = 0, load_margin = 0.5 }}')
    _, data = run_json(tmp_path, "accel")
    bench = data["accelerations"][0]["bench"]
    # Three busy loops are three more runnable tasks, however busy the machine already is.
    assert bench["arms"]["candidate"]["running"] > bench["arms"]["baseline"]["running"] + 1.5
    assert bench["load_imbalance"].startswith("load imbalance: tasks runnable meanwhile")
    assert "the machine was not the same for both arms" in run(tmp_path, "accel").stdout


def test_a_station_whose_os_build_is_not_listed_is_warned(tmp_path: Path) -> None:
    here = f"{platform.system()} {platform.release()}"
    accel_config(tmp_path, parity="same", extra='validated_on = ["Darwin 24.3.0"]')
    code, data = run_json(tmp_path, "accel")
    assert code == 0
    [station] = data["accelerations"][0]["stations"]
    assert station == {"name": "local", "os": here, "validated": False}
    [finding, no_ledger] = data["findings"]
    assert (finding["check"], finding["severity"], finding["subject"]) == ("os-unvalidated", "warning", "local")
    assert no_ledger["check"] == "ledger-missing"
    accel_config(tmp_path, parity="same", extra=f"validated_on = [{json.dumps(here)}]")
    code, data = run_json(tmp_path, "accel")
    assert [f["check"] for f in data["findings"]] == ["ledger-missing"]
    assert data["accelerations"][0]["stations"][0]["validated"] is True


def test_bench_against_a_baseline_ref_runs_it_from_a_worktree(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    bench = f'{{ command = [{PY}, "work.py"], rounds = 5, warmup = 0, target = 1.2 }}'
    accel_config(repo, bench=bench)
    commit(repo, "slow", {"work.py": "import time; time.sleep(0.2)\n"})
    old = git(repo, "rev-parse", "HEAD")
    commit(repo, "fast", {"work.py": "import time; time.sleep(0.1)\n"})
    code, data = run_json(repo, "bench", "Fast", "--baseline-ref", old)
    bench_result = data["accelerations"][0]["bench"]
    assert bench_result["baseline_ref"] == old
    assert 1.3 < bench_result["speedup"] < 2.3
    assert bench_result["verdict"] in ("met", "undecided")
    assert code == (0 if bench_result["verdict"] == "met" else 3)
    # The worktree is gone again.
    assert len(git(repo, "worktree", "list").splitlines()) == 1
    result = run(repo, "bench", "Fast", "--baseline-ref", "no-such-ref")
    assert result.exit_code == 2 and "--baseline-ref no-such-ref" in result.stderr


def test_accel_without_configured_accelerations_or_with_an_unknown_name_is_usage(tmp_path: Path) -> None:
    write_config(tmp_path, [])
    result = run(tmp_path, "accel")
    assert result.exit_code == 2 and "no [[promote.accelerations]] configured" in result.stderr
    accel_config(tmp_path, parity="same")
    result = run(tmp_path, "accel", "Slow")
    assert result.exit_code == 2 and "'Slow': no such acceleration" in result.stderr and "Fast" in result.stderr


def test_parity_outputs_compare_directly() -> None:
    from promote.accel.arrays import Output, compare

    a = np.array([1.0, -0.0, np.nan], dtype=np.float64)
    b = np.array([1.0, 0.0, np.nan], dtype=np.float64)
    result = compare(Output({"": a}, False, {}), Output({"": b}, False, {}), atol=0, rtol=0)
    # -0.0 and 0.0 are equal values in different bits: not identical, but no value differs.
    assert (result.verdict, result.mismatched) == ("within-tolerance", 0)


def test_a_config_without_a_switch_names_the_key(tmp_path: Path) -> None:
    config = write_config(tmp_path, [])
    config.write_text(config.read_text() + '[[promote.accelerations]]\nname = "Fast"\n')
    result = run(tmp_path, "accel")
    assert result.exit_code == 2
    assert "promote.accelerations[0].switch: expected a table { env, on, off } (this key is required)" in result.stderr
