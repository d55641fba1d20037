"""Order-dependent failures named at their cause: reruns alone and bisection with real pytest processes."""

from __future__ import annotations

import json
import math
import re
import threading
from pathlib import Path

import pytest

from promote.runners.causes.budget import Budget, out_of_budget
from tests.helpers.cli import run
from tests.helpers.gitrepos import commit, git
from tests.helpers.packages import write_config, write_package

pytestmark = pytest.mark.slow

N = 200


def suite(polluters: dict[int, str], victims: dict[int, str], n: int = N) -> dict[str, str]:
    """`n` tests, test_000 onwards, in collection order, 20 to a file, with chosen bodies."""
    files = {"polluted.py": "STATE = {}\n"}
    for f in range(math.ceil(n / 20)):
        lines = ["import polluted", ""]
        for i in range(f * 20, min(n, f * 20 + 20)):
            body = polluters.get(i) or victims.get(i) or "pass"
            lines += [f"def test_{i:03d}():", f"    {body}", ""]
        files[f"test_{f:02d}.py"] = "\n".join(lines)
    return files


def node_id(i: int) -> str:
    return f"test_{i // 20:02d}.py::test_{i:03d}"


def promote_test(root: Path) -> tuple[int, dict]:  # type: ignore[type-arg]
    result = run(root, "test", "--json")
    return result.exit_code, json.loads(result.stdout)


def test_polluter_37_is_named_as_the_cause_of_180_within_log2_plus_2_reruns(tmp_path: Path) -> None:
    write_package(
        tmp_path,
        "pkg",
        suite({37: "polluted.STATE['mode'] = 'draft'"}, {180: "assert polluted.STATE.get('mode') is None"}),
    )
    write_config(tmp_path, [{"name": "pkg", "path": "pkg"}])

    code, report = promote_test(tmp_path)

    assert code == 1
    found = [f for f in report["findings"] if f["check"] == "order-dependent"]
    assert [(f["subject"], f["cause"], f["severity"]) for f in found] == [(node_id(180), node_id(37), "error")]
    # Named only once it reproduced on fresh reruns, and not after promote's own no-op test (the control: a race
    # fails after any test), never after tests of the suite taken for controls.
    shown = f"(3 of 3 after {node_id(37)}, 0 of 1 alone, 0 of 3 after promote's no-op test; "
    assert shown in found[0]["message"], found[0]["message"]
    [verdict] = report["packages"][0]["reruns"]
    assert verdict["verdict"] == "order-dependent"
    # Alone, one call per split (both halves in one), one call to confirm.
    assert verdict["reruns"] <= math.ceil(math.log2(180)) + 2
    # Every rerun is a real pytest process with its own directory.
    reruns = list((tmp_path / ".promote" / "runs" / report["run"] / "pkg" / "reruns").glob("rerun-*"))
    assert len(reruns) == verdict["reruns"]


def test_victims_after_the_same_polluter_share_one_search(tmp_path: Path) -> None:
    mode_is_unset = "assert polluted.STATE.get('mode') is None"
    victims = {180: mode_is_unset, 190: mode_is_unset}
    write_package(tmp_path, "pkg", suite({37: "polluted.STATE['mode'] = 'draft'"}, victims))
    write_config(tmp_path, [{"name": "pkg", "path": "pkg", "workers": 1}])

    code, report = promote_test(tmp_path)

    assert code == 1
    found = [(f["subject"], f["cause"]) for f in report["findings"] if f["check"] == "order-dependent"]
    assert found == [(node_id(180), node_id(37)), (node_id(190), node_id(37))]
    first, second = report["packages"][0]["reruns"]
    assert first["reruns"] <= math.ceil(math.log2(180)) + 2
    # The second: alone, then test_037 against the rest in one call, then one call to confirm.
    assert second["reruns"] == 3, second
    assert "5 of 5 after " + node_id(37) in second["detail"]
    reruns = list((tmp_path / ".promote" / "runs" / report["run"] / "pkg" / "reruns").glob("rerun-*"))
    assert len(reruns) == first["reruns"] + second["reruns"]


def test_two_tests_needed_together(tmp_path: Path) -> None:
    write_package(
        tmp_path,
        "pkg",
        suite(
            {3: "polluted.STATE['a'] = 1", 31: "polluted.STATE['b'] = 1"},
            {36: "assert not ('a' in polluted.STATE and 'b' in polluted.STATE)"},
            n=40,
        ),
    )
    write_config(tmp_path, [{"name": "pkg", "path": "pkg"}])

    code, report = promote_test(tmp_path)

    assert code == 1
    found = [f for f in report["findings"] if f["check"] == "order-dependent"]
    assert [(f["subject"], f["cause"]) for f in found] == [(node_id(36), f"{node_id(3)}, {node_id(31)}")]


def test_genuine_failure_and_flaky_test_are_told_apart(tmp_path: Path) -> None:
    counter = tmp_path / "runs-of-the-flaky-test"
    flaky = (
        f"import pathlib; p = pathlib.Path({str(counter)!r}); n = int(p.read_text()) + 1 if p.exists() else 1; "
        "p.write_text(str(n)); assert n not in (1, 3)"
    )
    write_package(tmp_path, "pkg", suite({}, {10: "assert 1 == 2", 30: flaky}, n=40))
    write_config(tmp_path, [{"name": "pkg", "path": "pkg"}])

    code, report = promote_test(tmp_path)

    assert code == 1
    verdicts = {v["test"]: v["verdict"] for v in report["packages"][0]["reruns"]}
    assert verdicts == {node_id(10): "genuine", node_id(30): "flaky"}
    checks = {(f["check"], f["subject"]) for f in report["findings"]}
    assert ("flaky", node_id(30)) in checks
    assert not any(f["check"] == "order-dependent" for f in report["findings"])


RACY_CONFTEST = """
import pytest

import polluted


@pytest.fixture(autouse=True)
def count_tests_in_this_process():
    yield
    polluted.RAN.append(1)
"""


def test_a_race_failing_every_other_time_after_any_test_is_flaky_with_counts_never_order_dependent(
    tmp_path: Path,
) -> None:
    # After any other test in the process, it fails one time in two (a shared counter alternates; it starts afresh
    # for each run of promote); alone, it always passes.
    counter = tmp_path / "runs-after-another-test"
    racy = (
        f"import pathlib; p = pathlib.Path({str(counter)!r}); n = int(p.read_text()) + 1 if p.exists() else 1; "
        "p.write_text(str(n)) if polluted.RAN else None; assert not (polluted.RAN and n % 2 == 1)"
    )
    files = suite({}, {30: racy}, n=40)
    files["polluted.py"] = "STATE = {}\nRAN = []\n"
    files["conftest.py"] = RACY_CONFTEST
    write_package(tmp_path, "pkg", files)
    write_config(tmp_path, [{"name": "pkg", "path": "pkg"}])

    for _ in range(2):
        counter.unlink(missing_ok=True)
        code, report = promote_test(tmp_path)

        assert code == 1
        assert not [f for f in report["findings"] if f["check"] == "order-dependent"]
        [flaky] = [f for f in report["findings"] if f["check"] == "flaky"]
        assert flaky["subject"] == node_id(30)
        # The counts seen, for the selection that both failed and passed.
        assert re.search(r"failed ([12]) of ([23]) after ", flaky["message"]), flaky["message"]
        [verdict] = report["packages"][0]["reruns"]
        # It stopped as soon as a selection both failed and passed: the budget is for causes.
        assert verdict["reruns"] <= math.ceil(math.log2(40)) + 2


def test_a_victim_that_fails_after_any_test_of_the_suite_names_no_polluter_but_what_they_share(tmp_path: Path) -> None:
    # It asserts it runs first in its process (a counter an autouse fixture of conftest.py appends to, which no probe
    # watches): every test of the suite before it "pollutes"; promote's own no-op test, which uses no fixture, does not.
    files = suite({}, {30: "assert not polluted.RAN"}, n=40)
    files["polluted.py"] = "STATE = {}\nRAN = []\n"
    files["conftest.py"] = RACY_CONFTEST
    write_package(tmp_path, "pkg", files)
    write_config(tmp_path, [{"name": "pkg", "path": "pkg"}])

    code, report = promote_test(tmp_path)

    assert code == 1
    [finding] = [f for f in report["findings"] if f["check"] == "order-dependent"]
    assert finding["subject"] == finding["cause"] == node_id(30)
    assert finding["message"].startswith(
        "fails after any test of the suite that runs before it in the same process, but not after promote's no-op test"
    ), finding
    assert "each of the 30 tests before it: 3 of 3 after test_00.py::test_000" in finding["message"], finding
    assert "0 of 1 alone, 0 of 3 after promote's no-op test" in finding["message"], finding
    assert "autouse fixture or a hook in conftest.py" in finding["message"]
    [verdict] = report["packages"][0]["reruns"]
    assert verdict["polluters"] == []


def test_a_victim_blamed_on_a_different_polluter_than_in_an_earlier_run_is_flaky(tmp_path: Path) -> None:
    mode = tmp_path / "which-test-pollutes"
    pollutes = f"if open({str(mode)!r}).read() == '{{}}': polluted.STATE['x'] = 1"
    polluters = {3: pollutes.format("a"), 7: pollutes.format("b")}
    write_package(tmp_path, "pkg", suite(polluters, {12: "assert polluted.STATE.get('x') is None"}, n=20))
    write_config(tmp_path, [{"name": "pkg", "path": "pkg"}])

    mode.write_text("a")
    _, first = promote_test(tmp_path)
    mode.write_text("b")
    code, second = promote_test(tmp_path)

    assert [(f["check"], f["cause"]) for f in first["findings"]] == [("order-dependent", node_id(3))]
    assert code == 1
    [flaky] = [f for f in second["findings"] if f["subject"] == node_id(12)]
    assert (flaky["check"], flaky["severity"]) == ("flaky", "warning")
    blamed = f"blamed on {node_id(7)} in this run, on {node_id(3)} in run {first['run']}"
    assert flaky["message"] == f"flaky: {blamed}: a different polluter each run"
    assert [v["verdict"] for v in second["packages"][0]["reruns"]] == ["flaky"]


def test_audit_judges_a_victim_blamed_elsewhere_before_as_test_does(tmp_path: Path) -> None:
    # One verdict from one history: `promote audit` after a `promote test` that blamed another polluter.
    mode = tmp_path / "which-test-pollutes"
    pollutes = f"if open({str(mode)!r}).read() == '{{}}': polluted.STATE['x'] = 1"
    polluters = {3: pollutes.format("a"), 7: pollutes.format("b")}
    work, origin = tmp_path / "work", tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", str(origin))
    git(tmp_path, "init", "-q", "-b", "main", str(work))
    write_package(work, "pkg", suite(polluters, {12: "assert polluted.STATE.get('x') is None"}, n=20))
    write_config(work, [{"name": "pkg", "path": "pkg"}])
    commit(work, "the package")
    git(work, "remote", "add", "origin", str(origin))
    git(work, "push", "-q", "origin", "main")

    mode.write_text("a")
    _, first = promote_test(work)
    mode.write_text("b")
    audit = run(work, "audit", "--json")

    assert [(f["check"], f["cause"]) for f in first["findings"]] == [("order-dependent", node_id(3))]
    assert audit.stdout.strip(), audit.output
    report = json.loads(audit.stdout)
    assert not [f for f in report["findings"] if f["check"] == "order-dependent"], report["findings"]
    [flaky] = [f for f in report["findings"] if f["subject"] == node_id(12)]
    blamed = f"blamed on {node_id(7)} in this run, on {node_id(3)} in run {first['run']}"
    assert (flaky["check"], flaky["message"]) == ("flaky", f"flaky: {blamed}: a different polluter each run")


def test_budget_cut_short_is_undecided(tmp_path: Path) -> None:
    write_package(
        tmp_path,
        "pkg",
        suite({7: "polluted.STATE['mode'] = 'draft'"}, {30: "assert polluted.STATE.get('mode') is None"}, n=40),
    )
    (tmp_path / "promote.toml").write_text(
        '[promote]\ntrunk = "main"\nmax_reruns = 3\n[[promote.packages]]\nname = "pkg"\npath = "pkg"\n'
    )

    code, report = promote_test(tmp_path)

    assert code == 1
    [verdict] = report["packages"][0]["reruns"]
    assert (verdict["verdict"], verdict["reruns"], verdict["polluters"]) == ("undecided", 3, [])
    assert [f["check"] for f in report["findings"]] == ["rerun-undecided"]


def test_bisect_by_hand_from_collection_order(tmp_path: Path) -> None:
    write_package(
        tmp_path,
        "pkg",
        suite({37: "polluted.STATE['mode'] = 'draft'"}, {180: "assert polluted.STATE.get('mode') is None"}),
    )
    write_config(tmp_path, [{"name": "pkg", "path": "pkg"}])

    result = run(tmp_path, "bisect", node_id(180), "--json")

    assert result.exit_code == 1, result.output
    report = json.loads(result.stdout)
    assert (report["verdict"], report["polluters"]) == ("order-dependent", [node_id(37)])
    # One collection, then: alone, the whole prefix, 8 halvings, then the suspect, alone and two controls 4 runs each.
    assert report["invocations"] <= math.ceil(math.log2(N)) + 3 + 4 * 4


def test_a_short_budget_goes_to_the_victims_in_order_whichever_rerun_ends_first(tmp_path: Path) -> None:
    write_package(tmp_path, "pkg", suite({}, {3: "assert 1 == 2", 5: "assert 1 == 3", 7: "assert 1 == 4"}, n=10))
    (tmp_path / "promote.toml").write_text(
        '[promote]\ntrunk = "main"\nmax_reruns = 2\n[[promote.packages]]\nname = "pkg"\npath = "pkg"\n'
    )

    code, report = promote_test(tmp_path)

    assert code == 1
    verdicts = [(v["test"], v["verdict"], v["reruns"]) for v in report["packages"][0]["reruns"]]
    # The first two victims get their rerun alone, the third none; its finding says what it was given, and why.
    assert verdicts == [(node_id(3), "genuine", 1), (node_id(5), "genuine", 1), (node_id(7), "undecided", 0)]
    [undecided] = [f for f in report["findings"] if f["check"] == "rerun-undecided"]
    assert (undecided["subject"], undecided["message"]) == (
        node_id(7),
        "undecided whether order-dependent: the rerun budget of 2 (max_reruns, shared by every failed test) ran out "
        "before an answer: 2 other failed test(s) used it; this test was given 0 and used 0",
    )


def test_the_budget_shared_by_threads_hands_out_each_rerun_once() -> None:
    budget = Budget(500)
    taken: list[int] = []

    def take() -> None:
        for _ in range(200):
            taken.append(budget.take(1))

    threads = [threading.Thread(target=take) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert (sum(taken), budget.left) == (500, 0)
    budget.give(2)
    assert budget.take(5) == 2


def test_the_budget_knows_who_holds_it_so_a_test_given_none_can_say_who_used_it() -> None:
    budget = Budget(50)
    assert budget.take(30, by="a") == 30 and budget.take(30, by="b") == 20 and budget.take(5, by="c") == 0
    budget.give(10, by="a")  # set aside and not spent: still held, by a, the 20 it spent
    assert (budget.users(besides="c"), budget.users(besides="a")) == (2, 1)
    budget.give(20, by="b")
    assert budget.users(besides="c") == 1
    assert out_of_budget(budget, "c", 0, 0) == (
        "the rerun budget of 50 (max_reruns, shared by every failed test) ran out before an answer: "
        "1 other failed test(s) used it; this test was given 0 and used 0"
    )


def test_bisect_by_hand_places_its_finding_where_the_last_run_rooted_the_ids(tmp_path: Path) -> None:
    # A pytest.ini above the package makes the repository root pytest's rootdir: the ids start there.
    git(tmp_path, "init", "-q", "-b", "main")
    write_package(
        tmp_path / "packages",
        "engine",
        suite({3: "polluted.STATE['mode'] = 1"}, {7: "assert not polluted.STATE"}, n=10),
    )
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "promote.toml").write_text(
        '[promote]\ntrunk = "main"\n[[promote.packages]]\nname = "engine"\npath = "packages/engine"\n'
    )
    commit(tmp_path, "the package")
    victim = f"packages/engine/{node_id(7)}"
    code, report = promote_test(tmp_path)
    assert code == 1 and victim in {f["subject"] for f in report["findings"]}

    result = run(tmp_path, "bisect", victim, "--json")

    bisected = json.loads(result.stdout)
    assert bisected["polluters"] == [f"packages/engine/{node_id(3)}"]
    assert bisected["finding"]["location"]["path"] == f"packages/engine/{node_id(7).split('::')[0]}"
