"""Real order-dependent tests from published projects nobody here wrote (shared/corpora/od), run as a user would.

Each victim is put last in the order the package runs (its cleaners left out, as the corpus's README says), so it
fails after its polluters; `promote bisect` and `promote test` must name each polluter the dataset lists, every pair
named must fail again under plain pytest, and the pytest calls (counted by a wrapper around the case's python, not
taken from promote's report) stay within ceil(log2 N) + 4. In the suite's own order, where the victim passes, promote
must find no cause at all.
"""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

import pytest

from tests.helpers import od
from tests.helpers.cli import run

pytestmark = pytest.mark.slow

NAMES = (
    [str(c["name"]) for c in json.loads((od.CORPUS / "cases.json").read_text())["cases"]] if od.CORPUS.is_dir() else []
)
CAUSES = ("order-dependent", "flaky", "rerun-undecided")


@pytest.fixture(scope="session")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return od.cache_dir(tmp_path_factory)


def reproduces(c: od.Case, polluter: str) -> bool:
    """Plain pytest, the polluter then the victim: whether the victim failed (the case's own check, by hand)."""
    done = subprocess.run(
        [str(c.python), "-m", "pytest", *od.PYTEST, "-q", polluter, c.victim, "-rA"],
        cwd=c.root,
        capture_output=True,
        text=True,
    )
    return any(line.startswith("FAILED") and c.victim in line for line in done.stdout.splitlines())


@pytest.mark.parametrize("name", NAMES)
def test_every_polluter_is_named_by_bisect_and_by_test_within_log2_plus_4_calls(
    name: str, cache: Path, tmp_path: Path
) -> None:
    c = od.case(name, cache, tmp_path)
    c.reset()
    bisected = run(c.repo, "bisect", c.victim, "--json")
    calls = c.count()

    report = json.loads(bisected.stdout)
    assert (bisected.exit_code, report["verdict"]) == (1, "order-dependent"), bisected.stdout[-2000:]
    named = report["polluters"]
    assert set(c.polluters) <= set(named), (c.polluters, named)
    # Every pair named fails again under plain pytest, not only in promote's reruns.
    assert all(reproduces(c, p) for p in set(named) - set(c.polluters)), named
    before = len(c.order) - 1
    assert calls <= math.ceil(math.log2(before)) + 4, (calls, before)

    c.reset()
    tested = run(c.repo, "test", "--json")
    found = json.loads(tested.stdout)["findings"]
    [finding] = [f for f in found if f["check"] == "order-dependent"]
    assert finding["subject"] == c.victim
    assert set(c.polluters) <= set(finding["cause"].split(", ")), finding
    # Nothing else is blamed on order or called flaky: the suite's other failures fail alone.
    assert not [f for f in found if f["check"] in CAUSES and f["subject"] != c.victim], found


@pytest.mark.parametrize("name", NAMES)
def test_in_the_suites_own_order_no_cause_is_found_where_the_victim_passes(
    name: str, cache: Path, tmp_path: Path
) -> None:
    c = od.case(name, cache, tmp_path, reorder=False)
    if c.fails_in_suite_order:
        pytest.skip("its victim fails in the suite's own order (the test above covers it)")
    tested = run(c.repo, "test", "--json")
    found = json.loads(tested.stdout)["findings"]
    assert not [f for f in found if f["check"] in CAUSES], found
