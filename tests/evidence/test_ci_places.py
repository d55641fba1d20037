"""CI jobs as places a test can run: a real repository, a real workflow, `promote test` and `promote audit`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from promote.checks.ci.runner_station import runner_station
from tests.helpers.cli import run_json
from tests.helpers.gitrepos import commit, git
from tests.helpers.packages import write_package

mx = pytest.importorskip("mlx.core")
if mx.metal.is_available():
    pytest.skip("this machine has Metal: no test here lacks it", allow_module_level=True)

TESTS = {
    "tests/test_metal.py": """
        import pytest

        @pytest.mark.requires(device="metal")
        def test_metal():
            pass
    """,
    "tests/test_hub.py": """
        import pytest

        @pytest.mark.requires("hub:org/model")
        def test_hub():
            pass
    """,
    "tests/test_never.py": """
        import pytest

        @pytest.mark.requires(device="metal")
        def test_metal_on_linux_only():
            pass

        @pytest.mark.requires("checkpoint:big")
        def test_checkpoint():
            pass
    """,
}
# The macOS job runs the Metal test; the Linux job the rest, the Metal test of test_never.py included.
CI_YML = """\
on: [push, pull_request]
jobs:
  mac:
    runs-on: macos-14
    steps:
      - run: python -m pytest pkg/tests/test_metal.py
  linux:
    runs-on: ubuntu-latest
    steps:
      - run: python -m pytest pkg/tests --ignore=pkg/tests/test_metal.py
"""
NEVER = "which no station has (nor the runner of any CI job that runs it): it can never run"
# A device some machine has, that neither a station nor a CI runner that runs the test has.
NOT_HERE = "which no station here has (nor the runner of any CI job that runs it): it cannot run on this fleet"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    root = tmp_path_factory.mktemp("ci-places")
    git(root, "init", "-q", "-b", "main")
    write_package(root, "pkg", TESTS)
    (root / "promote.toml").write_text(
        '[promote]\ntrunk = "main"\nmirrors = []\n\n[[promote.packages]]\nname = "pkg"\npath = "pkg"\n'
    )
    commit(root, "package and CI", {".github/workflows/ci.yml": CI_YML})
    found = {}
    for command in ("test", "audit"):
        code, found[command] = run_json(root, command)
        found[command]["code"] = code
    return found


def _by_check(run: dict[str, Any]) -> dict[str, list[tuple[str, str, str]]]:
    out: dict[str, list[tuple[str, str, str]]] = {}
    for f in run["findings"]:
        if f["check"] in ("station-bound", "impossible-requirement"):
            out.setdefault(f["check"], []).append((f["subject"], f["severity"], f["message"]))
    return {k: sorted(v) for k, v in out.items()}


@pytest.mark.parametrize("command", ["test", "audit"])
def test_a_test_a_ci_runner_can_run_is_bound_to_that_job_and_only_what_nothing_runs_can_never_run(
    runs: dict[str, dict[str, Any]], command: str
) -> None:
    assert _by_check(runs[command]) == {
        "station-bound": [
            (
                "tests/test_hub.py::test_hub",
                "warning",
                "needs hub:org/model; no station has it; CI job `linux` of .github/workflows/ci.yml runs it on "
                "[ubuntu-latest]",
            ),
            (
                "tests/test_metal.py::test_metal",
                "warning",
                "needs device:metal; no station has it; CI job `mac` of .github/workflows/ci.yml runs it on [macos-14]",
            ),
        ],
        "impossible-requirement": [
            ("tests/test_never.py::test_checkpoint", "error", f"needs checkpoint:big, {NEVER}"),
            ("tests/test_never.py::test_metal_on_linux_only", "error", f"needs device:metal, {NOT_HERE}"),
        ],
    }


def test_each_blocker_names_the_jobs_that_run_it(runs: dict[str, dict[str, Any]]) -> None:
    (package,) = runs["test"]["packages"]
    jobs = {b["test"]: [j["job"] for j in b["jobs"]] for b in package["blockers"]}
    assert jobs["tests/test_metal.py::test_metal"] == ["mac"]
    assert jobs["tests/test_never.py::test_checkpoint"] == []


def test_the_page_says_where_each_blocked_test_runs_and_what_can_never_run(runs: dict[str, dict[str, Any]]) -> None:
    page = Path(runs["audit"]["pages"]["md"]).read_text(encoding="utf-8")
    assert "CI job `mac` of .github/workflows/ci.yml runs it on [macos-14]" in page
    assert page.count("it can never run") == 1
    assert page.count("it cannot run on this fleet") == 1
    assert "see impossible-requirement" not in page


@pytest.mark.parametrize(
    ("labels", "metal", "network"),
    [
        (("macos-14",), True, True),
        (("macos-latest",), True, True),
        (("macos-13",), False, True),
        (("macos-14-large",), False, True),
        (("macos-14-xlarge",), True, True),
        (("self-hosted", "macos"), True, False),
        (("self-hosted", "macOS", "X64"), False, False),
        (("ubuntu-latest",), False, True),
    ],
)
def test_a_runner_has_what_its_labels_say(labels: tuple[str, ...], metal: bool, network: bool) -> None:
    runner = runner_station("ci", labels)
    assert runner is not None
    assert (runner.has("device:metal"), runner.has("hub:org/model"), runner.has("checkpoint:big")) == (
        metal,
        network,
        False,
    )
    assert runner_station("ci", ("self-hosted", "gpu-box")) is None
