"""Each test's story over real `promote test` and `promote audit` runs, in a real git repository."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from promote.evidence import pages as evidence
from tests.helpers.cli import run, run_json
from tests.helpers.gitrepos import commit, git
from tests.helpers.packages import write_package

WINDOW = 7
SUITE = """
import pathlib, pytest

COUNTER = pathlib.Path(__file__).parent / "counter.txt"


def test_flaky():
    # What a test that depends on timing or a remote does: the harness decides, run by run, through this file.
    assert COUNTER.read_text().strip() != "fail"


@pytest.mark.skip(reason="quarantined: flaky on the station")
def test_quarantined():
    pass


@pytest.mark.requires("checkpoint:qwen3-27b-4bit")
def test_needs_model():
    pass


def test_ok():
    pass
"""


def repository(root: Path, files: dict[str, str], *, window: int = WINDOW, never_ran_after: int = 3) -> Path:
    """A git repository with one package `pkg` and a promote.toml reading stories over `window` runs."""
    write_package(root, "pkg", files)
    (root / "promote.toml").write_text(
        '[promote]\ntrunk = "main"\nmax_reruns = 1\n\n[[promote.packages]]\nname = "pkg"\npath = "pkg"\n\n'
        f"[promote.history]\nwindow = {window}\nnever_ran_after = {never_ran_after}\n"
    )
    (root / ".gitignore").write_text(".promote/\npkg/counter.txt\n")
    git(root, "init", "-q", "-b", "main")
    commit(root, "start", {})
    return root


def test_run(root: Path, counter: str = "pass") -> dict[str, Any]:
    (root / "pkg" / "counter.txt").write_text(counter + "\n")
    _, data = run_json(root, "test")
    return data


test_run.__test__ = False  # type: ignore[attr-defined]


def findings_of(data: dict[str, Any], check: str) -> list[dict[str, Any]]:
    return [f for f in data["findings"] if f["check"] == check]


def test_a_flaky_test_on_one_commit_is_told_as_such_never_as_fixed_and_its_story_ends_once_fixed(
    tmp_path: Path,
) -> None:
    root = repository(tmp_path, {"test_a.py": SUITE})
    head = git(root, "rev-parse", "HEAD")
    runs = [test_run(root, "fail" if n in (2, 4) else "pass") for n in range(7)]

    [flaky] = findings_of(runs[-1], "flaky-history")
    assert flaky["severity"] == "warning" and flaky["subject"] == "test_a.py::test_flaky"
    assert flaky["message"].startswith(f"failed 2 of 7 runs on {head[:7]} (last failed 2 runs ago); flip rate 67%,")
    assert "failure rate 29%; reruns: " in flaky["message"]
    # Nothing changed between the runs: no delta calls the test fixed or newly failing, and says what it is.
    code, listing = run_json(root, "history")
    assert code == 0 and len(listing["runs"]) == 7
    assert all(not r["deltas"]["fixed"] and not r["deltas"]["newly_failing"] for r in listing["runs"])
    flipped = [d for r in listing["runs"] for d in r["deltas"]["same_commit"]]
    assert [d["after"] for d in flipped] == ["passed", "failed", "passed", "failed"]  # newest first
    assert flipped[0]["flaky"] == {"failed": 2, "runs": 6}
    text = run(root, "history").stdout
    assert "test_a.py::test_flaky passed again, flaky: 2 of 6" in text and "+1 fixed" not in text
    # Nor does it count fixes at all between runs of one commit: it says it was the same commit.
    assert "+0 fixed" not in text and sum("same commit" in line for line in text.splitlines()) == 6
    assert all(r["deltas"]["commit_unchanged"] for r in listing["runs"][:-1])

    # Skipped every run, and blocked by a checkpoint no station has: never ran, with the reason; the latter an error.
    never = {f["subject"]: f for f in findings_of(runs[-1], "never-ran")}
    assert never["test_a.py::test_quarantined"]["severity"] == "warning"
    assert never["test_a.py::test_quarantined"]["message"].startswith("skipped in all 7 runs since 20")
    assert never["test_a.py::test_quarantined"]["message"].endswith(": quarantined: flaky on the station")
    assert never["test_a.py::test_needs_model"]["severity"] == "error"
    assert never["test_a.py::test_needs_model"]["message"].endswith(
        ": needs checkpoint:qwen3-27b-4bit, which no station has"
    )
    assert not findings_of(runs[1], "never-ran"), "two runs are fewer than never_ran_after"
    # The run's own record holds what the history told of it, as its report does.
    kept = json.loads((root / ".promote" / "runs" / runs[-1]["run"] / "run.json").read_text())
    assert {"flaky-history", "never-ran"} <= {f["check"] for f in kept["findings"]} and kept["wall_s"] > 0

    code, stories = run_json(root, "history", "--tests")
    assert code == 0
    by_test = {s["test"]: s for s in stories["tests"]}
    flaky_story = by_test["test_a.py::test_flaky"]
    assert (flaky_story["package"], flaky_story["runs"], flaky_story["failed"], flaky_story["flaky"]) == (
        "pkg",
        7,
        2,
        2,
    )
    assert by_test["test_a.py::test_flaky"]["commits"] == [head]
    jsonschema.validate(stories, json.loads((Path(evidence.__file__).parent.parent / "schemas" /
                                             "history.schema.json").read_text()))  # fmt: skip
    code, timeline = run_json(root, "history", "--test", "test_a.py::test_flaky")
    assert [e["outcome"] for e in timeline["timeline"]] == ["passed", "passed", "failed", "passed", "failed",
                                                             "passed", "passed"]  # fmt: skip
    assert {e["commit"] for e in timeline["timeline"]} == {head}

    # Fixed by a real commit, then green for a whole window: the story ends.
    fix = commit(root, "fix the flaky test", {"pkg/test_a.py": SUITE.replace('!= "fail"', '!= "never"')})
    after = [test_run(root, "fail") for _ in range(WINDOW)]
    assert findings_of(after[0], "flaky-history"), "the runs on the old commit are still in the window"
    assert not findings_of(after[-1], "flaky-history")
    code, stories = run_json(root, "history", "--tests")
    assert "test_a.py::test_flaky" not in {s["test"] for s in stories["tests"]}
    assert {s["test"] for s in stories["tests"]} == {"test_a.py::test_quarantined", "test_a.py::test_needs_model"}
    code, listing = run_json(root, "history", "--limit", "1")
    assert listing["runs"][0]["commit"] == fix


def test_a_test_red_run_after_run_says_so_beside_its_failure(tmp_path: Path) -> None:
    root = repository(tmp_path, {"test_a.py": "def test_ok():\n    pass\n\n\ndef test_bad():\n    assert False\n"})
    runs = [test_run(root) for _ in range(3)]

    assert runs[1]["red_streaks"] == [], "two runs are fewer than a streak"
    [streak] = runs[2]["red_streaks"]
    assert (streak["package"], streak["test"], streak["runs"]) == ("pkg", "test_a.py::test_bad", 3)
    jsonschema.validate(runs[2], json.loads((Path(evidence.__file__).parent.parent / "schemas" /
                                             "test.schema.json").read_text()))  # fmt: skip
    text = run(root, "test").stdout
    assert f"  pkg: test_a.py::test_bad (failed; red for 4 runs since {streak['since'][:10]})" in text


THIRTY = "".join(f"def test_{n:02d}():\n    pass\n\n\n" for n in range(30))


def test_a_deleted_module_is_tests_dropped_naming_it_and_the_commit_and_a_renamed_one_is_not(tmp_path: Path) -> None:
    root = repository(tmp_path, {"test_keep.py": "def test_a():\n    pass\n", "test_big.py": THIRTY,
                                 "test_old_name.py": "def test_moved():\n    pass\n"})  # fmt: skip
    first = test_run(root)
    assert not findings_of(first, "tests-dropped")
    git(root, "rm", "-q", "pkg/test_big.py")
    git(root, "commit", "-q", "-m", "remove the big module")
    removed = git(root, "rev-parse", "HEAD")
    commit(root, "an unrelated change after it")

    second = test_run(root)

    [dropped] = findings_of(second, "tests-dropped")
    assert dropped["severity"] == "error" and dropped["subject"] == "test_big.py"
    assert dropped["message"].startswith("30 tests gone from pkg (32 -> 2 collected, run ")
    assert dropped["message"].endswith(f": test_big.py (30); removed by {removed[:7]}")
    assert dropped["cause"] == removed and len(dropped["tests"]) == 30
    assert run(root, "test").exit_code == 0, "told once, by the run that found it"

    git(root, "mv", "pkg/test_old_name.py", "pkg/test_new_name.py")
    git(root, "commit", "-q", "-m", "rename a module")
    third = test_run(root)
    assert not findings_of(third, "tests-dropped")
    assert third["packages"][0]["passed"] == 2


def test_an_audit_page_has_tests_with_a_story_and_the_chart_counts_them(tmp_path: Path) -> None:
    root = repository(tmp_path / "work", {"test_a.py": SUITE}, never_ran_after=2)
    git(tmp_path, "init", "-q", "--bare", "-b", "main", "origin.git")
    git(root, "remote", "add", "origin", str(tmp_path / "origin.git"))
    git(root, "push", "-q", "origin", "main")
    test_run(root, "fail")
    (root / "pkg" / "counter.txt").write_text("pass\n")
    code, audit = run_json(root, "audit")
    today = audit["run"][:4] + "-" + audit["run"][4:6] + "-" + audit["run"][6:8]
    assert code in (1, 3), audit
    assert {f["check"] for f in audit["findings"]} >= {"flaky-history", "never-ran"}
    doc = json.loads(Path(audit["pages"]["json"]).read_text())
    jsonschema.validate(doc, evidence.schema())
    assert [s["test"] for s in doc["stories"]["tests"]] == [
        "test_a.py::test_needs_model", "test_a.py::test_flaky", "test_a.py::test_quarantined"
    ]  # fmt: skip
    assert doc["history"][-1]["never_ran"] == 2 and doc["history"][0]["flaky"] == 1
    md = Path(audit["pages"]["md"]).read_text()
    section = md.split("### Tests with a story", 1)[1].split("###", 1)[0]
    assert "**flaky-history** `test_a.py::test_flaky` (pkg): failed 1 of 2 runs on" in section
    assert md.index("### Tests with a story") < md.index("### Since the last comparable run")
    html = Path(audit["pages"]["html"]).read_text()
    assert html.count('class="swatch"') == 5 and "never ran</text>" in html

    # The Tested gate fails night after night (a test needs a checkpoint no station has): the third says so.
    assert audit["gates"]["tested"]["status"] == "fail"
    for nights in (2, 3):
        _, audit = run_json(root, "audit")
        told = [line for line in audit["gates"]["tested"]["evidence"] if "audits, since" in line]
        assert told == ([] if nights < 3 else [f"gate tested failed in each of the last 3 audits, since {today}"])
    listed = run(root, "history", "--tests").stdout.splitlines()
    assert listed[-1] == f"gate tested failed in each of the last 3 audits, since {today}"
    head = "stories over the last 4 runs (window 7): 2 never-ran, 1 flaky-history, 1 gate(s) failing audit after audit"
    assert listed[0] == head and len(listed) == 5


@pytest.mark.parametrize("workers", [1, 2])
def test_a_test_its_own_options_deselect_in_every_run_never_ran_once_each_run_counted_alike(
    tmp_path: Path, workers: int
) -> None:
    suite = "def test_on():\n    pass\n\n\ndef test_off():\n    pass\n\n\ndef test_also_on():\n    pass\n"
    root = repository(tmp_path, {"test_a.py": suite, "pytest.ini": '[pytest]\naddopts = -k "not test_off"\n'})
    config = root / "promote.toml"
    config.write_text(config.read_text().replace('path = "pkg"\n', f'path = "pkg"\nworkers = {workers}\n'))

    runs = [test_run(root) for _ in range(3)]

    # Counted as pytest counts it (2 passed, 1 deselected): the deselected test is no test that ran.
    assert [(r["packages"][0]["passed"], r["packages"][0]["failed"]) for r in runs] == [(2, 0)] * 3
    assert not findings_of(runs[1], "never-ran")
    [never] = findings_of(runs[-1], "never-ran")
    assert never["subject"] == "test_a.py::test_off" and never["severity"] == "warning"
    assert never["message"].startswith("deselected in all 3 runs since 20")
    assert never["message"].endswith(": left out by the package's own options (-k, -m or --deselect, in its pytest"
                                      " configuration or its args)")  # fmt: skip
    _, timeline = run_json(root, "history", "--test", "test_a.py::test_off")
    assert [e["outcome"] for e in timeline["timeline"]] == ["deselected"] * 3


FILTERING_CI = """\
name: ci
on: [push, pull_request]
jobs:
  tests:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - run: python -m pytest pkg -k "not slow"
"""


def test_a_test_no_ci_job_runs_is_never_ran_over_the_audits_whatever_runs_here_between_them(tmp_path: Path) -> None:
    suite = "def test_fast():\n    pass\n\n\ndef test_slow():\n    pass\n\n\ndef test_slow_too():\n    pass\n"
    suite += "\n\ndef test_needs_package():\n    import no_such_package_here  # noqa: F401\n"
    suite = (
        "import pytest\n\n\n"
        + suite
        + ('\n\n@pytest.mark.requires("checkpoint:a-7b", "checkpoint:b-7b")\ndef test_needs_two():\n    pass\n')
    )
    root = repository(tmp_path / "work", {"test_a.py": suite}, never_ran_after=2)
    commit(root, "ci", {".github/workflows/ci.yml": FILTERING_CI})
    git(tmp_path, "init", "-q", "--bare", "-b", "main", "origin.git")
    git(root, "remote", "add", "origin", str(tmp_path / "origin.git"))
    git(root, "push", "-q", "origin", "main")

    _, first = run_json(root, "audit")
    assert not findings_of(first, "never-ran"), "one audit is fewer than never_ran_after"
    # A `promote test` between the audits runs the test here, and reads no CI: it neither ends nor extends the streak.
    assert test_run(root)["packages"][0]["passed"] == 3  # and two blocked
    _, second = run_json(root, "audit")
    today = second["run"][:4] + "-" + second["run"][4:6] + "-" + second["run"][6:8]

    # The two tests one filter leaves out are one finding, naming both; each has its story.
    [never, two, blocked] = sorted(findings_of(second, "never-ran"), key=lambda f: f["subject"], reverse=True)
    assert two["severity"] == "error" and two["message"].endswith(": needs checkpoint:a-7b and checkpoint:b-7b,"
                                                                   " which no station has")  # fmt: skip
    assert blocked["message"] == f"blocked in all 3 runs since {today}: needs package:no_such_package_here"
    assert never["severity"] == "warning" and never["tests"] == ["test_a.py::test_slow", "test_a.py::test_slow_too"]
    assert never["message"] == (
        f'2 tests left out by CI in all 2 audits since {today}: -k "not slow" in job `tests` of'
        " .github/workflows/ci.yml: test_a.py::test_slow, test_a.py::test_slow_too"
    )
    code, timeline = run_json(root, "history", "--test", "test_a.py::test_slow")
    assert code == 0
    assert [(e["kind"], e["outcome"], e["ci"] is not None) for e in timeline["timeline"]] == [
        ("audit", "passed", True), ("test", "passed", False), ("audit", "passed", True)
    ]  # fmt: skip
    assert timeline["stories"][0]["streak_of"] == "audits"
    jsonschema.validate(timeline, json.loads((Path(evidence.__file__).parent.parent / "schemas" /
                                              "history.schema.json").read_text()))  # fmt: skip
    text = run(root, "history", "--test", "test_a.py::test_slow").stdout
    assert 'passed  (no CI job runs it: -k "not slow" in job `tests` of .github/workflows/ci.yml)' in text

    # CI runs it again: the next audit has no story for it.
    commit(root, "run every test in CI", {".github/workflows/ci.yml": FILTERING_CI.replace(' -k "not slow"', "")})
    git(root, "push", "-q", "origin", "main")
    _, third = run_json(root, "audit")
    assert [f["subject"] for f in findings_of(third, "never-ran")] == [
        "test_a.py::test_needs_two", "test_a.py::test_needs_package"
    ]  # fmt: skip


@pytest.mark.parametrize("damage", ["garbage", "locked"])
def test_a_damaged_or_locked_history_costs_one_line_and_the_run_keeps_its_evidence(
    tmp_path: Path, damage: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = repository(tmp_path, {"test_a.py": "def test_ok():\n    pass\n"})
    test_run(root)
    db = root / ".promote" / "history.sqlite"
    holder = None
    if damage == "garbage":
        db.write_bytes(b"\x00not a database" * 100)
    else:
        monkeypatch.setenv("PROMOTE_LOCK_WAIT_S", "0.5")
        holder = subprocess.Popen(["python3", "-c", HOLD, str(db)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  text=True)  # fmt: skip
        assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
    try:
        result = run(root, "test", "--json")
    finally:
        if holder is not None:
            holder.communicate("")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert (root / ".promote" / "runs" / report["run"] / "run.json").is_file()
    said = [line for line in result.stderr.splitlines() if "history" in line]
    assert len(said) == 1 and "Traceback" not in result.stderr
    assert ("starting a new history" if damage == "garbage" else "history not recorded") in said[0]


HOLD = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
sys.stdin.read()
"""


def test_past_ten_stories_markdown_counts_the_rest_and_html_folds_them() -> None:
    from promote.evidence import render as render_pages
    from tests.helpers.evidence import document

    story = {"package": "pkg", "kind": "never-ran", "severity": "warning", "line": "skipped in all 14 runs since x"}
    tests = [{**story, "test": f"t.py::test_{n:02d}"} for n in range(12)]
    doc = {**document(), "stories": {"window": 30, "runs_read": 30, "tests": tests, "dropped": [], "gates": []}}
    md = render_pages.markdown(doc)
    section = md.split("### Tests with a story", 1)[1].split("###", 1)[0]
    assert (
        section.count("**never-ran**") == 10 and "- and 2 more (every one in evidence.json, under `stories`)" in section
    )
    html = render_pages.html(doc)
    assert html.count("<strong>never-ran</strong>") == 12 and "<details><summary>2 more</summary>" in html
    assert html.index("t.py::<wbr>test_09") < html.index("<details><summary>2 more") < html.index("t.py::<wbr>test_10")
    assert "Tests with a story" not in render_pages.markdown({**doc, "stories": None})


CRASHES_ALONE = """
import ctypes, pathlib

COUNTER = pathlib.Path(__file__).parent / "counter.txt"
STATE = {}


def test_a_sets_it_up():
    # The harness decides, run by run, whether this earlier test leaves what the next one needs.
    if COUNTER.read_text().strip() == "pass":
        STATE["ready"] = True


def test_b_crashes_alone():
    if not STATE:
        ctypes.string_at(0)
"""


def test_a_test_that_crashes_every_time_it_runs_alone_is_red_not_flaky(tmp_path: Path) -> None:
    root = repository(tmp_path, {"test_crash.py": CRASHES_ALONE})
    root.joinpath("promote.toml").write_text(
        root.joinpath("promote.toml").read_text().replace("max_reruns = 1", "max_reruns = 5")
    )
    commit(root, "reruns", {})

    test_run(root, "pass")  # it passes, after the test that sets it up
    data = test_run(root, "fail")  # it crashes: in the run, and again alone

    [verdict] = data["packages"][0]["reruns"]
    assert (verdict["test"], verdict["verdict"]) == ("test_crash.py::test_b_crashes_alone", "crashes-alone")
    # Passed once and crashed once on this commit, but it crashes whenever it runs alone: red, not flaky.
    assert not findings_of(data, "flaky-history"), data["findings"]
    told = run(root, "history", "--tests")
    assert told.exit_code == 0 and "flaky-history" not in told.stdout, told.stdout
