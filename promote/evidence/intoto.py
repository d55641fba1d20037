"""in-toto Statement v1 with a test-result predicate, per package, bound to the candidate commit."""

from __future__ import annotations

from typing import Any

from promote.runners.summary import PackageResult

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://in-toto.io/attestation/test-result/v0.1"


def statement(pkg: PackageResult, *, repo_url: str, commit: str, run_id: str) -> dict[str, Any]:
    """One package's results as an in-toto Statement; blocked tests are listed apart from the rest."""
    top = [t for t in pkg.tests if t.parent is None]
    blocked = set(pkg.blocked_tests)
    crashed = set(pkg.crashed_tests)
    passed = [t.nodeid for t in top if t.outcome in ("passed", "xpassed") and t.nodeid not in blocked]
    failed = [t.nodeid for t in top if t.outcome in ("failed", "error") and t.nodeid not in blocked]
    failed += sorted(crashed)
    skipped = [t.nodeid for t in top if t.outcome in ("skipped", "xfailed") and t.nodeid not in blocked]
    result = "FAILED" if failed else ("WARNED" if skipped or blocked else "PASSED")
    return {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": repo_url or "repository", "digest": {"gitCommit": commit}}],
        "predicateType": PREDICATE_TYPE,
        "predicate": {
            "result": result,
            "configuration": [{"name": f"promote test --package {pkg.name}", "uri": f"promote-run:{run_id}"}],
            "passedTests": passed,
            "warnedTests": skipped,
            "failedTests": failed,
            # Not part of the v0.1 predicate: tests no station can run, kept apart from the others.
            "blockedTests": sorted(blocked),
        },
    }
