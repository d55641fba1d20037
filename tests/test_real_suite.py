"""promote on a suite nobody here wrote: mlx-lm's own tests, from the snapshot in shared/corpora."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tarfile
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.gitrepos import GIT_ENV

pytestmark = pytest.mark.slow

SNAPSHOT = "mlx-lm-d78bf58.tar.gz"
# Beside the repository: its checkout's parent, or a parent further up for a worktree (/work/wt/NAME).
CORPUS = next(
    (
        p / "shared" / "corpora" / SNAPSHOT
        for p in Path(__file__).resolve().parents[1:]
        if (p / "shared" / "corpora" / SNAPSHOT).is_file()
    ),
    Path(__file__).resolve().parents[1].parent / "shared" / "corpora" / SNAPSHOT,
)
HUB_MODEL = "mlx-community/Qwen1.5-0.5B-Chat-4bit"
CONFIG = """\
[promote]
trunk = "main"
mirrors = ["origin"]

[promote.ci]
runners = ["ubuntu-latest"]

[[promote.packages]]
name = "mlx-lm"
path = "."
workers = 2
leaks = "{leaks}"
env = {{ HF_HUB_OFFLINE = "1", HF_HOME = "{hf_home}" }}
"""
# A change as a leak finding shows it: `what: before -> after` (an MLX key is two numbers).
_CHANGE = re.compile(r"(key\[\d+, \d+\]|\S+) -> (key\[\d+, \d+\]|\S+)")


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, env={**os.environ, **GIT_ENV})


def _suite(base: Path, leaks: str, commands: tuple[str, ...]) -> dict[str, Any]:
    """The snapshot as a user would set it up: a git repository with a mirror, then each promote command."""
    if not CORPUS.is_file():
        if os.environ.get("PROMOTE_REQUIRE_CORPUS"):
            pytest.fail(f"the real-suite snapshot is missing: {CORPUS}")
        pytest.skip(f"no real-suite snapshot at {CORPUS}")
    repo, hf_home = base / "mlx-lm", base / "hf-home"
    repo.mkdir()
    hf_home.mkdir()
    with tarfile.open(CORPUS) as tar:
        tar.extractall(repo, filter="data")
    (repo / "promote.toml").write_text(CONFIG.format(hf_home=hf_home, leaks=leaks), encoding="utf-8")
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "mlx-lm snapshot")
    _git(base, "clone", "-q", "--bare", str(repo), str(base / "mirror.git"))
    _git(repo, "remote", "add", "origin", str(base / "mirror.git"))
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(hf_home), "NO_COLOR": "1"}
    found: dict[str, Any] = {"repo": str(repo), "env": env}
    for command in commands:
        done = subprocess.run(
            [sys.executable, "-m", "promote", command, "--json"], cwd=repo, env=env, capture_output=True, text=True
        )
        assert done.returncode in (0, 1), f"promote {command} exited {done.returncode}: {done.stderr[-2000:]}"
        assert "Traceback" not in done.stderr, done.stderr[-2000:]
        found[command] = json.loads(done.stdout)
        found[f"{command}-stderr"] = done.stderr
        found[f"{command}-code"] = done.returncode
    return found


@pytest.fixture(scope="module")
def mlx_lm(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """`promote test` and `audit` with the default `leaks = "report"`."""
    return _suite(tmp_path_factory.mktemp("mlx-lm"), "report", ("test", "audit"))


@pytest.fixture(scope="module")
def mlx_lm_restored(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """`promote test` with `leaks = "restore"` (its pass without restores included)."""
    return _suite(tmp_path_factory.mktemp("mlx-lm-restored"), "restore", ("test",))


def _findings(run: dict[str, Any], check: str) -> list[dict[str, Any]]:
    return [f for f in run["findings"] if f["check"] == check]


def test_hub_model_blocks_tests_and_is_attributed_to_the_suites_own_class(mlx_lm: dict[str, Any]) -> None:
    (package,) = mlx_lm["test"]["packages"]
    blocked_by_model = sum(n for blocker, n in package["blocked_by"].items() if HUB_MODEL in blocker)
    assert blocked_by_model >= 60
    (finding,) = [f for f in _findings(mlx_lm["test"], "impossible-requirement") if HUB_MODEL in f["message"]]
    assert "tests/test_generate.py" in f"{finding['subject']} {finding['cause']} {finding['message']}"
    assert "TestGenerate" in finding["message"] or "TestGenerate" in finding["subject"]


def test_no_finding_names_a_path_outside_the_package(mlx_lm: dict[str, Any]) -> None:
    for run in (mlx_lm["test"], mlx_lm["audit"]):
        for f in run["findings"]:
            for field in ("subject", "cause"):
                assert "site-packages" not in (f[field] or ""), f
                assert not (f[field] or "").startswith("/"), f


def test_the_metal_test_is_classified_and_lm_eval_is_a_missing_package(mlx_lm: dict[str, Any]) -> None:
    (package,) = mlx_lm["test"]["packages"]
    metal = [b for b in package["blockers"] if "device:metal" in b["requirements"]]
    assert [b["test"] for b in metal] == ["tests/test_models.py::TestModels::test_bitnet"]
    missing = _findings(mlx_lm["test"], "missing-package")
    assert any("lm_eval" in f["message"] for f in missing), missing
    # One finding for one cause: the uncollectable module is not also a package-error.
    assert not [f for f in _findings(mlx_lm["test"], "package-error") if "lm_eval" in f["message"]]


def test_every_real_failure_is_judged_and_none_is_left_undecided(mlx_lm: dict[str, Any]) -> None:
    (package,) = mlx_lm["test"]["packages"]
    verdicts = Counter(r["verdict"] for r in package["reruns"])
    assert 1 <= verdicts["genuine"] <= 12, package["reruns"]
    assert not _findings(mlx_lm["test"], "rerun-undecided")
    assert not _findings(mlx_lm["test"], "flaky")


def test_the_self_hosted_macos_job_is_reported_unreachable_once(mlx_lm: dict[str, Any]) -> None:
    unreachable = _findings(mlx_lm["audit"], "ci-unreachable-runner")
    assert [f["subject"] for f in unreachable] == [".github/workflows/pull_request.yml: job mac_build_and_test"]
    assert "self-hosted, macos" in unreachable[0]["message"]
    # The modules it would have run are one consequence of it, not one error per module.
    assert len(_findings(mlx_lm["audit"], "ci-filtered")) <= 3


def test_the_page_says_how_many_of_the_repositorys_tests_a_package_and_ci_run(mlx_lm: dict[str, Any]) -> None:
    audit = mlx_lm["audit"]
    inventory = audit["inventory"]
    # The snapshot's one test tree, collected as pytest would, is the one its package runs: nothing unowned.
    assert [r["path"] for r in inventory["roots"]] == ["tests"] and inventory["packaged"] == inventory["total"]
    assert inventory["total"] >= 200 and not _findings(audit, "unowned-tests")
    tested = audit["gates"]["tested"]["evidence"]
    assert f"all {inventory['total']:,} tests in the repository are run by a package" in tested, tested
    # Its only CI job is the self-hosted macOS one this repository cannot reach: CI runs none of them, in numbers.
    details = audit["gates"]["tested"]["details"]
    counted = [re.fullmatch(r"(\d+) job\(s\) run (\d+) of (\d+) test ids", line) for line in details]
    [(jobs, run, of)] = [m.groups() for m in counted if m is not None]
    # Every test id of the repository is counted (a module that cannot be collected is one id more).
    assert (jobs, run) == ("0", "0") and int(of) >= inventory["total"], details
    assert any(line.startswith("CI: ") and f"of {of} test ids" in line for line in tested), tested


def test_findings_fit_on_a_screen(mlx_lm: dict[str, Any]) -> None:
    for command in ("test", "audit"):
        assert len(mlx_lm[command]["findings"]) <= 40, Counter(f["check"] for f in mlx_lm[command]["findings"])
    # Drawing random numbers is what model tests do; it is not a leak.
    leaks = _findings(mlx_lm["test"], "leaked-state")
    assert not [f for f in leaks if "mlx.random.state" in f["message"] and "seed" not in f["message"]], leaks


def test_progress_never_shows_more_finished_than_collected(mlx_lm: dict[str, Any]) -> None:
    lines = [ln for ln in mlx_lm["test-stderr"].splitlines() if "tests finished" in ln]
    assert lines
    for line in lines:
        done, total = line.split(": ")[1].split(" ")[0].split("/")
        assert int(done) <= int(total), line


@pytest.mark.parametrize("mode", ["mlx_lm", "mlx_lm_restored"])
def test_in_either_mode_the_only_leaks_are_seeded_generators_shown_as_they_changed(
    mode: str, request: pytest.FixtureRequest
) -> None:
    run = request.getfixturevalue(mode)["test"]
    assert len(run["findings"]) <= 15, Counter(f["check"] for f in run["findings"])
    leaks = _findings(run, "leaked-state")
    assert leaks, "the suite seeds MLX's generator in some tests"
    # Drawing numbers (building models) is no leak; seeding or replacing a generator (MLX's, numpy's) is.
    seeded = r"mlx\.random\.state \((mx\.random\.seed|attribute rebound)\)|numpy\.random\.state \(seed call\)"
    assert all(re.search(seeded, f["message"]) for f in leaks), [f["message"] for f in leaks]
    for f in run["findings"]:
        # Nothing in this suite is a secret, and a change is a change.
        assert "***" not in f["message"], f
        assert all(before != after for before, after in _CHANGE.findall(f["message"])), f
    (package,) = run["packages"]
    assert package["random_draws"] >= 50


@pytest.fixture(scope="module")
def plain_pytest(mlx_lm: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The suite as its own runner runs it: `python -m pytest -n 2` from the package's directory, observed."""
    from tests.runners.test_own_configuration import observe

    return observe(Path(mlx_lm["repo"]), tmp_path_factory.mktemp("plain"), "-n", "2", env=mlx_lm["env"])


@pytest.mark.parametrize("mode", ["mlx_lm", "mlx_lm_restored"])
def test_the_first_pass_is_plain_pytests_run_test_for_test_and_red_when_it_is_red(
    mode: str, plain_pytest: dict[str, Any], request: pytest.FixtureRequest
) -> None:
    from tests.runners.test_own_configuration import first_pass

    found = request.getfixturevalue(mode)
    (package,) = found["test"]["packages"]
    ours = first_pass(Path(package["results"]))
    theirs: dict[str, str] = plain_pytest["tests"]
    assert ours.keys() == theirs.keys()
    differ = {t: (ours[t], theirs[t]) for t in ours if ours[t] != theirs[t]}
    assert not differ, differ
    assert package["rootdir"] == "." and package["inifile"] == (
        None if plain_pytest["inifile"] == "None" else Path(plain_pytest["inifile"]).name
    )
    # Red exactly when pytest is.
    assert (found["test-code"] != 0) == (plain_pytest["status"] != 0)


def test_two_runs_of_one_commit_print_the_same_findings_of_the_suite(mlx_lm: dict[str, Any]) -> None:
    # `audit` reruns the suite `test` ran, at the same commit: what the suite did must read the same, whatever
    # order the workers ran it in and whatever key MLX's generator started from.
    checks = {f["check"] for f in mlx_lm["test"]["findings"]}

    def suite_findings(run: dict[str, Any]) -> list[tuple[str, str, str]]:
        return sorted((f["check"], f["subject"], f["message"]) for f in run["findings"] if f["check"] in checks)

    assert suite_findings(mlx_lm["test"]) == suite_findings(mlx_lm["audit"])
