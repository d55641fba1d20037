"""CI audit on real workflow files: filters, unreachable runners, fork-only jobs, matrices, broken YAML."""

from __future__ import annotations

from pathlib import Path

from promote import config
from promote.checks.ci import outcome as ci_outcome
from promote.checks.ci import survey_ci
from promote.config import Config
from promote.core.outcome import CheckOutcome
from tests.helpers.gitrepos import git

CI_YML = """\
name: ci
on: [push, pull_request]
jobs:
  tests:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - run: |
          pip install -e '.[dev]' && echo installed
          pytest tests \\
            --ignore=tests/test_stream.py -k "not device" 2>&1 | tee pytest.log
  mac:
    runs-on: [self-hosted, macos]
    steps:
      - run: pytest tests/test_stream.py
  upstream:
    if: github.repository == 'upstream/name'
    runs-on: ubuntu-latest
    steps:
      - run: python -m pytest integration
"""

UNIT_YAML = """\
on: push
jobs:
  unit:
    strategy:
      matrix:
        os: [ubuntu-latest, macos-14, gpu-box]
    runs-on: ${{ matrix.os }}
    steps:
      - run: python -m unittest discover -s tests -p "test_*.py"
"""

BROKEN_YML = "on: push\njobs:\n  x:\n    runs-on: [ubuntu-latest\n    steps: []\n"

SOURCES = {
    "tests/test_stream.py": "def test_stream_a(): pass\ndef test_stream_b(): pass\n",
    "tests/test_device.py": (
        "import unittest\n\nclass DeviceCase(unittest.TestCase):\n    def test_cpu(self): pass\n\n"
        "def test_pin(): pass\n"
    ),
    "tests/test_model.py": "def test_load(): pass\ndef test_device_leak(): pass\n",
    "integration/test_e2e.py": "def test_e2e(): pass\n",
}

COLLECTED = [
    "tests/test_stream.py::test_stream_a",
    "tests/test_stream.py::test_stream_b",
    "tests/test_device.py::DeviceCase::test_cpu",
    "tests/test_device.py::test_pin",
    "tests/test_model.py::test_load",
    "tests/test_model.py::test_device_leak",
    "integration/test_e2e.py::test_e2e",
]


def workspace(
    root: Path, files: dict[str, str], body: str = 'runners = ["ubuntu-latest"]\nrepository = "me/name"\n'
) -> Config:
    """A checkout with `files` and a promote.toml whose [promote.ci] table is `body`."""
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (root / "promote.toml").write_text(f'[promote]\ntrunk = "main"\n[promote.ci]\n{body}')
    return config.load(root / "promote.toml")


def by_subject(outcome: CheckOutcome) -> dict[str, str]:
    return {f.subject: f"{f.check}: {f.message}" for f in outcome.findings}


def test_incident_workflows_name_every_filter_and_every_job_that_cannot_run(tmp_path: Path) -> None:
    files = {
        **SOURCES,
        ".github/workflows/ci.yml": CI_YML,
        ".github/workflows/unit.yaml": UNIT_YAML,
        ".github/workflows/broken.yml": BROKEN_YML,
    }
    cfg = workspace(tmp_path, files)

    outcome = ci_outcome(survey_ci(tmp_path, cfg, COLLECTED))

    assert outcome.status == "fail"
    found = by_subject(outcome)
    # One finding per filter and per job that cannot run, each listing what it leaves out.
    assert sorted(found) == [
        ".github/workflows/broken.yml",
        ".github/workflows/ci.yml: job mac",
        ".github/workflows/ci.yml: job tests: --ignore=tests/test_stream.py",
        '.github/workflows/ci.yml: job tests: -k "not device"',
        ".github/workflows/ci.yml: job upstream",
        ".github/workflows/unit.yaml: job unit (gpu-box)",
    ]
    # The broken file is named with its line; the other workflows were still audited.
    assert found[".github/workflows/broken.yml"].startswith("ci-workflow-invalid: .github/workflows/broken.yml:5:")
    assert found[".github/workflows/ci.yml: job tests: --ignore=tests/test_stream.py"] == (
        "ci-filtered: no CI job runs 2 test id(s) in 1 module(s) (tests/test_stream.py): --ignore=tests/test_stream.py "
        "in job `tests` of .github/workflows/ci.yml; job `mac` of .github/workflows/ci.yml needs runner "
        "[self-hosted, macos], which this repository does not have (runners: ubuntu-latest)"
    )
    # A filter that drops part of two modules says how much of each.
    assert found['.github/workflows/ci.yml: job tests: -k "not device"'] == (
        "ci-filtered: no CI job runs 2 test id(s) in 2 module(s) (tests/test_device.py (1 of 2: test_pin), "
        'tests/test_model.py (1 of 2: test_device_leak)): -k "not device" in job `tests` of .github/workflows/ci.yml'
    )
    # A TestCase the -k filter drops is still run by the unittest job on the hosted matrix entries.
    assert not [f for f in outcome.findings if "test_device.py::DeviceCase" in f.message]
    # The tests only the fork-pinned job would run are told in its finding, not once more as ci-filtered.
    assert found[".github/workflows/ci.yml: job upstream"] == (
        "ci-unreachable-runner: job `upstream` of .github/workflows/ci.yml runs only in another repository "
        "(`if: github.repository == 'upstream/name'` is false in me/name, e.g. in a fork); none of its tests run "
        "in CI: 1 test id(s) in 1 module(s) (integration/test_e2e.py) no other job runs"
    )
    assert found[".github/workflows/ci.yml: job mac"].startswith("ci-unreachable-runner: job `mac`")
    stream = next(f for f in outcome.findings if f.subject.endswith("--ignore=tests/test_stream.py"))
    assert stream.cause == "--ignore=tests/test_stream.py in job `tests` of .github/workflows/ci.yml"
    assert "3 job(s) run 2 of 7 test ids" in outcome.evidence
    assert outcome.reason == (
        "5 of 7 test ids are run by no CI job; 3 job(s) cannot run in this repository; "
        "1 workflow file(s) GitHub would refuse"
    )


def test_report_lists_each_matrix_entry_with_its_runner_and_commands(tmp_path: Path) -> None:
    cfg = workspace(tmp_path, {**SOURCES, ".github/workflows/unit.yaml": UNIT_YAML})

    report = survey_ci(tmp_path, cfg, COLLECTED)

    rows = [(j.job, j.runs_on, j.state, j.tests_run) for j in report.jobs]
    assert rows == [
        ("unit (ubuntu-latest)", "ubuntu-latest", "runs", 1),
        ("unit (macos-14)", "macos-14", "runs", 1),
        ("unit (gpu-box)", "gpu-box", "never", 0),
    ]
    assert report.jobs[0].commands == ("python -m unittest discover -s tests -p test_*.py",)
    assert report.run == 1


def test_every_test_run_by_reachable_jobs_passes_with_counts(tmp_path: Path) -> None:
    workflow = "on: push\njobs:\n  t:\n    runs-on: ubuntu-22.04\n    steps:\n      - run: python3 -m pytest -n auto\n"
    cfg = workspace(tmp_path, {**SOURCES, ".github/workflows/t.yml": workflow})

    outcome = ci_outcome(survey_ci(tmp_path, cfg, COLLECTED))

    assert (outcome.status, outcome.reason) == ("pass", "CI runs all 7 test ids")
    assert outcome.findings == ()
    assert "1 job(s) run 7 of 7 test ids" in outcome.evidence


def test_marker_filter_reads_the_markers_and_an_unknown_condition_is_undecided(tmp_path: Path) -> None:
    workflow = """\
on: push
jobs:
  fast:
    runs-on: ubuntu-latest
    steps:
      - run: pytest tests -m "not slow"
  nightly:
    if: github.event_name == 'schedule'
    runs-on: ubuntu-latest
    steps:
      - run: pytest integration
  gated:
    if: needs.changes.outputs.tests == 'true'
    runs-on: ubuntu-latest
    steps:
      - run: pytest integration
"""
    slow_load = "import pytest\n\n@pytest.mark.slow\ndef test_load(): pass\ndef test_device_leak(): pass\n"
    files = {**SOURCES, "tests/test_model.py": slow_load, ".github/workflows/t.yml": workflow}
    cfg = workspace(tmp_path, files)

    report = survey_ci(tmp_path, cfg, COLLECTED)
    outcome = ci_outcome(survey_ci(tmp_path, cfg, COLLECTED))

    assert outcome.status == "fail"
    assert [(n.test, n.why) for n in report.not_run] == [
        ("tests/test_model.py::test_load", '-m "not slow" in job `fast` of .github/workflows/t.yml')
    ]
    whys = {u.test: u.why for u in report.undecided}
    assert "tests/test_model.py::test_device_leak" not in whys
    # The workflow starts on push: `github.event_name` is "push", so `nightly` never runs for a change; what
    # another job outputs is known only when the workflow runs.
    assert whys["integration/test_e2e.py::test_e2e"] == (
        "job `gated` of .github/workflows/t.yml may not run: `if: needs.changes.outputs.tests == 'true'`: "
        "`needs.changes.outputs.tests` is only known when the workflow runs"
    )
    assert report.run == 5


def test_repository_comes_from_a_github_origin_and_decides_the_pin(tmp_path: Path) -> None:
    workflow = """\
on: push
jobs:
  all:
    if: ${{ github.repository_owner == 'Upstream' && !cancelled() }}
    runs-on: ubuntu-latest
    steps:
      - run: pytest
"""
    cfg = workspace(tmp_path, {**SOURCES, ".github/workflows/t.yml": workflow}, 'runners = ["ubuntu-latest"]\n')
    git(tmp_path, "init", "-q", "-b", "main")
    git(tmp_path, "remote", "add", "origin", "git@github.com:upstream/name.git")

    outcome = ci_outcome(survey_ci(tmp_path, cfg, COLLECTED))

    assert outcome.status == "pass"
    assert outcome.evidence[0] == "1 workflow file(s) in .github/workflows, 1 job(s); repository upstream/name"


def test_unknown_repository_leaves_a_pinned_job_undecided(tmp_path: Path) -> None:
    workflow = (
        "on: push\njobs:\n  all:\n    if: github.repository == 'a/b'\n    runs-on: ubuntu-latest\n"
        "    steps:\n      - run: pytest\n"
    )
    cfg = workspace(tmp_path, {**SOURCES, ".github/workflows/t.yml": workflow}, "runners = []\n")

    outcome = ci_outcome(survey_ci(tmp_path, cfg, COLLECTED))

    assert outcome.status == "undecided"
    assert "the repository's name is not known (set [promote.ci] repository)" in outcome.reason


def test_hosted_labels_count_only_while_hosted_runners_are_available(tmp_path: Path) -> None:
    workflow = "on: push\njobs:\n  t:\n    runs-on: ubuntu-latest\n    steps:\n      - run: pytest\n"
    cfg = workspace(
        tmp_path, {**SOURCES, ".github/workflows/t.yml": workflow}, 'runners = ["mini"]\nhosted_available = false\n'
    )

    outcome = ci_outcome(survey_ci(tmp_path, cfg, COLLECTED))

    assert outcome.status == "fail"
    # The only testing job cannot run: one finding for it and the 7 tests of 4 modules it leaves out.
    assert [(f.check, f.subject) for f in outcome.findings] == [
        ("ci-unreachable-runner", ".github/workflows/t.yml: job t")
    ]
    assert outcome.findings[0].message.endswith(
        "none of its tests run in CI: 7 test id(s) in 4 module(s) "
        "(tests/test_stream.py, tests/test_device.py, tests/test_model.py, integration/test_e2e.py) no other job runs"
    )
    assert outcome.reason == "7 of 7 test ids are run by no CI job; 1 job(s) cannot run in this repository"


def test_a_filter_that_drops_few_tests_names_them_and_a_large_group_names_every_module(tmp_path: Path) -> None:
    core = "def test_fast(): pass\ndef test_slow_device(): pass\n"
    many = {f"tests/test_m{i}.py": "def test_a(): pass\ndef test_b(): pass\n" for i in range(6)}
    workflow = (
        "on: push\njobs:\n  t:\n    runs-on: ubuntu-latest\n    steps:\n"
        '      - run: pytest tests/test_core.py -k "not slow_device"\n'
        "  u:\n    runs-on: ubuntu-latest\n    steps:\n"
        "      - run: pytest tests --ignore=tests/test_core.py -k 'not b'\n"
    )
    cfg = workspace(tmp_path, {"tests/test_core.py": core, **many, ".github/workflows/t.yml": workflow})
    collected = ["tests/test_core.py::test_fast", "tests/test_core.py::test_slow_device"]
    collected += [f"tests/test_m{i}.py::test_{x}" for i in range(6) for x in "ab"]

    found = by_subject(ci_outcome(survey_ci(tmp_path, cfg, collected)))

    # One test deselected: the finding names it, not only its module.
    assert found['.github/workflows/t.yml: job t: -k "not slow_device"'] == (
        "ci-filtered: no CI job runs 1 test id(s) in 1 module(s) (tests/test_core.py (1 of 2: test_slow_device)): "
        '-k "not slow_device" in job `t` of .github/workflows/t.yml; --ignore=tests/test_core.py in job `u` of '
        ".github/workflows/t.yml"
    )
    # Six tests are too many to list; each of the six modules is still named.
    modules = ", ".join(f"tests/test_m{i}.py (1 of 2)" for i in range(6))
    assert found['.github/workflows/t.yml: job u: -k "not b"'].startswith(
        f"ci-filtered: no CI job runs 6 test id(s) in 6 module(s) ({modules}): "
    )


def test_nox_sessions_run_from_a_workflow_pass_their_posargs_to_pytest(tmp_path: Path) -> None:
    noxfile = """\
import nox

nox.options.sessions = ["tests"]

@nox.session(python=["3.11"])
def tests(session):
    session.install("-e", ".")
    session.run("pytest", "tests", *session.posargs)

@nox.session
def integration(session):
    session.chdir("integration")
    session.run("python", "-m", "pytest", ".")
"""
    workflow = (
        "on: push\njobs:\n  nox:\n    runs-on: ubuntu-latest\n    steps:\n"
        "      - run: nox -- --deselect tests/test_model.py::test_device_leak\n"
    )
    cfg = workspace(tmp_path, {**SOURCES, "noxfile.py": noxfile, ".github/workflows/nox.yml": workflow})

    report = survey_ci(tmp_path, cfg, COLLECTED)

    assert report.jobs[0].commands == (
        "nox -- --deselect tests/test_model.py::test_device_leak "
        "(session tests: pytest tests --deselect tests/test_model.py::test_device_leak)",
    )
    not_run = {n.test: n.why for n in report.not_run}
    assert not_run == {
        "tests/test_model.py::test_device_leak": "--deselect tests/test_model.py::test_device_leak in job `nox` of "
        ".github/workflows/nox.yml",
        # The integration session is not a default session and nothing asks for it.
        "integration/test_e2e.py::test_e2e": "no CI test command covers it",
    }


def test_a_nox_session_that_takes_posargs_or_a_default_gets_the_workflows_posargs_or_the_default(
    tmp_path: Path,
) -> None:
    noxfile = """\
import nox

@nox.session
def test(session):
    arguments = session.posargs or ["-n", "auto", "tests"]
    session.run("pytest", *arguments)
"""
    workflow = (
        "on: push\njobs:\n  nox:\n    runs-on: ubuntu-latest\n    steps:\n"
        "      - run: nox -s test -- integration --verbose\n      - run: nox -s test\n"
    )
    cfg = workspace(tmp_path, {**SOURCES, "noxfile.py": noxfile, ".github/workflows/nox.yml": workflow})

    report = survey_ci(tmp_path, cfg, COLLECTED)

    assert report.jobs[0].commands == (
        "nox -s test -- integration --verbose (session test: pytest integration --verbose)",
        "nox -s test (session test: pytest -n auto tests)",
    )
    assert (report.run, report.not_run, report.undecided) == (7, (), ())


def test_a_nox_session_that_hands_itself_to_a_function_of_the_noxfile_runs_what_the_function_runs(
    tmp_path: Path,
) -> None:
    noxfile = """\
import nox
from helpers import publish

def run_tests(quiet, session):
    test_dir = session.posargs or ["tests"]
    session.run("pytest", *test_dir)

@nox.session
def tests(session):
    run_tests("-q", session=session)

@nox.session
def release(session):
    publish(session)
"""
    workflow = (
        "on: push\njobs:\n  nox:\n    runs-on: ubuntu-latest\n    steps:\n"
        "      - run: nox -s tests\n      - run: nox -s release\n"
    )
    cfg = workspace(tmp_path, {**SOURCES, "noxfile.py": noxfile, ".github/workflows/nox.yml": workflow})

    report = survey_ci(tmp_path, cfg, COLLECTED)

    # The helper's command (the session handed by keyword); the session handed to an imported function is
    # unread (undecided), never taken to run nothing.
    assert report.jobs[0].commands[0] == "nox -s tests (session tests: pytest tests)"
    assert {u.why for u in report.undecided} == {
        "`nox -s release`: `publish` is handed the nox session and is not read in job `nox` of "
        ".github/workflows/nox.yml"
    }


def test_ini_addopts_working_directory_and_repository_scripts_are_followed(tmp_path: Path) -> None:
    files = {
        "packages/a/pyproject.toml": '[tool.pytest.ini_options]\naddopts = "--ignore=tests/test_slow.py -q"\n',
        "packages/a/tests/test_fast.py": "def test_fast(): pass\n",
        "packages/a/tests/test_slow.py": "def test_slow(): pass\n",
        "packages/b/tests/test_b.py": "def test_b(): pass\n",
        "ci/test.sh": "#!/usr/bin/env bash\nset -e\ncd a\nexec pytest tests\n",
        ".github/workflows/t.yml": (
            "on: push\njobs:\n  t:\n    runs-on: ubuntu-latest\n    defaults:\n      run:\n"
            "        working-directory: packages\n    steps:\n      - run: ../ci/test.sh\n"
        ),
    }
    cfg = workspace(tmp_path, files)
    collected = [
        "packages/a/tests/test_fast.py::test_fast",
        "packages/a/tests/test_slow.py::test_slow",
        "packages/b/tests/test_b.py::test_b",
    ]

    report = survey_ci(tmp_path, cfg, collected)

    assert report.jobs[0].commands == ("pytest tests",)
    assert {n.test: n.why for n in report.not_run} == {
        "packages/a/tests/test_slow.py::test_slow": "--ignore=tests/test_slow.py in job `t` of .github/workflows/t.yml",
        "packages/b/tests/test_b.py::test_b": "no CI test command covers it",
    }
    # A filter's finding is the job's filter; what no command covers is the workflows' as a whole.
    assert [(f.subject, f.message, f.cause) for f in report.findings] == [
        (
            ".github/workflows/t.yml: job t: --ignore=tests/test_slow.py",
            "no CI job runs 1 test id(s) in 1 module(s) (packages/a/tests/test_slow.py): "
            "--ignore=tests/test_slow.py in job `t` of .github/workflows/t.yml",
            "--ignore=tests/test_slow.py in job `t` of .github/workflows/t.yml",
        ),
        (
            ".github/workflows",
            "no CI job runs 1 test id(s) in 1 module(s) (packages/b/tests/test_b.py): no CI test command covers it",
            None,
        ),
    ]


def test_launchers_the_audit_cannot_read_make_the_outcome_undecided(tmp_path: Path) -> None:
    workflow = "on: push\njobs:\n  t:\n    runs-on: ubuntu-latest\n    steps:\n      - run: just test\n"
    cfg = workspace(tmp_path, {**SOURCES, ".github/workflows/t.yml": workflow})

    outcome = ci_outcome(survey_ci(tmp_path, cfg, COLLECTED))

    assert outcome.status == "undecided"
    assert outcome.reason == (
        "7 of 7 test ids cannot be decided: `just test`: what `just` runs is not read by the audit in job `t` of "
        ".github/workflows/t.yml"
    )


def test_no_workflows_is_undecided_and_no_inventory_is_undecided(tmp_path: Path) -> None:
    cfg = workspace(tmp_path, SOURCES)
    assert ci_outcome(survey_ci(tmp_path, cfg, COLLECTED)).reason == (
        "no GitHub Actions workflows in .github/workflows (the audit reads no other CI)"
    )
    (tmp_path / ".github/workflows").mkdir(parents=True)
    (tmp_path / ".github/workflows/t.yml").write_text(
        "on: push\njobs:\n  t:\n    runs-on: ubuntu-latest\n    steps:\n      - run: pytest\n"
    )
    empty = ci_outcome(survey_ci(tmp_path, cfg, []))
    assert (empty.status, empty.reason) == ("undecided", "no test inventory to compare with (run `promote test` first)")


def test_a_module_pytest_could_not_collect_is_still_run_by_unittest_discovery(tmp_path: Path) -> None:
    workflow = "on: push\njobs:\n  t:\n    runs-on: ubuntu-22.04\n    steps:\n"
    workflow += "      - run: python -m unittest discover -v tests\n"
    sources = {
        "tests/test_broken.py": "import not_installed\n",
        "tests/test_case.py": "import unittest\n\nclass Case(unittest.TestCase):\n    def test_a(self): pass\n",
        ".github/workflows/t.yml": workflow,
    }
    cfg = workspace(tmp_path, sources)

    # A module that failed to collect shows up among the collected ids as its path alone.
    outcome = ci_outcome(survey_ci(tmp_path, cfg, ["tests/test_broken.py", "tests/test_case.py::Case::test_a"]))

    assert (outcome.status, outcome.reason) == ("pass", "CI runs all 2 test ids")
    assert outcome.findings == ()


def test_a_noxfile_nested_too_deep_for_pythons_parser_is_unread_not_a_traceback(tmp_path: Path) -> None:
    from promote.checks.ci.nox import Noxfile

    (tmp_path / "noxfile.py").write_text(
        "import nox\n@nox.session\ndef t(session):\n    session.run(" + "-" * 50_000 + "1)\n"
    )
    assert Noxfile.read(tmp_path, "noxfile.py") == "noxfile.py cannot be read: nested too deep for Python's parser"
