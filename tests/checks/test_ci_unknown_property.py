"""Unknown is never none: a job with a command the audit cannot read never has its tests called not run.

Whatever program such a step runs (a name the audit has never heard of, a path only the run knows), a test the
job's own pytest filters out is undecided, never `not run`; without that step it is not run, so the property
is not met by calling everything undecided.
"""

from __future__ import annotations

import shlex
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers.workflow_cases import audit, fates, lay_out

KNOWN = {"echo", "pip", "cd", "git", "ruff", "mypy", "test", "true", "python", "pytest", "tox", "nox", "make"}
PROGRAMS = st.one_of(
    st.from_regex(r"[a-z][a-z0-9_-]{0,10}", fullmatch=True).filter(lambda p: p not in KNOWN),
    st.sampled_from(["./ci.sh", "scripts/run", "$RUNNER", "${{ matrix.tool }}", "python igor.py", "just cov"]),
)
ARGS = st.lists(st.from_regex(r"[a-z0-9_.=-]{1,8}", fullmatch=True), max_size=3)
WORKFLOW = """
on: [push, pull_request]
jobs:
  tests:
    runs-on: ubuntu-latest
    strategy:
      matrix:
        tool: [a, b]
    steps:
      - uses: actions/checkout@v4
      - run: python -m pytest -k "not slow" tests
{extra}"""


def fate_of_slow(extra: str) -> str:
    case = {
        "repository": "me/project",
        "files": {".github/workflows/ci.yml": WORKFLOW.format(extra=extra)},
        "expected": {"tests/test_a.py::test_fast": "runs", "tests/test_a.py::test_slow": "not run"},
    }
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        report = audit(root, case, lay_out(root, case))
        found = fates(report, list(case["expected"]))
    assert found["tests/test_a.py::test_fast"] == "runs"
    return found["tests/test_a.py::test_slow"]


def test_without_an_unknown_step_the_filtered_test_is_not_run() -> None:
    assert fate_of_slow("      - run: pip install -e .\n") == "not run"


@settings(max_examples=60, deadline=None)
@given(PROGRAMS, ARGS)
def test_a_step_the_audit_cannot_read_leaves_the_filtered_test_undecided(program: str, args: list[str]) -> None:
    command = " ".join([program, *(shlex.quote(a) for a in args)])
    assert fate_of_slow(f"      - run: {command}\n") == "undecided", command
