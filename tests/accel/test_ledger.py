"""The path's own counter: real processes append to PROMOTE_LEDGER; evidence counts only what the path served."""

from __future__ import annotations

import json
import os
import shutil
import sys
from importlib.resources import files
from pathlib import Path

import jsonschema
import pytest

from promote.accel.engaged import grouped
from tests.helpers.cli import run, run_json
from tests.helpers.packages import write_config, write_package

PY = json.dumps(sys.executable)
WRITER = Path(__file__).resolve().parents[2] / "promote" / "accel" / "ledger_writer.py"

# An accelerated path in plain Python, its plain fallback, and a front door with a fallback ladder.
PATH = """
import json, os, sys, time

import ledger  # the stdlib-only helper, vendored beside the path as a package would copy it

MODE = os.environ.get("PATH_MODE", "declines-all")


class Unavailable(Exception):
    pass


def plain(request):
    time.sleep(0.02)
    return sum(request["prompt"])


def answer(request):
    started = time.perf_counter()
    t = request.get("temperature", 0.0)
    if os.environ.get("FAST") != "1":
        reason = "FAST=0: switched off"
    elif MODE == "declines-all":
        try:
            raise RuntimeError("head dim 96 falls off the fused kernel")
        except RuntimeError as e:
            reason = f"RuntimeError: {e}"
    elif MODE == "fails-hot" and t > 0:
        reason = f"503: temperature {t} is not served"
        ledger.record("Fast", "failed", reason=reason, seconds=time.perf_counter() - started, request=request)
        raise Unavailable("503")
    else:
        time.sleep(0.05)  # the path's own work
        ledger.record("Fast", "served", seconds=time.perf_counter() - started, request=request)
        return sum(request["prompt"])
    value = plain(request)
    ledger.record("Fast", "declined", reason=reason, seconds=time.perf_counter() - started, request=request)
    return value


def front_door(request):
    # The ladder: the seat, then a hosted rung that answers anything but the hottest requests.
    try:
        return answer(request)
    except Unavailable:
        if request["temperature"] >= 0.9:
            raise
        return plain(request)


def sweep(out):
    with open(out, "w") as f:
        for t in (0.0, 0.5, 0.9):
            for i in range(4):
                request = {"model": "big", "temperature": t, "prompt": [i, 2]}
                started = time.perf_counter()
                try:
                    front_door(request)
                    ok, error = True, None
                except Unavailable as e:
                    ok, error = False, f"Unavailable: {e}"
                seconds = time.perf_counter() - started
                f.write(json.dumps({"request": request, "ok": ok, "error": error, "seconds": seconds}) + "\\n")


if __name__ == "__main__":
    what = sys.argv[1]
    if what == "parity":
        if os.environ.get("PATH_GARBAGE") and os.environ.get("PROMOTE_LEDGER"):
            with open(os.environ["PROMOTE_LEDGER"], "a") as f:
                f.write("not json\\n[1, 2]\\n" + json.dumps({"accel": "Fast", "outcome": "exploded"}) + "\\n")
                other = {"accel": "Other", "outcome": "served", "reason": None, "seconds": 1, "request": {}}
                f.write(json.dumps(other) + "\\n")
        tokens = [answer({"prompt": p, "temperature": 0.0}) for p in ([1, 2], [3, 4], [5, 6])]
        open(sys.argv[2], "w").write(json.dumps(tokens))
    elif what == "bench":
        for p in ([1], [2]):
            answer({"prompt": p, "temperature": 0.0})
    elif what == "sweep":
        sweep(sys.argv[2])
"""

TEST = """
import path

def test_the_path_answers():
    assert path.answer({"prompt": [1, 2], "temperature": 0.0}) == 3
"""


def workspace(root: Path, mode: str, *, ledger: bool = True, steps: tuple[str, ...] = ("parity", "bench")) -> Path:
    pkg = write_package(root, "pkg", {
        "path.py": PATH, "tests/test_path.py": TEST,
        "pyproject.toml": '[tool.pytest.ini_options]\npythonpath = ["."]\n',
    })  # fmt: skip
    if ledger:
        shutil.copy(WRITER, pkg / "ledger.py")
    else:
        (pkg / "ledger.py").write_text("def record(*args, **kwargs):\n    pass\n")
    configure(root, "Fast", "FAST", mode, steps)
    return root


def configure(root: Path, name: str, switch: str, mode: str, steps: tuple[str, ...]) -> None:
    """promote.toml: the package `pkg` (its PATH_MODE set to `mode`) and one acceleration over it, with `steps`."""
    config = write_config(root, [{"name": "pkg", "path": "pkg", "workers": 1}])
    lines = ['[[promote.accelerations]]', f'name = "{name}"', 'package = "pkg"',
             f'switch = {{ env = "{switch}", on = "1", off = "0" }}']  # fmt: skip
    if "parity" in steps:
        lines.append(f'parity = {{ command = [{PY}, "path.py", "parity", "{{out}}"] }}')
    if "bench" in steps:
        lines.append(f'bench = {{ command = [{PY}, "path.py", "bench"], rounds = 5, warmup = 0 }}')
    if "sweep" in steps:
        lines.append(f'sweep = {{ command = [{PY}, "path.py", "sweep", "{{out}}"], group_by = ["temperature"] }}')
    env = f'env = {{ PATH_MODE = "{mode}" }}\n'
    config.write_text(config.read_text().replace("workers = 1\n", f"workers = 1\n{env}") + "\n".join(lines) + "\n")


def accel_json(root: Path, *args: str) -> tuple[int, dict]:
    """`promote accel --json`, checked against the schema it ships with."""
    code, data = run_json(root, "accel", *args)
    jsonschema.validate(data, json.loads(files("promote").joinpath("schemas/accel.schema.json").read_text("utf-8")))
    return code, data


def by_check(data: dict) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for f in data["findings"]:
        out.setdefault(f["check"], []).append(f)
    return out


def test_a_path_that_declines_everything_makes_parity_bench_and_switch_vacuous(tmp_path: Path) -> None:
    workspace(tmp_path, "declines-all")
    code, data = accel_json(tmp_path)
    [accel] = data["accelerations"]
    # Today's measurements stand: the outputs are identical, the bench ran...
    assert accel["parity"]["verdict"] == "identical"
    assert accel["bench"]["rounds"] == 5
    # ...but the path served none of it.
    assert accel["parity"]["ledger"]["on"]["served"] == 0
    assert accel["parity"]["ledger"]["on"]["declined"] == 3
    assert accel["parity"]["ledger"]["off"]["declined_reasons"] == [{"reason": "FAST=0: switched off", "count": 3}]
    assert accel["bench"]["ledger"]["on"]["declined"] == 10  # 2 requests in each of 5 rounds
    checks = by_check(data)
    [parity] = checks["parity-vacuous"]
    assert parity["severity"] == "error"
    assert parity["message"] == (
        "served 0 of 3 requests (declined 3: RuntimeError: head dim 96 falls off the fused kernel) in the "
        "parity run with FAST=1: identical outputs prove nothing"
    )
    assert checks["bench-vacuous"][0]["severity"] == "error"
    assert "served 0 of 10 requests" in checks["bench-vacuous"][0]["message"]
    [switch] = checks["switch-vacuous"]
    assert switch["severity"] == "warning" and "served 0 of 1 request " in switch["message"]
    assert "ledger-missing" not in checks
    assert code == 1
    text = run(tmp_path, "accel").stdout
    assert "bitwise identical over 3 tokens; vacuous: the path served 0 of 3 requests" in text
    assert "not a measurement of Fast: it served 0 of 10 requests in the candidate arm" in text
    assert "BROKEN" in text


def test_a_path_that_serves_everything_it_is_given_has_its_share_stated(tmp_path: Path) -> None:
    workspace(tmp_path, "serves-all")
    code, data = accel_json(tmp_path, "--no-bench")
    [accel] = data["accelerations"]
    assert (accel["parity"]["ledger"]["on"]["served"], accel["parity"]["ledger"]["off"]["served"]) == (3, 0)
    assert accel["switch"]["ledger"]["on"]["served"] == 1
    assert not {"parity-vacuous", "switch-vacuous", "ledger-missing"} & set(by_check(data))
    assert code == 0
    text = run(tmp_path, "accel", "--no-bench").stdout
    assert "bitwise identical over 3 tokens; parity covers 3 of 3 requests (switched off it served 0 of 3)" in text


def test_a_path_that_fails_one_class_fast_while_a_fallback_answers_is_named_by_class(tmp_path: Path) -> None:
    workspace(tmp_path, "fails-hot", steps=("sweep",))
    code, data = accel_json(tmp_path)
    [accel] = data["accelerations"]
    classes = {c["label"]: c for c in accel["sweep"]["classes"]}
    assert accel["sweep"]["group_by"] == ["temperature"]
    assert list(classes) == ["temperature=0.0", "temperature=0.5", "temperature=0.9"]
    assert (classes["temperature=0.0"]["seat"]["served"], classes["temperature=0.0"]["answered_elsewhere"]) == (4, 0)
    assert (classes["temperature=0.5"]["answered"], classes["temperature=0.5"]["seat"]["failed"]) == (4, 4)
    assert classes["temperature=0.5"]["answered_elsewhere"] == 4
    assert (classes["temperature=0.9"]["caller_failed"], classes["temperature=0.9"]["caller_failed_off"]) == (4, 0)
    found = sorted((f["check"], f["subject"]) for f in data["findings"] if f["check"] != "switch-vacuous")
    assert found == [
        ("acceleration-broken", "temperature=0.9"),
        ("acceleration-failed-request", "temperature=0.5"),
        ("acceleration-failed-request", "temperature=0.9"),
        ("served-elsewhere", "temperature=0.5"),
    ]
    failed = next(f for f in data["findings"] if f["check"] == "acceleration-failed-request")
    assert failed["message"].startswith("Fast: 4 of 4 at temperature=0.5 failed in a median 0.")
    assert "too fast to be work, a decision" in failed["message"]
    assert failed["cause"] == "503: temperature 0.5 is not served"
    elsewhere = next(f for f in data["findings"] if f["check"] == "served-elsewhere")
    assert elsewhere["message"] == (
        "Fast: 4 answered at temperature=0.5, the seat served 0 and declined 0: a fallback answered 4 under the "
        "name you asked for"
    )
    assert code == 1
    text = run(tmp_path, "accel").stdout
    assert "Request class    Sent  Served  Declined  Failed" in text
    assert "temperature=0.5  4     0       0         4 (503: temperature 0.5 is not served)  4  " in text


def test_a_path_that_writes_no_ledger_keeps_todays_results_with_ledger_missing(tmp_path: Path) -> None:
    workspace(tmp_path, "declines-all", ledger=False)
    code, data = accel_json(tmp_path, "--no-bench")
    [accel] = data["accelerations"]
    assert accel["parity"]["verdict"] == "identical"
    assert accel["ledger"] == {"lines": 0, "measured": False}
    assert [(f["check"], f["severity"]) for f in data["findings"]] == [("ledger-missing", "warning")]
    assert code == 0
    text = run(tmp_path, "accel", "--no-bench").stdout
    assert "bitwise identical over 3 tokens; engagement not measured (no ledger)" in text
    assert "What the path served  engagement not measured (no ledger)" in text


def test_garbage_ledger_lines_are_counted_and_reported_never_fatal(tmp_path: Path) -> None:
    workspace(tmp_path, "serves-all", steps=("parity",))
    config = tmp_path / "promote.toml"
    config.write_text(
        config.read_text().replace('PATH_MODE = "serves-all"', 'PATH_MODE = "serves-all", PATH_GARBAGE = "1"')
    )
    result = run(tmp_path, "accel", "--json")
    assert "Traceback" not in result.stderr
    on = json.loads(result.stdout)["accelerations"][0]["parity"]["ledger"]["on"]
    # Three lines that are not ledger lines; another path's line is not this path's and is not counted at all.
    assert (on["served"], on["unparseable"]) == (3, 3)
    assert result.exit_code == 0
    assert (
        "parity covers 3 of 3 requests (switched off it served 0 of 3; 3 unparseable ledger lines)"
        in run(tmp_path, "accel").stdout
    )


def test_each_line_the_paths_write_is_a_valid_ledger_line(tmp_path: Path) -> None:
    schema = json.loads(files("promote").joinpath("schemas/ledger.schema.json").read_text("utf-8"))
    sys.path.insert(0, str(WRITER.parent))
    try:
        from ledger_writer import record
    finally:
        sys.path.pop(0)
    ledger = tmp_path / "ledger.jsonl"
    os.environ["PROMOTE_LEDGER"] = str(ledger)
    try:
        record("Fast", "served", seconds=0.25, request={"temperature": 0.0, "prompt": [1, 2]})
        record("Fast", "declined", reason="temperature 0.8 > 0", seconds=0.5, request={})
        with pytest.raises(ValueError, match="outcome must be one of"):
            record("Fast", "refused", seconds=0.1, request={})
    finally:
        del os.environ["PROMOTE_LEDGER"]
    record("Fast", "served", seconds=0.1, request={})  # no PROMOTE_LEDGER: nothing written, nothing raised
    lines = [json.loads(line) for line in ledger.read_text().splitlines()]
    assert len(lines) == 2
    for line in lines:
        jsonschema.validate(line, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**lines[0], "outcome": "refused"}, schema)


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="the arms run one after the other on one core")
def test_the_sweeps_two_arms_run_at_the_same_time(tmp_path: Path) -> None:
    script = (
        "import json, os, sys, time\n"
        "start = time.time(); time.sleep(1.5)\n"
        "open('span-' + os.environ['FAST'], 'w').write(json.dumps([start, time.time()]))\n"
        "open(sys.argv[1], 'w').write(json.dumps({'request': {}, 'ok': True, 'error': None, 'seconds': 1.5}))\n"
    )
    (tmp_path / "slow.py").write_text(script)
    config = write_config(tmp_path, [])
    config.write_text(
        config.read_text() + '[[promote.accelerations]]\nname = "Fast"\nswitch = { env = "FAST" }\n'
        f'sweep = {{ command = [{PY}, "slow.py", "{{out}}"] }}\n'
    )
    code, data = accel_json(tmp_path)
    (off_start, off_end), (on_start, on_end) = (json.loads((tmp_path / f"span-{v}").read_text()) for v in "01")
    assert on_start < off_end and off_start < on_end  # the two arms' runs overlap
    sweep = data["accelerations"][0]["sweep"]
    assert (sweep["sent_off"], sweep["classes"][0]["answered"], sweep["classes"][0]["label"]) == (1, 1, "every request")
    # The caller's view alone: no ledger, so what was answered elsewhere is not measured.
    assert sweep["classes"][0]["answered_elsewhere"] is None
    assert [f["check"] for f in data["findings"]] == ["ledger-missing"]
    assert code == 0


def test_a_sweep_without_out_or_with_an_unknown_key_names_the_key(tmp_path: Path) -> None:
    config = write_config(tmp_path, [])
    head = config.read_text() + '[[promote.accelerations]]\nname = "Fast"\nswitch = { env = "FAST" }\n'
    config.write_text(head + 'sweep = { command = ["python", "sweep.py"] }\n')
    result = run(tmp_path, "accel")
    assert result.exit_code == 2 and "Traceback" not in result.stderr
    assert "promote.accelerations[0].sweep.command: expected a command writing what the caller saw to {out}" in (
        result.stderr
    )
    config.write_text(head + 'sweep = { command = ["python", "sweep.py", "{out}"], group = ["temperature"] }\n')
    result = run(tmp_path, "accel")
    assert result.exit_code == 2
    assert "promote.accelerations[0].sweep.group: unknown key; did you mean 'group_by'?" in result.stderr


def test_reasons_past_the_second_are_counted_together_with_their_requests() -> None:
    reasons = (("RuntimeError: x", 3), ("temperature 0.8 > 0", 2), ("batch > 1", 1), ("no draft", 1))
    assert grouped(reasons) == "RuntimeError: x (3); temperature 0.8 > 0 (2); 2 other reasons (2)"
    assert grouped(reasons[:3]) == "RuntimeError: x (3); temperature 0.8 > 0 (2); 1 other reason (1)"
    assert grouped(reasons[:1]) == "RuntimeError: x"
