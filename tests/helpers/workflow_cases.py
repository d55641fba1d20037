"""The real-workflow cases of tests/checks/workflows: read one, lay it out in a directory, audit it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

from promote import config
from promote.checks.ci import CIReport, survey_ci

CASES_DIR = Path(__file__).resolve().parent.parent / "checks" / "workflows"
CASES = sorted(CASES_DIR.glob("*.toml"))


def read(path: Path) -> dict[str, Any]:
    """One case: source, repository, trunk, runners, the files with their commits, the record."""
    case = tomllib.loads(path.read_text())
    assert set(case["commits"]) == set(case["files"]), "each file says the commit it was read at"
    return case


def lay_out(root: Path, case: dict[str, Any]) -> config.Config:
    """The case's files, one small test module per test id of its record, and its promote.toml."""
    modules: dict[str, list[str]] = {}
    for test in case["expected"]:
        module, _, name = test.partition("::")
        modules.setdefault(module, []).append(name)
    files = {**case["files"], **{m: _module(names) for m, names in modules.items()}}
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    body = f'repository = "{case["repository"]}"\n'
    if "runners" in case:
        body += "runners = [" + ", ".join(f'"{r}"' for r in case["runners"]) + "]\n"
    trunk = case.get("trunk", "main")
    (root / "promote.toml").write_text(f'[promote]\ntrunk = "{trunk}"\n[promote.ci]\n{body}')
    return config.load(root / "promote.toml")


def audit(root: Path, case: dict[str, Any], cfg: config.Config) -> CIReport:
    return survey_ci(root, cfg, list(case["expected"]))


def fates(report: CIReport, tests: list[str]) -> dict[str, str]:
    """Each test id's fate as the record words it: runs, not run, undecided."""
    out = dict.fromkeys(tests, "runs")
    out.update({n.test: "not run" for n in report.not_run})
    out.update({u.test: "undecided" for u in report.undecided})
    return out


def _module(names: list[str]) -> str:
    """A test module with each `name`: a function, or `Class::method` in a unittest TestCase (both runners run
    those)."""
    classes: dict[str, list[str]] = {}
    text = "import unittest\n\n"
    for name in names:
        cls, _, method = name.rpartition("::")
        if cls:
            classes.setdefault(cls, []).append(method)
        else:
            text += f"def {name}():\n    pass\n"
    for cls, methods in classes.items():
        text += f"class {cls}(unittest.TestCase):\n" + "".join(f"    def {m}(self):\n        pass\n" for m in methods)
    return text
