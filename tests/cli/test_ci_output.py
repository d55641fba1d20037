"""Output for CI systems: SARIF 2.1.0, GitHub annotations, --junitxml, and JSON Schemas every --json output meets."""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from importlib.resources import files
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from click.testing import Result

from tests.helpers.cli import run
from tests.helpers.gitrepos import Fleet, commit, git, make_fleet
from tests.helpers.packages import write_config, write_package

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

pytestmark = pytest.mark.slow

LEAKY = (
    "import os\n\ndef test_a():\n    os.environ['LEAK'] = '1'\n\ndef test_b():\n    assert 'LEAK' not in os.environ\n"
)
BROKEN_WORKFLOW = "on: push\njobs:\n  t:\n    runs-on: ubuntu-latest\n    stepz:\n      - run: pytest\n"


def schema(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(files("promote").joinpath(f"schemas/{name}.schema.json").read_text("utf-8"))
    return loaded


def valid(doc: object, name: str) -> None:
    jsonschema.validate(doc, schema(name), format_checker=jsonschema.FormatChecker())


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Fleet:
    """Two mirrors, two packages (one leaks an env var into the next test), a workflow with a typo."""
    fleet = make_fleet(tmp_path_factory.mktemp("ci-output"), names=("origin", "mini"))
    files_ = {
        "packages/p/test_p.py": LEAKY,
        "packages/q/test_q.py": "def test_q():\n    assert True\n",
        ".github/workflows/ci.yml": BROKEN_WORKFLOW,
    }
    (fleet.work / "promote.toml").write_text(
        '[promote]\ntrunk = "main"\nmirrors = ["origin", "mini"]\n'
        '[[promote.packages]]\nname = "p"\npath = "packages/p"\n'
        '[[promote.packages]]\nname = "q"\npath = "packages/q"\n'
    )
    commit(fleet.work, "packages, config and a workflow", files_)
    return fleet


def diverge(fleet: Fleet) -> None:
    """A commit on `mini` the candidate lacks: check says blocked, with a mirror-diverged finding."""
    other = fleet.clone_of("mini", "other")
    commit(other, "someone else's work", {"other.txt": "x\n"})
    git(other, "push", "-q", "origin", "main")


def test_check_as_sarif_validates_and_has_one_result_per_finding(tmp_path: Path) -> None:
    fleet = make_fleet(tmp_path, names=("origin", "mini"))
    diverge(fleet)

    sarif = json.loads(run(fleet.work, "check", "--format", "sarif").stdout)
    findings = json.loads(run(fleet.work, "check", "--json").stdout)["findings"]

    valid(sarif, "sarif-2.1.0")
    results = sarif["runs"][0]["results"]
    assert [r["ruleId"] for r in results] == [f["check"] for f in findings] == ["mirror-diverged"]
    assert results[0]["level"] == "error"
    assert sarif["runs"][0]["tool"]["driver"]["rules"][0]["id"] == "mirror-diverged"


def test_format_json_is_the_same_as_json(tmp_path: Path) -> None:
    fleet = make_fleet(tmp_path, names=("origin",))
    a, b = run(fleet.work, "check", "--json"), run(fleet.work, "check", "--format", "json")
    assert (a.exit_code, json.loads(a.stdout)) == (b.exit_code, json.loads(b.stdout))


def test_annotations_only_under_github_actions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fleet = make_fleet(tmp_path, names=("origin", "mini"))
    diverge(fleet)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    assert "::error" not in run(fleet.work, "check").stdout

    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    text = run(fleet.work, "check")
    as_json = run(fleet.work, "check", "--json")

    lines = [line for line in text.stdout.splitlines() if line.startswith("::")]
    assert len(lines) == 1
    assert lines[0].startswith("::error title=promote mirror-diverged::mini: ")
    # With --json, stdout stays JSON; the annotations go to stderr, which the runner reads as well.
    assert json.loads(as_json.stdout)["verdict"] == "blocked"
    assert [line for line in as_json.stderr.splitlines() if line.startswith("::")] == lines


@pytest.fixture(scope="module")
def audited(fleet: Fleet) -> tuple[Result, Result]:
    return run(fleet.work, "audit", "--format", "sarif"), run(fleet.work, "audit", "--json")


def test_audit_sarif_locates_the_invalid_workflow_at_its_line(audited: tuple[Result, Result]) -> None:
    sarif_run, json_run = audited
    sarif = json.loads(sarif_run.stdout)

    valid(sarif, "sarif-2.1.0")
    assert sarif_run.exit_code == json_run.exit_code == 1
    by_rule = {r["ruleId"]: r for r in sarif["runs"][0]["results"]}
    invalid = by_rule["ci-workflow-invalid"]["locations"][0]["physicalLocation"]
    assert invalid["artifactLocation"]["uri"] == ".github/workflows/ci.yml"
    assert invalid["region"]["startLine"] == 5
    assert len(sarif["runs"][0]["results"]) == len(json.loads(json_run.stdout)["findings"])
    # The JSON finding carries the same place as a field: SARIF reads it, not the message.
    found = [f for f in json.loads(json_run.stdout)["findings"] if f["check"] == "ci-workflow-invalid"]
    assert [f["location"] for f in found] == [{"path": ".github/workflows/ci.yml", "line": 5}]


def test_audit_annotation_names_the_workflow_file_and_line(fleet: Fleet, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    lines = [line for line in run(fleet.work, "audit").stdout.splitlines() if line.startswith("::")]

    invalid = [line for line in lines if "ci-workflow-invalid" in line]
    assert invalid == [
        "::error file=.github/workflows/ci.yml,line=5,title=promote ci-workflow-invalid::.github/workflows/ci.yml: "
        ".github/workflows/ci.yml:5: at `jobs.t`: `stepz` is not a key GitHub accepts here; "
        "GitHub refuses the workflow, so none of its jobs runs"
    ]
    # leaks = "report" (the default): test_b sees the variable test_a left, as plain pytest would, and fails;
    # the leak is an error because a later test failed of it.
    assert any(line.startswith("::error ") and "leaked-state" in line for line in lines)
    assert any(line.startswith("::error ") and "order-dependent" in line and "test_b" in line for line in lines)
    # Package p lives in packages/p: its test ids are relative to it, the annotation's file to the repository.
    dependent = [line for line in lines if "title=promote order-dependent" in line]
    assert [line.split("::")[1] for line in dependent] == [
        "error file=packages/p/test_p.py,title=promote order-dependent"
    ]


def test_junitxml_writes_every_package_of_the_run(fleet: Fleet, tmp_path: Path) -> None:
    target = tmp_path / "reports" / "junit.xml"
    result = run(fleet.work, "test", "--junitxml", str(target))

    assert result.exit_code in (0, 1)
    root = ET.parse(target).getroot()
    assert root.tag == "testsuites"
    suites = {s.get("name"): s for s in root.findall("testsuite")}
    assert sorted(suites) == ["p", "q"]
    assert (suites["p"].get("tests"), suites["q"].get("tests")) == ("2", "1")


def test_every_json_output_meets_its_schema(fleet: Fleet, audited: tuple[Result, Result]) -> None:
    outputs = {
        "check": run(fleet.work, "check", "--json"),
        "merge": run(fleet.work, "merge", "--dry-run", "--json"),
        "test": run(fleet.work, "test", "--json"),
        "stations": run(fleet.work, "stations", "--json"),
        "bisect": run(fleet.work, "bisect", "test_p.py::test_b", "--package", "p", "--json"),
        "history": run(fleet.work, "history", "--json"),
        "audit": audited[1],
    }
    for name, result in outputs.items():
        valid(json.loads(result.stdout), name)
    one = json.loads(outputs["test"].stdout)["run"]
    valid(json.loads(run(fleet.work, "history", one, "--json").stdout), "history")
    assert json.loads(outputs["bisect"].stdout)["verdict"] == "order-dependent"


def test_a_document_that_breaks_the_contract_is_refused() -> None:
    with pytest.raises(jsonschema.ValidationError):
        valid({"verdict": "maybe", "candidate": "abc1234", "trunk": "main", "mirrors": [], "findings": []}, "check")
    with pytest.raises(jsonschema.ValidationError):
        valid({"run": "r", "packages": [], "findings": [{"check": "x", "severity": "fatal"}]}, "test")


def test_the_config_schema_accepts_real_configurations_and_refuses_a_typo(fleet: Fleet) -> None:
    demo = files("promote").joinpath("demo/workspace/sanctum/promote.toml.tmpl").read_text("utf-8")
    valid(tomllib.loads(demo), "config")
    valid(tomllib.loads((fleet.work / "promote.toml").read_text()), "config")
    with pytest.raises(jsonschema.ValidationError, match="mirors"):
        valid({"promote": {"trunk": "main", "mirors": ["origin"]}}, "config")


def test_an_unknown_config_key_suggests_the_near_one(tmp_path: Path) -> None:
    fleet = make_fleet(tmp_path, names=("origin",))
    (fleet.work / "promote.toml").write_text('[promote]\ntrunk = "main"\n[promote.ci]\nrunner = ["ubuntu-latest"]\n')

    result = run(fleet.work, "check")

    assert result.exit_code == 2
    assert "promote.ci.runner: unknown key; did you mean 'runners'? expected one of" in result.stderr
    assert "Traceback" not in result.stderr


def green_workspace(root: Path) -> Path:
    write_package(root, "pkg", {"test_a.py": "def test_ok():\n    pass\n"})
    write_config(root, [{"name": "pkg", "path": "pkg"}])
    git(root, "init", "-q", "-b", "main")
    commit(root, "start", {})
    return root


def test_a_junitxml_path_under_a_file_is_refused_before_the_run(tmp_path: Path) -> None:
    work = green_workspace(tmp_path / "work")
    (tmp_path / "report").write_text("a file, not a directory\n")
    target = tmp_path / "report" / "junit.xml"

    result = run(work, "test", "--junitxml", str(target))

    assert result.exit_code == 2, result.output
    assert result.stderr == f"promote: error: --junitxml {target}: {tmp_path / 'report'} is not a directory\n"
    assert result.stdout == "" and not (work / ".promote" / "runs").exists()


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full on this system")
def test_a_junitxml_that_cannot_be_written_after_a_green_run_is_one_line_and_exit_2(tmp_path: Path) -> None:
    work = green_workspace(tmp_path)

    result = run(work, "test", "--junitxml", "/dev/full")

    assert result.exit_code == 2, result.output
    assert result.stdout.endswith("all green\n")  # the run's report came first
    assert (
        result.stderr.splitlines()[-1]
        == "promote: error: --junitxml /dev/full: cannot be written: No space left on device"
    )
    assert "Traceback" not in result.output
