"""The bench judged as a serving team judges it: slower than off, per workload, in the path's own units, loaded."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path

import pytest

from promote import config as config_mod
from promote.accel.bench import machine_cores, schedule
from promote.accel.verify import run_accelerations, run_bench
from promote.evidence.accel_section import section
from promote.evidence.render import _environment
from tests.accel.test_ledger import WRITER, accel_json, by_check
from tests.helpers.cli import run, run_json
from tests.helpers.gitrepos import commit, git, make_fleet
from tests.helpers.packages import write_config

PY = json.dumps(sys.executable)

# The path's own figure: tokens per second by workload, off and on; a fixed sleep stands for the model's load.
METRIC = """
import json, os, sys, time
out, key, workload = sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else "code"
on = os.environ["FAST"] == "1"
time.sleep(0.15)  # import and model load: the same with the path on and off
per_workload = {"code": 2.0, "prose": 1.0, "long": 0.5}  # how many times faster the path decodes
figures = {
    "tokens_per_s": 100.0 * (per_workload[workload] if on else 1.0),
    "ttft_s": 0.1 / (per_workload[workload] if on else 1.0),
    "missing": None, "negative": -3.0, "text": "fast", "nan": float("nan"),
}
value = figures.get(key)
if key != "absent":
    json.dump({"tokens": 64} if value is None else {key: value}, open(out, "w"))
"""


def bench_config(root: Path, bench: str) -> Path:
    config = write_config(root, [])
    lines = ["[[promote.accelerations]]", 'name = "Fast"', 'switch = { env = "FAST", on = "1", off = "0" }',
             f"bench = {bench}", ""]  # fmt: skip
    config.write_text(config.read_text() + "\n".join(lines))
    (root / "metric.py").write_text(METRIC)
    return config


def test_a_path_twice_as_slow_as_off_is_acceleration_slower_and_exits_1(tmp_path: Path) -> None:
    sleep = "import os, time; time.sleep(0.5 if os.environ['FAST'] == '1' else 0.1)"
    bench_config(tmp_path, f'{{ command = [{PY}, "-c", "{sleep}"], rounds = 5, warmup = 0, target = 1.5 }}')
    code, data = accel_json(tmp_path)
    bench = data["accelerations"][0]["bench"]
    assert bench["interval"][1] < 1.0
    assert bench["verdict"] == "slower" and bench["cases"][0]["verdict"] == "slower"
    found = by_check(data)
    [slower] = found["acceleration-slower"]
    assert (slower["severity"], slower["subject"]) == ("error", "Fast")
    assert "its whole interval is below 1.0x, the accelerated path is slower than the baseline" in slower["message"]
    # Slower than off is not also a near miss of the target.
    assert "speed-target-missed" not in found
    assert code == 1
    text = run(tmp_path, "accel").stdout
    assert "; target 1.5x: slower" in text and "BROKEN" in text


def test_cases_run_in_one_schedule_each_with_its_verdict_and_slower_names_the_cliff(tmp_path: Path) -> None:
    cases = '{ code = ["code"], prose = ["prose"], long = ["long"] }'
    bench = f'{{ command = [{PY}, "metric.py", "{{out}}", "tokens_per_s"], rounds = 5, warmup = 1, target = 1.5, '
    bench_config(tmp_path, bench + f'metric = "tokens_per_s", cases = {cases} }}')
    code, data = accel_json(tmp_path)
    bench = data["accelerations"][0]["bench"]
    by_name = {c["name"]: c for c in bench["cases"]}
    assert list(by_name) == ["code", "prose", "long"]
    assert [by_name[n]["speedup"] for n in by_name] == [2.0, 1.0, 0.5]
    assert [by_name[n]["verdict"] for n in by_name] == ["met", "missed", "slower"]
    # Several cases: their figures are per case, the bench's own verdict is the worst of theirs.
    assert (bench["speedup"], bench["interval"], bench["verdict"]) == (None, None, "slower")
    for case in by_name.values():
        assert len(case["arms"]["baseline"]["rounds"]) == 5
        # Each case's arms alternate which goes first, so neither arm always is.
        assert case["order"][:2] in (["baseline", "candidate"], ["candidate", "baseline"])
    found = by_check(data)
    assert [f["subject"] for f in found["acceleration-slower"]] == ["Fast, case long"]
    assert [f["subject"] for f in found["speed-target-missed"]] == ["Fast, case prose"]
    assert code == 1
    result = run(tmp_path, "accel")
    assert "bench: 3 cases x 5 rounds x 2 arms = 30 runs (+ 6 warm-ups)" in result.stderr
    # The terminal's table: one row per case, like the incident's.
    rows = [
        "code   2.00x by tokens_per_s  2.00-2.00  5       met",
        "prose  1.00x by tokens_per_s  1.00-1.00  5       missed",
        "long   0.50x by tokens_per_s  0.50-0.50  5       slower",
    ]
    for row in rows:
        assert f"\n  {row}  " in result.stdout
    header = (
        "  Case   Speedup                Interval   Rounds  Verdict  Wall time  Accepted, baseline  Accepted, candidate"
    )
    assert header + "  Load\n" in result.stdout
    # The command writes no ledger: what each case's arms accepted is not measured, never a 0.
    assert "long   0.50x by tokens_per_s  0.50-0.50  5       slower   " in result.stdout
    assert result.stdout.count("  not measured        not measured ") == 3


def test_the_schedule_rotates_the_cases_and_alternates_each_cases_arms() -> None:
    rounds = schedule(3, 6)
    assert [[k for k, _ in turn] for turn in rounds[:3]] == [[0, 1, 2], [1, 2, 0], [2, 0, 1]]
    for case in range(3):
        firsts = [first for turn in rounds for k, first in turn if k == case]
        assert firsts == [firsts[0], not firsts[0]] * 3  # its baseline goes first every other round
    assert {turn[0][0] for turn in rounds} == {0, 1, 2}  # no case always goes first
    assert schedule(1, 4) == [[(0, True)], [(0, False)], [(0, True)], [(0, False)]]


def test_tokens_per_second_twice_as_high_is_2x_by_the_metric_while_wall_time_barely_moves(tmp_path: Path) -> None:
    bench = f'{{ command = [{PY}, "metric.py", "{{out}}", "tokens_per_s"], rounds = 5, warmup = 0, '
    bench_config(tmp_path, bench + 'metric = "tokens_per_s" }')
    code, data = accel_json(tmp_path)
    bench = data["accelerations"][0]["bench"]
    assert (bench["metric"], bench["better"]) == ("tokens_per_s", "higher")
    assert bench["speedup"] == 2.0 and bench["interval"] == [2.0, 2.0]
    # The wall clock, model load included, says about 1x: it stays recorded beside the path's own figure.
    [case] = bench["cases"]
    assert 0.5 < case["wall_speedup"] < 1.8  # loose (a shared machine); the metric says exactly 2x
    assert [r["metric"] for r in bench["arms"]["candidate"]["rounds"]] == [200.0] * 5
    assert bench["arms"]["baseline"]["metric"] == 100.0
    assert code == 0
    text = run(tmp_path, "accel").stdout
    assert "2.00x by tokens_per_s (2.00-2.00, 5 rounds" in text and "; wall time " in text


@pytest.mark.parametrize(("better", "speedup", "verdict"), [("lower", 2.0, "measured"), ("higher", 0.5, "slower")])
def test_a_metric_where_lower_is_better_is_off_over_on(
    tmp_path: Path, better: str, speedup: float, verdict: str
) -> None:
    bench = f'{{ command = [{PY}, "metric.py", "{{out}}", "ttft_s"], rounds = 5, warmup = 0, '
    bench_config(tmp_path, bench + f'metric = "ttft_s", better = "{better}" }}')
    code, data = accel_json(tmp_path)
    bench = data["accelerations"][0]["bench"]
    assert (bench["speedup"], bench["verdict"], bench["better"]) == (pytest.approx(speedup), verdict, better)
    assert code == (1 if verdict == "slower" else 0)


@pytest.mark.parametrize(("key", "problem"), [
    ("missing", "has no 'missing' key"),
    ("negative", "has 'negative' = -3.0, not a finite positive number"),
    ("text", "has 'text' = \"fast\", not a finite positive number"),
    ("nan", "is not a JSON object: NaN is not a JSON number"),
    ("absent", "was not written"),
])  # fmt: skip
def test_a_round_without_its_metric_is_one_line_naming_arm_and_round(tmp_path: Path, key: str, problem: str) -> None:
    bench = f'{{ command = [{PY}, "metric.py", "{{out}}", "{key}"], rounds = 5, warmup = 0, metric = "{key}", '
    bench += 'better = "higher" }'
    bench_config(tmp_path, bench)
    code, data = accel_json(tmp_path)
    error = data["accelerations"][0]["bench"]["error"]
    command = f"{sys.executable} metric.py '{{out}}' {key}"
    assert error == f"`{command}` (baseline, round 1): the metrics file it writes to {{out}} {problem}"
    assert code == 3
    text = run(tmp_path, "accel").stdout
    assert f"not measured: `{command}` (baseline, round 1)" in text and "promote-bench-" not in text


def test_a_metric_needs_out_in_the_command(tmp_path: Path) -> None:
    bench_config(tmp_path, f'{{ command = [{PY}, "metric.py"], metric = "tokens_per_s" }}')
    result = run(tmp_path, "accel")
    assert result.exit_code == 2
    [line] = result.stderr.strip().splitlines()
    assert "accelerations[0].bench.command: expected a command with {out} where it writes its 'tokens_per_s'" in line


# Both arms run more busy loops than the machine has cores: every run waits in the queue, whoever else is here.
BURN = """
import os, subprocess, sys, time
burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(int(sys.argv[1]))]
time.sleep(0.5)
for b in burners:
    b.kill()
os._exit(0)  # not waited for: the burners' CPU is the machine's load, not the arm's work
"""


def test_both_arms_above_the_machines_cores_is_bench_overloaded(tmp_path: Path) -> None:
    (tmp_path / "burn.py").write_text(BURN)
    cores = machine_cores()
    bench_config(tmp_path, f'{{ command = [{PY}, "burn.py", "{cores + 2}"], rounds = 5, warmup = 0 }}')
    code, data = accel_json(tmp_path)
    bench = data["accelerations"][0]["bench"]
    assert bench["overloaded"]["cores"] == cores and bench["overloaded"]["source"] == "runnable"
    assert bench["overloaded"]["load"] > cores
    [finding] = by_check(data)["bench-overloaded"]
    assert finding["severity"] == "warning"
    assert finding["message"].endswith(f"on {cores} cores in both arms: the A/B measures the queue")
    assert code == 0  # a warning: the figure stands, labelled
    text = run(tmp_path, "accel").stdout
    assert "; overloaded: load " in text and f" on {cores} cores)" in text
    # Judged against a machine of many more cores, the same runs are no overload: the cores are the yardstick.
    config = config_mod.load(tmp_path / "promote.toml")
    [accel] = config.accelerations
    roomy = run_bench(config, accel, cores=(cores + 2) * 50)
    assert roomy.overload is None and roomy.cases[0].overload is None
    assert os.cpu_count() is not None


def test_the_page_gives_one_row_per_case(tmp_path: Path) -> None:
    cases = '{ code = ["code"], long = ["long"] }'
    bench = f'{{ command = [{PY}, "metric.py", "{{out}}", "tokens_per_s"], rounds = 5, warmup = 0, '
    bench_config(tmp_path, bench + f'metric = "tokens_per_s", cases = {cases} }}')
    config = config_mod.load(tmp_path / "promote.toml")
    data = section(config, run_accelerations(config))
    page = _environment(html=False).get_template("accel.md.j2").render(section=data)
    assert (
        "| Case | Speedup | Interval | Rounds | Verdict | Wall time | Accepted, baseline | Accepted, candidate | Load |"
        in page
    )
    assert "| code | 2.00x by tokens_per_s | 2.00-2.00 | 5 | measured | " in page
    assert "| long | 0.50x by tokens_per_s | 0.50-0.50 | 5 | slower | " in page
    html = _environment(html=True).get_template("accel.html.j2").render(section=data)
    assert '<table class="accel cases">' in html and "<td>long</td><td>0.50x by tokens_per_s</td>" in html


def test_an_audit_with_the_bench_fails_tested_for_a_path_slower_than_off(tmp_path: Path) -> None:
    fleet = make_fleet(tmp_path, names=("origin",))
    sleep = "import os, time; time.sleep(0.5 if os.environ['FAST'] == '1' else 0.1)"
    config = bench_config(fleet.work, f'{{ command = [{PY}, "-c", "{sleep}"], rounds = 5, warmup = 0 }}')
    config.write_text(config.read_text().replace('trunk = "main"', 'trunk = "main"\nmirrors = ["origin"]'))
    commit(fleet.work, "a bench", {})
    git(fleet.work, "push", "-q", "origin", "main")

    code, data = run_json(fleet.work, "audit", "--bench")

    tested = data["gates"]["tested"]
    assert tested["status"] == "fail"
    assert "acceleration-slower: Fast" in tested["evidence"]
    assert code == 1


# A drafter per workload: with FAST=1 each request is served with 4 drafted tokens, of which the target keeps 3
# on "agree" and none on "disagree"; switched off it declines. The baseline sleeps longer, so the candidate is
# the faster arm on every round and no verdict of the speed itself turns on the machine's noise.
DRAFTER = """
import os, sys, time

import ledger

workload, on = sys.argv[1], os.environ["FAST"] == "1"
time.sleep(0.02 if on else 0.12)
for i in range(2):
    request = {"workload": workload, "i": i}
    if on:
        kept = 3 if workload == "agree" else 0
        ledger.record("Fast", "served", seconds=0.01, request=request, drafted=4, accepted=kept)
    else:
        ledger.record("Fast", "declined", reason="FAST=0", seconds=0.01, request=request)
"""


def test_acceptance_is_per_case_and_idle_names_only_the_case_that_keeps_no_draft(tmp_path: Path) -> None:
    (tmp_path / "drafter.py").write_text(DRAFTER)
    shutil.copy(WRITER, tmp_path / "ledger.py")
    cases = '{ agree = ["agree"], disagree = ["disagree"] }'
    bench_config(tmp_path, f'{{ command = [{PY}, "drafter.py"], rounds = 5, warmup = 1, cases = {cases} }}')
    code, data = accel_json(tmp_path)
    bench = data["accelerations"][0]["bench"]
    by_name = {c["name"]: c for c in bench["cases"]}
    # 6 runs of each arm per case (a warm-up and 5 rounds), 2 requests each, 4 tokens drafted per request.
    assert by_name["agree"]["acceptance"] == {
        "baseline": None,
        "candidate": {"drafted": 48, "accepted": 36, "rate": 0.75},
    }
    assert by_name["disagree"]["acceptance"] == {
        "baseline": None,
        "candidate": {"drafted": 48, "accepted": 0, "rate": 0.0},
    }
    for case in by_name.values():
        assert (case["ledger"]["on"]["served"], case["ledger"]["off"]["declined"]) == (12, 12)
        # A case's file holds its own workload's lines only.
        assert case["ledger"]["off"]["served"] == case["ledger"]["on"]["declined"] == 0
    # The bench's own ledger still pools every case: 37.5% there hides the case that keeps nothing.
    assert bench["ledger"]["on"]["acceptance"] == {"drafted": 96, "accepted": 36, "rate": 0.375}
    [idle] = by_check(data)["acceleration-idle"]
    assert (idle["severity"], idle["subject"], idle["cause"]) == ("warning", "Fast, case disagree", "FAST=1")
    assert idle["message"] == (
        "served 12 of 12 requests in the bench's case disagree with FAST=1, but accepted 0 of 48 drafted tokens "
        "(0.0%): no faster by design"
    )
    assert code == 0  # a warning: the path holds, and says where it idles
    text = run(tmp_path, "accel").stdout
    assert "Accepted, baseline  Accepted, candidate" in text
    assert re.search(r"\n  agree +\S+ +\S+ +5 +measured +- +- +36 of 48 \(75\.0%\)  ", text)
    assert re.search(r"\n  disagree +\S+ +\S+ +5 +measured +- +- +0 of 48 \(0\.0%\)  ", text)
    assert "acceleration-idle  Fast, case disagree: served 12 of 12 requests in the bench's case disagree" in text
    config = config_mod.load(tmp_path / "promote.toml")
    page = (
        _environment(html=False).get_template("accel.md.j2").render(section=section(config, run_accelerations(config)))
    )
    assert "| Wall time | Accepted, baseline | Accepted, candidate | Load |" in page
    # The page escapes a lone `-` (a list marker in Markdown) as `\-`; the load column is whatever the machine met.
    dash = r"\\-"
    assert re.search(
        rf"\| disagree \| [^|]+ \| [^|]+ \| 5 \| measured \| {dash} \| {dash} \| 0 of 48 \(0\.0%\) \| ", page
    )


def test_a_case_the_path_never_served_is_bench_vacuous_by_name_while_the_pool_served(tmp_path: Path) -> None:
    # On "prose" the path declines every request even switched on: the pooled ledger (it served "code") hid it.
    drafter = DRAFTER.replace('kept = 3 if workload == "agree" else 0', "kept = 3").replace(
        "    if on:",
        '    if on and workload == "prose":\n'
        '        ledger.record("Fast", "declined", reason="prose", seconds=0.01, request=request)\n'
        "    elif on:",
    )
    (tmp_path / "drafter.py").write_text(drafter)
    shutil.copy(WRITER, tmp_path / "ledger.py")
    cases = '{ code = ["code"], prose = ["prose"] }'
    bench_config(tmp_path, f'{{ command = [{PY}, "drafter.py"], rounds = 5, warmup = 0, cases = {cases} }}')
    code, data = accel_json(tmp_path)
    assert data["accelerations"][0]["bench"]["ledger"]["on"]["served"] == 10
    [vacuous] = by_check(data)["bench-vacuous"]
    assert (vacuous["severity"], vacuous["subject"]) == ("error", "Fast, case prose")
    assert "in the bench's candidate arm of case prose: its speedup is not the path's" in vacuous["message"]
    assert code == 1
