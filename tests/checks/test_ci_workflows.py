"""The CI audit reads workflows as GitHub does: `on:` and its filters, subshells, the workflow schema, -k and -m."""

from __future__ import annotations

import time
from pathlib import Path

from promote import config
from promote.checks.ci import CIReport, survey_ci
from promote.checks.ci import outcome as ci_outcome

TESTS = {
    "tests/test_core.py": "def test_a(): pass\ndef test_b(): pass\n",
    "packages/x/tests/test_x.py": "def test_x(): pass\n",
}
COLLECTED = ["tests/test_core.py::test_a", "tests/test_core.py::test_b", "packages/x/tests/test_x.py::test_x"]
JOB = """\
jobs:
  tests:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - run: python -m pytest -q
"""


def survey(
    root: Path, workflows: dict[str, str], files: dict[str, str] | None = None, collected: list[str] = COLLECTED
) -> CIReport:
    """Survey a checkout holding TESTS, `files` and the given workflow files (name -> text)."""
    all_files = {**TESTS, **(files or {}), **{f".github/workflows/{k}": v for k, v in workflows.items()}}
    for name, text in all_files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (root / "promote.toml").write_text('[promote]\ntrunk = "main"\n[promote.ci]\nrunners = ["ubuntu-latest"]\n')
    return survey_ci(root, config.load(root / "promote.toml"), collected)


def checks(report: CIReport) -> list[tuple[str, str, str]]:
    return [(f.check, f.subject, f.message) for f in report.findings]


def test_a_workflow_run_only_by_hand_tests_no_push(tmp_path: Path) -> None:
    report = survey(tmp_path, {"manual.yml": "on: workflow_dispatch\n" + JOB})

    assert report.run == 0
    assert {n.why for n in report.not_run} == {
        "job `tests` of .github/workflows/manual.yml never starts for a change to main (on: workflow_dispatch)"
    }
    assert [f.check for f in report.findings] == ["ci-filtered"]
    assert report.findings[0].subject == ".github/workflows/manual.yml: job tests"


def test_a_schedule_runs_after_the_merge_not_before_it(tmp_path: Path) -> None:
    report = survey(tmp_path, {"nightly.yml": "on:\n  schedule:\n    - cron: '0 3 * * *'\n" + JOB})

    assert report.run == 0
    assert "(on: schedule)" in report.not_run[0].why


def test_push_to_trunk_and_pull_requests_into_it_are_guarded(tmp_path: Path) -> None:
    on = "on:\n  push:\n    branches: [main, 'release/**']\n  pull_request:\n    branches: [main]\n"
    report = survey(tmp_path, {"ci.yml": on + JOB})

    assert (report.run, report.not_run, report.findings) == (3, (), ())


def test_branch_filters_that_leave_out_trunk(tmp_path: Path) -> None:
    on = (
        "on:\n  push:\n    branches: ['release/*']\n  pull_request:\n    branches-ignore: [main]\n"
        "  merge_group:\n    branches: ['!main', 'dev']\n"
    )
    report = survey(tmp_path, {"ci.yml": on + JOB})

    assert report.run == 0
    assert report.not_run[0].why == (
        "job `tests` of .github/workflows/ci.yml never starts for a change to main (on: push, pull_request, "
        "merge_group; push: branches release/*; pull_request: branches-ignore main; merge_group: branches !main, dev)"
    )


def test_a_negated_branch_pattern_takes_trunk_back_in_order(tmp_path: Path) -> None:
    on = "on:\n  push:\n    branches: ['**', '!main']\n"
    report = survey(tmp_path, {"ci.yml": on + JOB})
    assert report.run == 0

    report = survey(tmp_path, {"ci.yml": "on:\n  push:\n    branches: ['!main', 'ma*']\n" + JOB})
    assert report.run == 3


def test_a_push_filtered_to_tags_tests_no_branch(tmp_path: Path) -> None:
    report = survey(tmp_path, {"release.yml": "on:\n  push:\n    tags: ['v*']\n" + JOB})

    assert report.run == 0
    assert "push: only tags" in report.not_run[0].why


def test_a_merge_queue_guards_trunk(tmp_path: Path) -> None:
    report = survey(tmp_path, {"queue.yml": "on: merge_group\n" + JOB})

    assert (report.run, report.findings) == (3, ())


def test_paths_filters_are_read_for_each_test_file(tmp_path: Path) -> None:
    on = "on:\n  push:\n    branches: [main]\n    paths: ['packages/**']\n"
    report = survey(tmp_path, {"ci.yml": on + JOB})

    assert report.run == 1
    assert [n.test for n in report.not_run] == ["tests/test_core.py::test_a", "tests/test_core.py::test_b"]
    assert report.not_run[0].why == (
        "job `tests` of .github/workflows/ci.yml does not start for a change to tests/test_core.py "
        "(on: push (paths: packages/**))"
    )


def test_paths_ignore_and_an_unfiltered_event_beside_it(tmp_path: Path) -> None:
    ignored = "on:\n  pull_request:\n    paths-ignore: ['tests/**']\n"
    assert survey(tmp_path, {"ci.yml": ignored + JOB}).run == 1

    both = "on:\n  pull_request:\n    paths-ignore: ['tests/**']\n  push:\n"
    assert survey(tmp_path, {"ci.yml": both + JOB}).run == 3


def test_a_reusable_workflow_guards_trunk_through_its_caller(tmp_path: Path) -> None:
    caller = "on: [push]\njobs:\n  call:\n    uses: ./.github/workflows/reusable.yml\n"
    report = survey(tmp_path, {"reusable.yml": "on: workflow_call\n" + JOB, "ci.yml": caller})

    assert (report.run, report.findings) == (3, ())


def test_a_reusable_workflow_nobody_calls_guards_nothing(tmp_path: Path) -> None:
    report = survey(tmp_path, {"reusable.yml": "on: workflow_call\n" + JOB})

    assert report.run == 0
    assert "(on: workflow_call)" in report.not_run[0].why


def test_pull_request_target_is_undecided_not_guessed(tmp_path: Path) -> None:
    report = survey(tmp_path, {"ci.yml": "on: pull_request_target\n" + JOB})

    assert report.run == 0 and report.not_run == ()
    assert "pull_request_target" in report.undecided[0].why


def test_a_cd_inside_a_subshell_does_not_leak(tmp_path: Path) -> None:
    job = JOB.replace(
        "      - run: python -m pytest -q\n",
        "      - run: |\n          (cd packages/x && python -m pytest -q)\n          python -m pytest -q\n",
    )
    report = survey(tmp_path, {"ci.yml": "on: push\n" + job})

    assert (report.run, report.findings) == (3, ())
    assert report.jobs[0].commands == ("python -m pytest -q", "python -m pytest -q")


def test_a_cd_outside_a_subshell_still_carries_on(tmp_path: Path) -> None:
    job = JOB.replace("      - run: python -m pytest -q\n", "      - run: cd packages/x && python -m pytest -q\n")
    report = survey(tmp_path, {"ci.yml": "on: push\n" + job})

    assert report.run == 1
    assert [f.check for f in report.findings] == ["ci-filtered"]


def test_a_typo_in_a_job_key_is_an_invalid_workflow_with_its_line(tmp_path: Path) -> None:
    report = survey(tmp_path, {"ci.yml": "on: push\n" + JOB.replace("steps:", "stepz:")})

    assert report.jobs == ()
    assert checks(report)[0] == (
        "ci-workflow-invalid",
        ".github/workflows/ci.yml",
        ".github/workflows/ci.yml:5: at `jobs.tests`: `stepz` is not a key GitHub accepts here; "
        "GitHub refuses the workflow, so none of its jobs runs",
    )
    outcome = ci_outcome(survey_ci(tmp_path, config.load(tmp_path / "promote.toml"), COLLECTED))
    assert outcome.status == "fail"
    assert "1 workflow file(s) GitHub would refuse" in outcome.reason


def test_a_workflow_without_on_and_a_value_of_the_wrong_type(tmp_path: Path) -> None:
    report = survey(
        tmp_path,
        {"a.yml": JOB, "b.yml": "on: push\n" + JOB.replace("    steps:", "    timeout-minutes: soon\n    steps:")},
    )

    messages = sorted(m.split(";")[0] for m in report.problems)
    assert messages == [
        ".github/workflows/a.yml:1: 'on' is a required property",
        ".github/workflows/b.yml:5: at `jobs.tests.timeout-minutes`: 'soon' is not of type 'number'",
    ]


MARKED = """\
import pytest

@pytest.mark.slow
def test_a(): pass

class TestB:
    pytestmark = [pytest.mark.gpu]

    def test_b(self): pass

@pytest.mark.parametrize("n", [1, 2])
def test_c(n): pass
"""
MARKED_IDS = [
    "tests/test_core.py::test_a",
    "tests/test_core.py::TestB::test_b",
    "tests/test_core.py::test_c[1]",
    "tests/test_core.py::test_c[2]",
]


def test_marker_expressions_read_the_markers_in_the_source(tmp_path: Path) -> None:
    job = JOB.replace("python -m pytest -q", "python -m pytest -q tests -m 'not slow and not gpu'")
    report = survey(tmp_path, {"ci.yml": "on: push\n" + job}, {"tests/test_core.py": MARKED}, MARKED_IDS)

    assert report.run == 2  # test_c, both cases: `parametrize` is a marker, but neither slow nor gpu
    assert {n.test: n.why for n in report.not_run} == {
        "tests/test_core.py::test_a": '-m "not slow and not gpu" in job `tests` of .github/workflows/ci.yml',
        "tests/test_core.py::TestB::test_b": '-m "not slow and not gpu" in job `tests` of .github/workflows/ci.yml',
    }


def test_keyword_expressions_match_names_and_marker_names_as_pytest_does(tmp_path: Path) -> None:
    job = JOB.replace("python -m pytest -q", "python -m pytest -q tests -k 'TestB or slow'")
    report = survey(tmp_path, {"ci.yml": "on: push\n" + job}, {"tests/test_core.py": MARKED}, MARKED_IDS)

    assert report.run == 2
    assert sorted(n.test for n in report.not_run) == ["tests/test_core.py::test_c[1]", "tests/test_core.py::test_c[2]"]


def test_markers_added_while_collecting_leave_m_undecided(tmp_path: Path) -> None:
    conftest = "def pytest_collection_modifyitems(items):\n    for i in items:\n        i.add_marker('slow')\n"
    job = JOB.replace("python -m pytest -q", "python -m pytest -q tests -m 'not slow'")
    files = {"tests/test_core.py": MARKED, "tests/conftest.py": conftest}
    report = survey(tmp_path, {"ci.yml": "on: push\n" + job}, files, MARKED_IDS)

    assert (report.run, report.not_run) == (0, ())
    assert {u.why for u in report.undecided} == {
        '-m "not slow": a conftest.py adds markers while collecting in job `tests` of .github/workflows/ci.yml'
    }


def test_marker_arguments_and_broken_expressions_are_undecided(tmp_path: Path) -> None:
    job = JOB.replace("python -m pytest -q", "python -m pytest -q tests -m 'slow(reason=1)'")
    job += "      - run: python -m pytest -q packages -k 'x and'\n"
    report = survey(tmp_path, {"ci.yml": "on: push\n" + job}, {"tests/test_core.py": MARKED}, MARKED_IDS)

    [why] = {u.why.split(" in job")[0] for u in report.undecided}
    # pytest 8.1 and later accept marker arguments in -m (the audit cannot read them); pytest 8.0 rejects
    # the expression itself. Undecided either way, saying which.
    assert why == '-m "slow(reason=1)" compares marker arguments, which the audit does not read' or why.startswith(
        '-m "slow(reason=1)" is not an expression pytest accepts'
    )
    report = survey(tmp_path, {"ci.yml": "on: push\n" + JOB.replace("-q", "-q -k 'x and'")})
    assert report.undecided[0].why.startswith('-k "x and" is not an expression pytest accepts')


# Two matrix entries GitHub names alike, `tests (tests/unit, fast)`: one value holds the comma the other's
# name puts between two values. They are two jobs, selecting different directories.
ALIKE = """\
on: push
jobs:
  tests:
    runs-on: RUNNER
    strategy:
      matrix:
        include:
          - {suite: tests/unit, extra: fast}
          - {suite: "tests/unit, fast"}
    steps:
      - run: python -m pytest -q "${{ matrix.suite }}" -k "not slow"
"""
ALIKE_FILES = {
    "tests/unit/test_a.py": "def test_fast(): pass\ndef test_slow(): pass\n",
    "tests/unit, fast/test_b.py": "def test_fast(): pass\ndef test_slow(): pass\n",
}
ALIKE_LABEL = "job `tests (tests/unit, fast)` of .github/workflows/ci.yml"
ALIKE_SUBJECT = ".github/workflows/ci.yml: job tests (tests/unit, fast)"


def test_filters_of_two_jobs_that_read_alike_are_two_findings(tmp_path: Path) -> None:
    collected = [f"{m}::{t}" for m in ALIKE_FILES for t in ("test_fast", "test_slow")]
    report = survey(tmp_path, {"ci.yml": ALIKE.replace("RUNNER", "ubuntu-latest")}, ALIKE_FILES, collected)

    why = f'-k "not slow" in {ALIKE_LABEL}'
    assert report.run == 2
    assert [(n.test, n.why) for n in report.not_run] == [
        ("tests/unit/test_a.py::test_slow", why),
        ("tests/unit, fast/test_b.py::test_slow", why),
    ]
    # Each entry's filter drops the tests of its own directory: one finding each, not one for both.
    assert checks(report) == [
        (
            "ci-filtered",
            f'{ALIKE_SUBJECT}: -k "not slow"',
            f"no CI job runs 1 test id(s) in 1 module(s) ({m} (1 of 2: test_slow)): {why}",
        )
        for m in ALIKE_FILES
    ]


def test_unreachable_jobs_that_read_alike_each_tell_their_own_tests(tmp_path: Path) -> None:
    collected = [f"{m}::test_fast" for m in ALIKE_FILES]
    report = survey(tmp_path, {"ci.yml": ALIKE.replace("RUNNER", "self-hosted")}, ALIKE_FILES, collected)

    why = "needs runner [self-hosted], which this repository does not have (runners: ubuntu-latest)"
    assert [n.why for n in report.not_run] == [f"{ALIKE_LABEL} {why}"] * 2
    assert checks(report) == [
        (
            "ci-unreachable-runner",
            ALIKE_SUBJECT,
            f"{ALIKE_LABEL} {why}; none of its tests run in CI: 1 test id(s) in 1 module(s) ({m}) no other job runs",
        )
        for m in ALIKE_FILES
    ]


def test_a_deeply_nested_workflow_is_invalid_with_its_line_not_a_recursion_error(tmp_path: Path) -> None:
    nested = "on: push\n" + JOB.replace(
        "    steps:", "    strategy:\n      matrix:\n        py: " + "[" * 200 + "]" * 200 + "\n    steps:"
    )
    assert len(nested) < 700

    report = survey(tmp_path, {"ci.yml": nested})

    assert report.jobs == ()
    check, subject, message = checks(report)[0]
    assert (check, subject) == ("ci-workflow-invalid", ".github/workflows/ci.yml")
    assert message == ".github/workflows/ci.yml:7:72: not valid YAML: nested more than 64 levels deep"


def test_a_yaml_alias_bomb_is_an_invalid_workflow_found_fast(tmp_path: Path) -> None:
    lines = ["x0: &x0 [a, a, a, a, a, a, a, a, a, a]"]
    lines += [f"x{i}: &x{i} [" + ", ".join([f"*x{i - 1}"] * 10) + "]" for i in range(1, 9)]
    bomb = "on: push\nenv:\n" + "".join(f"  {line}\n" for line in lines) + JOB
    assert len(bomb) < 800  # 10^9 leaves once expanded

    started = time.monotonic()
    report = survey(tmp_path, {"ci.yml": bomb})

    assert time.monotonic() - started < 5
    check, subject, message = checks(report)[0]
    assert (check, subject) == ("ci-workflow-invalid", ".github/workflows/ci.yml")
    assert message == (
        ".github/workflows/ci.yml:7:7: not valid YAML: expands to more than 100000 nodes (aliases of aliases)"
    )


MATRIX_ON = "on:\n  push:\n    branches: [main]\n"


def test_a_strategy_without_a_matrix_is_valid_as_github_runs_it(tmp_path: Path) -> None:
    job = JOB.replace(
        "    runs-on: ubuntu-latest\n", "    runs-on: ubuntu-latest\n    strategy:\n      fail-fast: false\n"
    )
    report = survey(tmp_path, {"ci.yml": MATRIX_ON + job})

    assert (report.run, report.problems, report.findings) == (3, (), ())


def test_empty_values_github_accepts_are_no_filter_and_an_empty_input(tmp_path: Path) -> None:
    # A bare `tags:` (flake8's main.yml) and an input with no value (nox's `activate-environment:`): GitHub runs both.
    on = "on:\n  push:\n    branches: [main]\n    tags:\n  pull_request:\n"
    job = JOB.replace(
        "      - uses: actions/checkout@v4\n", "      - uses: actions/checkout@v4\n        with:\n          ref:\n"
    )
    report = survey(tmp_path, {"ci.yml": on + job})

    assert (report.run, report.problems, report.findings) == (3, (), ())


def test_runs_on_from_a_matrix_mapping_and_from_case_is_read_per_entry(tmp_path: Path) -> None:
    mapping = """\
jobs:
  tests:
    strategy:
      matrix:
        config:
          - {name: linux, runner: ubuntu-latest}
          - {name: gpu, runner: {group: gpu-boxes}}
    runs-on: ${{ matrix.config.runner }}
    steps:
      - run: python -m pytest -q
"""
    report = survey(tmp_path, {"ci.yml": MATRIX_ON + mapping})
    [linux, gpu] = report.jobs
    assert (linux.job, linux.runs_on, linux.state, report.run) == (
        "tests (linux, ubuntu-latest)",
        "ubuntu-latest",
        "runs",
        3,
    )
    assert gpu.state == "undecided" and "runner group 'gpu-boxes' cannot be checked" in gpu.why, gpu
    picked = """\
jobs:
  tests:
    strategy:
      matrix:
        os: [linux, mac]
    runs-on: ${{ case(matrix.os == 'linux', 'ubuntu-latest', 'macos-14') }}
    steps:
      - if: matrix.os == 'linux' || matrix.os == 'windows'
        run: python -m pytest -q tests
      - if: ${{ matrix.os != 'linux' && inputs.full }}
        run: python -m pytest -q packages
"""
    report = survey(tmp_path / "case", {"ci.yml": MATRIX_ON + picked})
    labels = {j.job: j.runs_on for j in report.jobs}
    assert labels == {"tests (linux)": "ubuntu-latest", "tests (mac)": "macos-14"}, report.jobs
    # The mac entry's step hinges on an input, known only when the workflow runs: undecided, and why.
    assert report.run == 2
    assert [u.test for u in report.undecided] == ["packages/x/tests/test_x.py::test_x"]
    assert "inputs.full" in report.undecided[0].why


def test_an_if_on_a_step_using_a_local_composite_action_holds_for_its_steps(tmp_path: Path) -> None:
    action = "runs:\n  using: composite\n  steps:\n    - run: python -m pytest -q\n      shell: bash\n"
    job = JOB.replace(
        "      - run: python -m pytest -q\n", "      - if: false\n        uses: ./.github/actions/tests\n"
    )
    report = survey(tmp_path, {"ci.yml": MATRIX_ON + job}, {".github/actions/tests/action.yml": action})

    assert report.run == 0


def test_a_local_composite_action_reads_its_inputs_from_with_or_their_defaults(tmp_path: Path) -> None:
    action = """\
inputs:
  has-gpu:
    default: false
  where:
    default: tests
runs:
  using: composite
  steps:
    - if: ${{ inputs.has-gpu == 'false' }}
      run: python -m pytest ${{ inputs.where }}
      shell: bash
    - if: inputs.HAS-GPU == 'true'
      run: python -m pytest packages/x/tests
      shell: bash
"""
    cpu = JOB.replace("      - run: python -m pytest -q\n", "      - uses: ./.github/actions/tests\n")
    report = survey(tmp_path / "cpu", {"ci.yml": MATRIX_ON + cpu}, {".github/actions/tests/action.yml": action})
    # No `with:`: has-gpu is "false" (GitHub passes inputs as text), where is "tests".
    assert (report.run, [n.test for n in report.not_run]) == (2, ["packages/x/tests/test_x.py::test_x"])
    gpu = cpu.replace("tests\n", "tests\n        with:\n          has-gpu: ${{ matrix.gpu }}\n", 1)
    gpu = gpu.replace("    runs-on:", "    strategy:\n      matrix:\n        gpu: [true]\n    runs-on:")
    report = survey(tmp_path / "gpu", {"ci.yml": MATRIX_ON + gpu}, {".github/actions/tests/action.yml": action})
    assert (report.run, [n.test for n in report.not_run]) == (1, COLLECTED[:2])


def test_a_repository_script_whose_shebang_gives_the_shell_flags_is_followed(tmp_path: Path) -> None:
    job = JOB.replace("python -m pytest -q", "scripts/test")
    for shebang in ("#!/bin/sh -e", "#!/usr/bin/env -S bash -eu"):
        root = tmp_path / str(len(shebang))
        script = {"scripts/test": f'{shebang}\nset -x\npytest tests "$@"\n'}
        report = survey(root, {"ci.yml": MATRIX_ON + job}, script)
        assert (report.run, [n.test for n in report.not_run]) == (2, ["packages/x/tests/test_x.py::test_x"]), shebang


def test_a_top_level_description_is_ignored_as_github_ignores_it(tmp_path: Path) -> None:
    report = survey(tmp_path, {"ci.yml": "name: ci\ndescription: 'what it does'\n" + MATRIX_ON + JOB})

    assert (report.run, report.problems, report.findings) == (3, (), ())
    # Any other stray key is still the typo it usually is.
    typo = survey(tmp_path / "typo", {"ci.yml": "name: ci\ndescripton: 'what it does'\n" + MATRIX_ON + JOB})
    assert "ci-workflow-invalid" in [f.check for f in typo.findings] and typo.run == 0


def test_a_shell_script_a_project_runner_starts_is_followed(tmp_path: Path) -> None:
    # typer's `uv run bash scripts/test.sh`: the script's pytest is read, with the arguments it was given.
    job = JOB.replace("python -m pytest -q", "uv run bash scripts/test.sh tests")
    script = {"scripts/test.sh": '#!/usr/bin/env bash\nset -e\npytest "${@}" --cov=typer\n'}
    report = survey(tmp_path, {"ci.yml": MATRIX_ON + job}, files=script)

    assert [n.test for n in report.not_run] == ["packages/x/tests/test_x.py::test_x"]
    assert (report.run, report.undecided) == (2, ())


def test_an_undecided_test_is_explained_by_the_job_that_runs_tests(tmp_path: Path) -> None:
    package = "jobs:\n  package:\n    runs-on: ubuntu-latest\n    steps:\n      - run: rstcheck CHANGES.rst\n"
    tests = JOB.replace("jobs:\n", "").replace(
        "python -m pytest -q", 'python -m pytest -k "not test_b"\n      - run: ./ci.sh'
    )
    report = survey(tmp_path, {"ci.yml": MATRIX_ON + package + tests})

    [undecided] = report.undecided
    assert undecided.test == "tests/test_core.py::test_b"
    assert "job `tests`" in undecided.why and "ci.sh" in undecided.why, undecided.why
