"""The CI audit asks tox, make and hatch what they run (real tools, real files), and says when one is missing."""

from __future__ import annotations

from pathlib import Path

from promote.checks.ci import CIReport, survey_ci
from promote.checks.ci import outcome as ci_outcome
from tests.checks.test_ci import workspace

SOURCES = {
    "tests/unit/test_a.py": "def test_a(): pass\n",
    "tests/integration/test_b.py": "def test_b(): pass\n",
    "docs/test_docs.py": "def test_docs(): pass\n",
}
COLLECTED = ["tests/unit/test_a.py::test_a", "tests/integration/test_b.py::test_b", "docs/test_docs.py::test_docs"]
ON = "on: push\njobs:\n  t:\n    runs-on: ubuntu-latest\n    steps:\n"

TOX_INI = """\
[tox]
env_list = py, lint
[testenv]
deps = pytest
changedir = tests
commands =
    pytest {posargs:unit}
[testenv:lint]
commands = ruff check .
"""

MAKEFILE = """\
PYTEST ?= python -m pytest
.PHONY: test unit ci lint
unit:
\t$(PYTEST) tests/unit
lint:
\truff check .
ci: lint unit
\tcd docs && $(PYTEST) -q .
"""

HATCH = """\
[project]
name = "demo"
version = "0.1"
[tool.hatch.envs.test]
dependencies = ["pytest"]
[tool.hatch.envs.test.scripts]
unit = "pytest tests/unit"
all = ["unit", "pytest tests/integration"]
[[tool.hatch.envs.test.matrix]]
python = ["3.11", "3.12"]
"""


def survey(
    root: Path, files: dict[str, str], steps: str, tool_path: str | None = None, *, matrix: str = ""
) -> CIReport:
    on = ON.replace("    steps:\n", matrix + "    steps:\n")
    cfg = workspace(root, {**SOURCES, **files, ".github/workflows/t.yml": on + steps})
    return survey_ci(root, cfg, COLLECTED, tool_path=tool_path)


def fates(report: CIReport) -> dict[str, str]:
    out = {t: "runs" for t in COLLECTED}
    out.update({n.test: "not run" for n in report.not_run})
    out.update({u.test: "undecided" for u in report.undecided})
    return out


def test_tox_is_asked_for_its_commands_with_the_workflows_posargs(tmp_path: Path) -> None:
    report = survey(tmp_path / "default", {"tox.ini": TOX_INI}, "      - run: tox -e py\n")
    assert fates(report) == {COLLECTED[0]: "runs", COLLECTED[1]: "not run", COLLECTED[2]: "not run"}
    posargs = survey(
        tmp_path / "posargs", {"tox.ini": TOX_INI}, "      - run: python -m tox run -e py -- integration\n"
    )
    assert fates(posargs) == {COLLECTED[0]: "not run", COLLECTED[1]: "runs", COLLECTED[2]: "not run"}
    # Every environment of env_list, and arguments known only when the job runs: undecided, never "not run".
    unknown = survey(tmp_path / "unknown", {"tox.ini": TOX_INI}, "      - run: tox -- $EXTRA_ARGS\n")
    assert set(fates(unknown).values()) == {"undecided"}, fates(unknown)
    # The job shows what tox said it runs.
    [job] = report.jobs
    assert job.commands == ("tox -e py (tox env py: pytest unit)",), job.commands


def test_an_environment_tox_does_not_know_leaves_its_matrix_neighbours_read(tmp_path: Path) -> None:
    matrix = "    strategy:\n      matrix:\n        tox: [py, py-min]\n"
    report = survey(tmp_path, {"tox.ini": TOX_INI}, "      - run: tox -e ${{ matrix.tox }}\n", matrix=matrix)
    # tox refuses a question naming py-min; py is asked again without it, and runs tests/unit.
    assert fates(report) == {COLLECTED[0]: "runs", COLLECTED[1]: "undecided", COLLECTED[2]: "undecided"}
    assert {u.why for u in report.undecided} == {
        "`tox -e py-min`: tox could not tell: provided environments not found in configuration file: py-min "
        "in job `t (py-min)` of .github/workflows/t.yml"
    }


def test_toxenv_from_a_steps_env_mapping_taken_from_the_matrix_names_the_environment(tmp_path: Path) -> None:
    matrix = "    strategy:\n      matrix:\n        include:\n          - env: {TOXENV: py}\n"
    steps = "      - env: ${{ matrix.env }}\n        run: tox -- integration\n"
    report = survey(tmp_path, {"tox.ini": TOX_INI}, steps, matrix=matrix)
    assert fates(report) == {COLLECTED[0]: "not run", COLLECTED[1]: "runs", COLLECTED[2]: "not run"}


def test_make_is_asked_with_a_dry_run_and_its_recipes_read_as_shell(tmp_path: Path) -> None:
    report = survey(tmp_path, {"Makefile": MAKEFILE}, "      - run: make ci\n")
    assert fates(report) == {COLLECTED[0]: "runs", COLLECTED[1]: "not run", COLLECTED[2]: "runs"}
    # The job count known only when the job runs is no target; the Makefile named with -f is.
    files = {"Makefile": "all:\n\ttrue\n", "ci.mk": MAKEFILE}
    counted = survey(tmp_path / "counted", files, "      - run: make -j $(nproc) -f ci.mk ci\n")
    assert fates(counted) == fates(report), counted.undecided
    # A dry run runs nothing: no test ran, nothing was written.
    assert not (tmp_path / ".pytest_cache").exists()


def test_hatch_scripts_are_read_from_hatch_for_every_matrix_environment(tmp_path: Path) -> None:
    steps = "      - run: hatch run test:all\n"
    report = survey(tmp_path / "all", {"pyproject.toml": HATCH}, steps)
    assert fates(report) == {COLLECTED[0]: "runs", COLLECTED[1]: "runs", COLLECTED[2]: "not run"}
    matrix = (
        "    strategy:\n      matrix:\n        python: ['3.11', '3.12']\n"
        "    runs-on: ubuntu-latest\n    steps:\n      - run: hatch run test.py${{ matrix.python }}:unit\n"
    )
    cfg = workspace(
        tmp_path / "matrix",
        {**SOURCES, "pyproject.toml": HATCH, ".github/workflows/t.yml": "on: push\njobs:\n  t:\n" + matrix},
    )
    entries = survey_ci(tmp_path / "matrix", cfg, COLLECTED)
    assert fates(entries) == {COLLECTED[0]: "runs", COLLECTED[1]: "not run", COLLECTED[2]: "not run"}
    assert [j.commands for j in entries.jobs] == [
        ("hatch run test.py3.11:unit (hatch env test.py3.11: pytest tests/unit)",),
        ("hatch run test.py3.12:unit (hatch env test.py3.12: pytest tests/unit)",),
    ]


def test_a_name_after_hatch_run_is_asked_of_hatch_whatever_it_is_called(tmp_path: Path) -> None:
    hatch = HATCH + '[tool.hatch.envs.default.scripts]\nfull = "pytest {args:tests/integration}"\n'
    steps = "      - run: hatch run full\n      - run: hatch run mkdocs build\n"
    report = survey(tmp_path, {"pyproject.toml": hatch}, steps)
    # `full` is the default environment's script; `mkdocs` is no script, so hatch runs the program itself.
    assert fates(report) == {COLLECTED[0]: "not run", COLLECTED[1]: "runs", COLLECTED[2]: "not run"}
    [job] = report.jobs
    assert job.commands == ("hatch run full (hatch env default: pytest tests/integration)",), job.commands


def test_a_tool_not_installed_here_is_said_once_and_its_tests_are_undecided(tmp_path: Path) -> None:
    report = survey(tmp_path, {"tox.ini": TOX_INI}, "      - run: tox -e py\n      - run: tox -e py -- docs\n", "")
    assert set(fates(report).values()) == {"undecided"}
    # Said once: both commands under one reason, and one line for the tool.
    assert {u.why for u in report.undecided} == {
        "`tox -e py`, `tox -e py -- docs`: tox is not installed where promote runs in job `t` of "
        ".github/workflows/t.yml"
    }
    evidence = ci_outcome(report).evidence
    assert [e for e in evidence if "not installed" in e and "undecided" not in e] == [
        "tox is not installed where promote runs: 1 job(s) unread (install it beside promote)"
    ]


def test_tox_makes_the_environments_it_needs_to_answer_outside_the_checkout(tmp_path: Path) -> None:
    tox_ini = "[tox]\nenv_list = py\n[testenv]\ncommands = pytest --cov {envsitepackagesdir}/demo tests/unit\n"
    report = survey(tmp_path, {"tox.ini": tox_ini}, "      - run: tox -e py\n")
    assert fates(report) == {COLLECTED[0]: "runs", COLLECTED[1]: "not run", COLLECTED[2]: "not run"}
    # Filling in {envsitepackagesdir} made a virtualenv: in a scratch directory, gone; the checkout is untouched.
    assert not (tmp_path / ".tox").exists()
