"""The audit's view of the whole repository: its test roots collected beside the packages' runs, who runs each
test, and one `unowned-tests` finding per directory no package runs."""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from promote.checks.ci import CIReport
from promote.checks.ci.named import named_dirs
from promote.config import Config, PackageConfig
from promote.core.findings import Finding, Location
from promote.core.git import Repo
from promote.core.outcome import FAIL, PASS, UNDECIDED, CheckOutcome
from promote.core.vocab import UNOWNED_TESTS, Owner, Severity, Status
from promote.runners.inventory import Collecting, Collector, OwnerOf, TestInventory, TestRoot
from promote.runners.test_roots import CONFIGURATION, TEST_PATHS, RootSpec, configured, discovered, merged

NAME = "inventory"
# Set to 0, the audit collects no test root: what the inventory costs is measured against that
# (benchmarks/bench_inventory.py), and a hurried audit may skip it.
SWITCH = "PROMOTE_INVENTORY"


@dataclass(frozen=True)
class InventoryOutcome(CheckOutcome):
    """The inventory's outcome, with the inventory itself as a value (the Tested gate counts from it)."""

    inventory: TestInventory | None = None


def roots(root: Path, config: Config) -> tuple[RootSpec, ...]:
    """Every test root of the repository at `root`: its pytest configuration's, `test_paths`', and CI's."""
    named = [(p, CONFIGURATION) for p in configured(root)]
    named += [(p, TEST_PATHS) for p in discovered(Repo(root).tracked_files(), config.test_paths)]
    named += [(d.path, d.job) for d in named_dirs(root, config.ci, config.trunk)]
    return merged(named)


def slots(*, alone: bool = False) -> int:
    """Collections at once: every core when nothing else runs, else half (the packages run meanwhile)."""
    return max(1, (os.cpu_count() or 2) // (1 if alone else 2))


def collector(root: Path, spec: RootSpec, packages: tuple[PackageConfig, ...]) -> Collector:
    """A root is collected by the interpreter (and with the env) of the innermost package that holds it, else by
    the repository's own virtualenv, else by promote's Python."""
    here = (root / spec.path).resolve()
    holding = [p for p in packages if here.is_relative_to(p.path.resolve())]
    pkg = max(holding, key=lambda p: len(p.path.resolve().parts), default=None)
    if pkg is not None and not (pkg.python and shutil.which(pkg.interpreter) is None):
        return Collector(spec, pkg.interpreter, pkg.env, pkg.path)
    own = next((v for v in (root / ".venv" / "bin" / "python", root / "venv" / "bin" / "python") if v.is_file()), None)
    return Collector(spec, str(own) if own is not None else sys.executable)


def start(root: Path, config: Config) -> Collecting:
    """Start collecting every test root in the background (none when PROMOTE_INVENTORY=0)."""
    found = () if os.environ.get(SWITCH) == "0" else roots(root, config)
    return Collecting(root, [collector(root, r, config.packages) for r in found], slots=slots())


def owner_of(report: CIReport | None) -> OwnerOf:
    """Who runs a test no package ran, as the CI survey decided it (no workflows: nobody)."""
    undecided = {u.test: u.why for u in report.undecided} if report is not None and report.workflows else {}
    job_of = report.job_of if report is not None else {}

    def owner(test: str) -> tuple[Owner, str | None]:
        if test in job_of:
            return "ci", job_of[test]
        if test in undecided:
            return "ci-undecided", undecided[test]
        return "nobody", None

    return owner


def finding(r: TestRoot) -> Finding:
    """One directory's tests no package runs: how many, one of them, and who (if anyone) does."""
    if r.count:
        what = f"{r.path}: {r.count} tests (e.g. {r.example})"
        if r.errors:
            what += f" and {len(r.errors)} module(s) pytest could not collect (e.g. {r.errors[0]})"
    else:
        what = f"{r.path}: {len(r.errors)} module(s) pytest could not collect (e.g. {r.errors[0]})"
    act = "declare a package that runs them in promote.toml (`promote init --overwrite` proposes one)"
    severity: Severity = "warning"
    if r.owner == "ci":
        message = f"{what} are run by {r.by} only, by no package: {act} to run them in the audit"
    elif r.owner == "ci-undecided":
        message = f"{what}: no package runs them, and whether a CI job does is undecided ({r.by}): {act}"
    else:
        message, severity = f"{what}: no package or CI job runs them: {act}, or a CI job", "error"
    where = Location(r.example.partition("::")[0])
    return Finding(UNOWNED_TESTS, severity, r.path, message, location=where)


def outcome(inventory: TestInventory) -> InventoryOutcome:
    """The findings, and fail when a directory's tests are run by nothing (undecided when CI may run them)."""
    unowned = [r for r in inventory.roots if r.owner != "package"]
    findings = tuple(finding(r) for r in unowned)
    evidence = tuple(
        f"{c.path or '.'}: {c.problem}" if c.problem else f"{c.path or '.'}: {len(c.ids)} test(s) collected"
        for c in inventory.collections
    )
    status: Status = PASS
    if any(r.owner == "nobody" for r in unowned):
        status = FAIL
    elif any(r.owner == "ci-undecided" for r in unowned):
        status = UNDECIDED
    reason = f"{inventory.packaged} of {inventory.total} tests are run by a package"
    return InventoryOutcome(NAME, status, reason, evidence, findings, inventory)
