"""The repository's whole test inventory: one audit of a repository laid out like a multi-package project.

Two declared packages (one with a nested `tests/unit`), a CI workflow whose matrix names one of them and a tools
directory no package runs, and a model's own `tests/` nothing runs. Real git, real pytest, real YAML.
"""

from __future__ import annotations

import json
import re
from importlib.resources import files
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from promote.config import load
from promote.evidence import pages as evidence
from tests.helpers.cli import run
from tests.helpers.gitrepos import GIT_ENV, commit, git

pytestmark = pytest.mark.slow

WORKFLOW = """\
name: ci
on: [push, pull_request]
jobs:
  test:
    runs-on: ubuntu-latest
    strategy:
      matrix:
        suite: [packages/alpha, tools]
    steps:
      - uses: actions/checkout@v4
      - run: python -m pytest -q
        working-directory: ${{ matrix.suite }}
"""
PYPROJECT = '[tool.pytest.ini_options]\ntestpaths = ["tests"]\n'


def suite(names: list[str]) -> str:
    return "".join(f"def test_{n}():\n    pass\n\n" for n in names)


FILES = {
    "packages/alpha/pyproject.toml": PYPROJECT,
    "packages/alpha/tests/test_a.py": suite(["one", "two", "three"]),
    "packages/alpha/tests/unit/test_b.py": suite(["four", "five"]),
    "packages/beta/tests/test_c.py": suite(["six", "seven"]),
    # A model's own tests, nested under it: no package and no CI job runs them.
    "models/llama/tests/test_llama.py": suite(["attention", "rope", "cache", "generate"]),
    # The CI's matrix runs these, no package does.
    "tools/tests/test_tool.py": suite(["lint", "fmt", "build"]),
    ".github/workflows/ci.yml": WORKFLOW,
    "promote.toml": (
        '[promote]\ntrunk = "main"\nmirrors = []\n'
        '[[promote.packages]]\nname = "alpha"\npath = "packages/alpha"\n'
        '[[promote.packages]]\nname = "beta"\npath = "packages/beta"\n'
        '[promote.ci]\nrunners = ["ubuntu-latest"]\n'
    ),
}


@pytest.fixture(scope="module")
def audited(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """The repository, and its one audit's --json (the tests only read them)."""
    repo = tmp_path_factory.mktemp("inventory") / "repo"
    repo.mkdir()
    with pytest.MonkeyPatch.context() as mp:
        for key, value in GIT_ENV.items():
            mp.setenv(key, value)
        git(repo, "init", "-q", "-b", "main")
        commit(repo, "a multi-package project", FILES)
        result = run(repo, "audit", "--json")
    assert result.exit_code == 1, result.output
    return repo, json.loads(result.stdout)


def unowned(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f["subject"]: f for f in report["findings"] if f["check"] == "unowned-tests"}


def test_one_finding_per_directory_no_package_runs(audited: tuple[Path, dict[str, Any]]) -> None:
    _, report = audited
    found = unowned(report)
    assert sorted(found) == ["models/llama/tests", "tools/tests"]
    llama, tools = found["models/llama/tests"], found["tools/tests"]
    assert llama["severity"] == "error"
    assert llama["message"].startswith(
        "models/llama/tests: 4 tests (e.g. models/llama/tests/test_llama.py::test_attention): "
        "no package or CI job runs them: declare a package"
    )
    assert llama["location"] == {"path": "models/llama/tests/test_llama.py", "line": None}
    # A CI job runs these: said, at a lower severity.
    assert tools["severity"] == "warning"
    assert tools["message"].startswith(
        "tools/tests: 3 tests (e.g. tools/tests/test_tool.py::test_lint) are run by job `test (tools)` of "
        ".github/workflows/ci.yml only, by no package"
    )
    # The packages' own tests, nested `tests/unit` included, are no finding; nor are they `ci-filtered` twice.
    assert not [f for f in report["findings"] if f["check"] == "ci-filtered" and "llama" in f["message"]]


def test_the_tested_gate_says_it_in_numbers_and_never_all(audited: tuple[Path, dict[str, Any]]) -> None:
    _, report = audited
    tested = report["gates"]["tested"]
    line = (
        "7 of 14 tests are run by a package; 4 in 1 directory by nothing: no package, no CI job; "
        "3 in 1 directory by a CI job only"
    )
    assert line in tested["evidence"]
    assert tested["lead"][0] == line
    assert tested["status"] == "fail"
    ci = next(e for e in tested["evidence"] if e.startswith("CI: "))
    assert "CI runs all" not in ci
    assert ci == "CI: 6 of 14 test ids are run by no CI job"


def test_json_carries_the_inventory_as_the_page_does(audited: tuple[Path, dict[str, Any]]) -> None:
    _, report = audited
    inventory = report["inventory"]
    rows = [(r["path"], r["count"], r["owner"], r["by"]) for r in inventory["roots"]]
    assert rows == [
        ("models/llama/tests", 4, "nobody", None),
        ("packages/alpha/tests", 5, "package", "alpha"),
        ("packages/beta/tests", 2, "package", "beta"),
        ("tools/tests", 3, "ci", "job `test (tools)` of .github/workflows/ci.yml"),
    ]
    assert (inventory["total"], inventory["packaged"]) == (14, 7)
    page = json.loads(Path(report["pages"]["json"]).read_text())
    assert page["inventory"]["roots"] == inventory["roots"]
    jsonschema.validate(page, evidence.schema())
    jsonschema.validate(report, json.loads(files("promote").joinpath("schemas/audit.schema.json").read_text("utf-8")))
    md = Path(report["pages"]["md"]).read_text()
    assert "| `models/llama/tests` | 4 | nothing: no package, no CI job |" in md


def test_init_proposes_every_test_directory_with_its_count(audited: tuple[Path, dict[str, Any]]) -> None:
    repo, _ = audited
    result = run(repo, "init", "--overwrite")
    assert result.exit_code == 0, result.output
    text = (repo / "promote.toml").read_text()
    git(repo, "checkout", "--", "promote.toml")
    blocks = [b.strip() for b in text.split("\n\n") if b.startswith("# [[promote.packages]]")]
    # No environment of the repository's own: promote's Python counted them, and each block says so.
    own = (
        "\n#                                # counted by promote's own Python: no environment of the project's was "
        'found and 0 test module(s) failed to import; set python = "PATH" to the project\'s interpreter'
    )
    assert blocks == [
        "# [[promote.packages]]           # 5 tests in packages/alpha/tests, run by job `test (packages/alpha)` of "
        f'.github/workflows/ci.yml only{own}\n# name = "alpha"\n# path = "packages/alpha"\n# args = ["tests"]\n'
        "# workers = 1",
        f"# [[promote.packages]]           # 4 tests in models/llama/tests, run by nothing{own}\n"
        '# name = "llama"\n# path = "models/llama"\n# args = ["tests"]\n# workers = 1',
        "# [[promote.packages]]           # 3 tests in tools/tests, run by job `test (tools)` of "
        f'.github/workflows/ci.yml only{own}\n# name = "tools"\n# path = "tools"\n# args = ["tests"]\n# workers = 1',
        f"# [[promote.packages]]           # 2 tests in packages/beta/tests, run by nothing{own}\n"
        '# name = "beta"\n# path = "packages/beta"\n# args = ["tests"]\n# workers = 1',
    ]
    assert result.stderr.count("counted by promote's own Python") == 4
    # Uncommented, the proposal is a configuration promote reads.
    uncommented = re.sub(r"^# (\[\[promote\.packages\]\]|name =|path =|args =|workers =)", r"\1", text, flags=re.M)
    loaded = load(_write(repo.parent / "uncommented.toml", uncommented))
    assert [(p.name, p.args) for p in loaded.packages] == [
        ("alpha", ("tests",)),
        ("llama", ("tests",)),
        ("tools", ("tests",)),
        ("beta", ("tests",)),
    ]


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path
