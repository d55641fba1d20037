"""The CI audit's readers on their own: shell scripts, -k expressions, `if:` conditions, unittest and pytest args."""

from __future__ import annotations

from pathlib import Path

import pytest

from promote.checks.ci import selectors
from promote.checks.ci.commands import Opaque, classify
from promote.checks.ci.expr import evaluate_if
from promote.checks.ci.pytest_run import PytestRun
from promote.checks.ci.shell import Invocation, invocations
from promote.checks.ci.terms import NodeId, Word, words
from promote.checks.ci.tools import ToolCall
from promote.checks.ci.unittest_run import UnittestRun


def commands(script: str, env: dict[str, str | None] | None = None, cwd: str = "") -> list[tuple[str, str | None]]:
    found = invocations(script, cwd=cwd, env=env or {}, read_script=lambda _: None)
    return [(" ".join(w.text if w.known else f"?{w.text}" for w in inv.argv), inv.cwd) for inv in found]


def test_shell_continuations_chains_cd_heredocs_and_redirections() -> None:
    script = """\
set -euo pipefail   # strict
cd pkg && python -m pytest tests \\
  --ignore="tests/test stream.py" 2>&1 | tee log
cat > conf.py <<'EOF'
pytest this is not a command
EOF
if [ -n "$CI" ]; then pytest -k 'not slow' ; fi
pushd ../other; pytest $ARGS "$ARGS" $(echo x); popd
"""
    assert commands(script, {"ARGS": "-x -q"}) == [
        ("set -euo pipefail", ""),
        ("python -m pytest tests --ignore=tests/test stream.py", "pkg"),
        ("tee log", "pkg"),
        ("cat", "pkg"),
        ('[ -n ?"$CI" ]', "pkg"),
        ("pytest -k not slow", "pkg"),
        ("pytest -x -q -x -q ?$(echo x)", "other"),
    ]


def test_assignments_exports_and_unknown_cd_carry_forward() -> None:
    script = 'export PYTEST_ADDOPTS="-k fast"\nX=tests\npytest $X\ncd "$HOME"\npytest\n'
    found = list(invocations(script, cwd="", env={}, read_script=lambda _: None))
    assert [inv.argv for inv in found] == [(Word("pytest"), Word("tests")), (Word("pytest"),)]
    assert found[0].getenv("PYTEST_ADDOPTS") == (True, "-k fast")
    assert found[1].cwd is None


@pytest.mark.parametrize(
    ("expression", "names", "expected"),
    [
        ("not device", ["tests", "test_model.py", "test_load"], True),
        ("not device", ["tests", "test_model.py", "test_Device_leak"], False),
        ("stream and not (slow or gpu)", ["tests", "test_stream.py", "test_x[cpu]"], True),
        ("stream and not (slow or gpu)", ["tests", "test_stream.py", "test_x[gpu]"], False),
        ("test_x[cpu] or nothing", ["test_x[cpu]"], True),
    ],
)
def test_keyword_expressions_match_like_pytest(expression: str, names: list[str], expected: bool) -> None:
    assert selectors.evaluate("-k", expression, names, exact=False) is expected


@pytest.mark.parametrize("expression", ["a and", "(a", "a b", "name(x=1)", "a == b"])
def test_keyword_expressions_beyond_the_grammar_are_refused(expression: str) -> None:
    with pytest.raises(selectors.Unsupported):
        selectors.evaluate("-k", expression, ["a"], exact=False)


@pytest.mark.parametrize(
    ("condition", "value", "repository"),
    [
        ("github.repository == 'Me/Name'", True, True),
        ("${{ github.repository != 'me/name' }}", False, True),
        ("github.repository_owner == 'upstream' || github.event_name == 'push'", None, True),
        ("github.repository == 'upstream/x' && github.event_name == 'push'", False, True),
        ("startsWith(github.repository, 'me/')", True, True),
        ("always()", True, False),
        (False, False, False),
        (None, True, False),
        ("github.ref == 'refs/heads/main'", None, False),
    ],
)
def test_if_conditions_are_evaluated_only_as_far_as_the_checkout_knows(
    condition: object, value: bool | None, repository: bool
) -> None:
    truth = evaluate_if(condition, "me/name")
    assert (truth.value, truth.repository) == (value, repository)


def test_unittest_discovery_needs_packages_and_the_pattern(tmp_path: Path) -> None:
    (tmp_path / "tests/sub").mkdir(parents=True)
    (tmp_path / "tests/deep").mkdir(parents=True)
    (tmp_path / "tests/sub/__init__.py").write_text("")
    case = "import unittest\nclass Case(unittest.TestCase):\n    def test_a(self): pass\nclass Plain:\n    pass\n"
    for name in ("tests/test_top.py", "tests/sub/test_sub.py", "tests/deep/test_deep.py", "tests/check_x.py"):
        (tmp_path / name).write_text(case)
    run = UnittestRun.parse((Word("discover"), Word("-s"), Word("tests")), text="t", cwd="", root=tmp_path)
    verdicts = {
        test: (d.verdict, d.why)
        for test in (
            "tests/test_top.py::Case::test_a",
            "tests/sub/test_sub.py::Case::test_a",
            "tests/deep/test_deep.py::Case::test_a",
            "tests/check_x.py::Case::test_a",
            "tests/test_top.py::Plain::test_b",
        )
        for d in [run.decide(NodeId.parse(test), tmp_path)]
    }
    assert verdicts == {
        "tests/test_top.py::Case::test_a": ("run", ""),
        "tests/sub/test_sub.py::Case::test_a": ("run", ""),
        "tests/deep/test_deep.py::Case::test_a": (
            "dropped",
            "tests/deep/ has no __init__.py, so `t` does not enter it",
        ),
        "tests/check_x.py::Case::test_a": ("dropped", "check_x.py does not match -p test*.py of `t`"),
        "tests/test_top.py::Plain::test_b": ("dropped", "unittest runs TestCase classes only; Plain is not one"),
    }


def test_pytest_options_with_values_are_not_taken_for_paths(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests/test_a.py").write_text("")
    args = tuple(Word(a) for a in ["-n", "4", "--cov", "promote", "-qk", "not slow", "--deselect=tests/test_a.py::x"])
    run = PytestRun.parse(args, text="t", cwd="", root=tmp_path, addopts_env=Word("--ignore=tests/test_b.py"))
    assert run.paths == (("", "."),)
    assert run.keyword == "not slow"
    assert run.deselect == (("tests/test_a.py::x", "tests/test_a.py::x"),)
    assert run.ignore == (("tests/test_b.py", "tests/test_b.py"),)
    assert run.unreadable == ()


def test_wrappers_are_peeled_down_to_the_test_command(tmp_path: Path) -> None:
    def kind(*argv: str) -> str:
        found = classify(Invocation(tuple(Word(a) for a in argv), ""), tmp_path)
        return type(found).__name__ if not isinstance(found, Opaque) else f"Opaque: {found.why}"

    assert kind("uv", "run", "--with", "x", "pytest") == "PytestRun"
    assert kind("timeout", "600", "env", "A=1", "coverage", "run", "--branch", "-m", "pytest") == "PytestRun"
    assert kind("coverage", "run", "--debug", "config", "-m", "pytest") == "PytestRun"  # --debug takes a value
    assert kind("python", "-Im", "pytest", "-v") == "PytestRun"  # -I and -m given together
    assert kind(".venv/bin/python3.11", "-X", "dev", "-m", "unittest") == "UnittestRun"
    assert kind("pytest", "--collect-only") == "NoneType"
    assert kind("make", "test") == "ToolCall"  # make is asked what it runs (tests/checks/test_ci_tools.py)
    assert kind("just", "test") == "Opaque: what `just` runs is not read by the audit"
    assert kind("pip", "install", "pytest") == "NoneType"
    # A project script after a runner may run tests: hatch is asked; another runner's is unread, never "none".
    unknown = Word("test.py${{ matrix.python }}:test", known=False)
    assert isinstance(classify(Invocation((Word("hatch"), Word("run"), unknown), ""), tmp_path), ToolCall)
    assert kind("hatch", "run", "cov:all") == "ToolCall"
    assert kind("hatch", "run", "full") == "ToolCall"  # a script of the default environment, or a program
    assert kind("pdm", "run", "test") == "Opaque: `pdm run test` runs a project script the audit does not read"
    # unittest-xml-reporting's runner is unittest with a report directory.
    assert kind("python", "-m", "xmlrunner", "discover", "-v", "tests", "-o", "out") == "UnittestRun"
    # A launcher that runs a test module of the repository runs tests the audit cannot see; a linter does not.
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "ring_test.py").write_text("import unittest\n")
    launched = "Opaque: `mpirun` runs tests/ring_test.py, which the audit does not read"
    assert kind("mpirun", "-np", "8", "python", "tests/ring_test.py") == launched
    assert kind("ruff", "check", "tests/ring_test.py") == "NoneType"
    # Unknown is never none: a program the audit does not know may run tests; one it knows to run none does not.
    assert (
        kind("mpirun", "-np", "8", "python", "tests/missing_test.py")
        == "Opaque: what `mpirun` runs is not read by the audit"
    )
    assert kind("python", "-m", "tornado.test") == "Opaque: what `tornado.test` runs is not read by the audit"
    assert kind("python", "igor.py", "test_with_core") == "Opaque: what igor.py runs is not read by the audit"
    assert kind("python", "setup.py", "test") == "Opaque: what setup.py runs is not read by the audit"
    assert kind("just", "cov") == "Opaque: what `just` runs is not read by the audit"
    assert kind("./test", "--fast") == "Opaque: what `test` runs is not read by the audit"  # not the builtin
    python = Invocation((Word("$PYTHON", known=False), Word("-m"), Word("pip")), "")
    assert classify(python, tmp_path) == Opaque("$PYTHON -m pip", "`$PYTHON` is not known before the job runs")
    for known in (
        ("echo", "hi"),
        ("python", "setup.py", "sdist"),
        ("python", "-m", "pip", "install", "."),
        ("pipx", "install", "nox"),
        ("python", "-m", "site"),
        ("cd", "src"),
        ("[", "-f", "x", "]"),
    ):
        assert kind(*known) == "NoneType", known


def test_path_words_known_only_when_the_job_runs_leave_every_test_they_could_reach_undecided(tmp_path: Path) -> None:
    for module in ("tests/test_a.py", "other/test_b.py"):
        (tmp_path / module).parent.mkdir(exist_ok=True)
        (tmp_path / module).write_text("def test_x(): pass\n")
    everything = PytestRun.parse(
        (Word('"$@"', known=False),), text='pytest "$@"', cwd="", root=tmp_path, addopts_env=None
    )
    some = PytestRun.parse(
        (Word("tests"), Word('"$@"', known=False)), text='pytest tests "$@"', cwd="", root=tmp_path, addopts_env=None
    )
    for run in (everything, some):
        for test in ("tests/test_a.py::test_x", "other/test_b.py::test_x"):
            decided = run.decide(NodeId.parse(test), tmp_path)
            assert decided.verdict == "undecided" and '"$@"' in decided.why, (run.text, test, decided)
    # Known words alone still decide: a test outside them is not run.
    plain = PytestRun.parse((Word("tests"),), text="pytest tests", cwd="", root=tmp_path, addopts_env=None)
    assert plain.decide(NodeId.parse("other/test_b.py::test_x"), tmp_path).verdict == "dropped"


def test_the_event_name_is_known_for_each_event_that_starts_the_workflow_for_trunk() -> None:
    gate = "needs.changes.outputs.tests == 'true' || github.event_name != 'pull_request'"
    # A push to trunk runs it whatever the other job says; a pull request alone leaves it to that job.
    assert evaluate_if(gate, None, None, ("pull_request", "push")).value is True
    only_pr = evaluate_if(gate, None, None, ("pull_request",))
    assert only_pr.value is None and "needs.changes.outputs.tests" in only_pr.why
    assert evaluate_if("github.event_name == 'schedule'", None, None, ("push", "pull_request")).value is False


def test_a_step_has_no_arguments_and_a_script_it_calls_gets_those_of_the_call() -> None:
    scripts = {"scripts/test": '#!/bin/sh\nexport PREFIX=""\nset -ex\n${PREFIX}pytest "$@"\npytest $1 "$2"\n'}
    found = invocations(
        'scripts/test tests/unit -x\nscripts/test $MORE\npytest "$@" $*\n', cwd="", env={}, read_script=scripts.get
    )
    shown = [" ".join(w.text if w.known else f"?{w.text}" for w in inv.argv) for inv in found]
    assert shown == [
        "set -ex", "pytest tests/unit -x", "pytest tests/unit -x",
        "set -ex", 'pytest ?"$@"', 'pytest ?$1 ?"$2"',
        "pytest",
    ]  # fmt: skip


def test_options_the_repositorys_conftest_files_add_take_their_values_as_pytest_does(tmp_path: Path) -> None:
    files = {
        "tests/conftest.py": 'pytest_plugins = ["tests.optional"]\n',
        "tests/optional.py": (
            "def pytest_addoption(parser):\n"
            '    group = parser.getgroup("collect")\n'
            '    group.addoption("--run-optional", action="append", default=None)\n'
            '    parser.addoption("--fast", action="store_true")\n'
        ),
        "tests/test_a.py": "def test_a(): pass\n",
        "other/test_b.py": "def test_b(): pass\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)

    def parse(*argv: str) -> PytestRun:
        return PytestRun.parse(words(*argv), text=" ".join(argv), cwd="", root=tmp_path, addopts_env=None)

    # `no_jupyter` is the value of --run-optional, not a path; after the flag --fast, `other` is a path.
    valued = parse("tests", "--run-optional", "no_jupyter")
    assert (valued.paths, valued.unreadable) == ((("tests", "tests"),), ())
    flag = parse("tests", "--fast", "other")
    assert [p for p, _ in flag.paths] == ["tests", "other"]
    # Without the conftest that names the plugin, pytest does not know the option either.
    (tmp_path / "tests/conftest.py").unlink()
    assert parse("tests", "--run-optional", "no_jupyter").unreadable == (
        "`no_jupyter` is not a path in the repository",
    )


def test_an_unknown_value_leaves_the_run_undecided_only_for_an_option_that_selects_tests(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()

    def parse(*argv: Word) -> PytestRun:
        return PytestRun.parse(argv, text="pytest", cwd="", root=tmp_path, addopts_env=None)

    report = parse(Word("tests"), Word("--cov-report=html:{out}", known=False), Word("--junitxml"), Word("$X", False))
    assert (report.paths, report.unreadable) == ((("tests", "tests"),), ())
    assert parse(Word("tests"), Word("-k"), Word("$K", known=False)).unreadable == (
        "`$K` is not known before the job runs",
    )
