"""in-toto Statements v1 per package: the test-result v0.1 predicate, and promote's own for what that cannot hold."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from promote.core.findings import Finding
from promote.core.vocab import is_red
from promote.runners.summary import PackageResult

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://in-toto.io/attestation/test-result/v0.1"
# Ours: blocked and crashed tests, the station, the findings; shipped as promote/schemas/test-detail-v1.schema.json.
DETAIL_TYPE = "https://github.com/promote/promote/attestation/test-detail/v1"
DETAIL_SCHEMA = "schemas/test-detail-v1.schema.json"
_SCP = re.compile(r"^(?:[^@/]+@)?(?P<host>[^:/]+):(?P<path>(?!//).+)$")


def canonical_url(url: str, root: Path) -> str:
    """The repository's remote URL as a URL, credentials stripped: scp-style to ssh://, a local path to file://."""
    url = url.strip()
    if not url:
        return root.resolve().as_uri()
    parts = urlsplit(url)
    if parts.scheme and parts.netloc:
        host = parts.hostname or ""
        netloc = host + (f":{parts.port}" if parts.port else "")
        return urlunsplit((parts.scheme, netloc, parts.path, "", ""))
    if parts.scheme == "file":
        return url
    m = _SCP.match(url)
    if m and not Path(url).exists():
        return f"ssh://{m['host']}/{m['path'].lstrip('/')}"
    path = Path(url)
    return (path if path.is_absolute() else root / path).resolve().as_uri()


def subject(repo_url: str, commit: str) -> list[dict[str, Any]]:
    return [{"name": repo_url, "uri": repo_url, "digest": {"gitCommit": commit}}]


def _outcomes(pkg: PackageResult) -> tuple[list[str], list[str], list[str]]:
    top = [t for t in pkg.tests if t.parent is None]
    blocked = set(pkg.blocked_tests)
    passed = [t.nodeid for t in top if t.outcome in ("passed", "xpassed") and t.nodeid not in blocked]
    failed = [t.nodeid for t in top if is_red(t.outcome) and t.nodeid not in blocked]
    failed += sorted(pkg.crashed_tests)
    warned = [t.nodeid for t in top if t.outcome in ("skipped", "xfailed") and t.nodeid not in blocked]
    # Blocked tests did not pass and did not fail here: the v0.1 predicate's nearest word for them is "warned".
    warned += sorted(blocked)
    return passed, warned, failed


def statement(pkg: PackageResult, *, repo_url: str, commit: str, run_id: str) -> dict[str, Any]:
    """One package's results as a test-result v0.1 Statement, with exactly that predicate's fields."""
    passed, warned, failed = _outcomes(pkg)
    result = "FAILED" if failed else ("WARNED" if warned else "PASSED")
    return {
        "_type": STATEMENT_TYPE,
        "subject": subject(repo_url, commit),
        "predicateType": PREDICATE_TYPE,
        "predicate": {
            "result": result,
            "configuration": [{"name": f"promote test --package {pkg.name}", "uri": f"promote-run:{run_id}"}],
            "url": f"promote-run:{run_id}/{pkg.name}",
            "passedTests": passed,
            "warnedTests": warned,
            "failedTests": failed,
        },
    }


def _finding(f: Finding) -> dict[str, Any]:
    return {"check": f.check, "severity": f.severity, "subject": f.subject, "message": f.message, "cause": f.cause}


def detail(pkg: PackageResult, *, repo_url: str, commit: str, run_id: str) -> dict[str, Any]:
    """What the test-result predicate has no field for: blocked and crashed tests, the station, the findings."""
    why = {b.test: b for b in pkg.blockers}
    return {
        "_type": STATEMENT_TYPE,
        "subject": subject(repo_url, commit),
        "predicateType": DETAIL_TYPE,
        "predicate": {
            "run": run_id,
            "package": pkg.name,
            "station": pkg.station,
            "blockedTests": [
                {
                    "test": t,
                    "requirements": list(why[t].requirements) if t in why else [],
                    "stations": list(why[t].stations) if t in why else [],
                }
                for t in sorted(pkg.blocked_tests)
            ],
            "crashedTests": sorted(pkg.crashed_tests),
            "findings": [_finding(f) for f in pkg.findings],
        },
    }


def statements(pkg: PackageResult, *, repo_url: str, root: Path, commit: str, run_id: str) -> dict[str, dict[str, Any]]:
    """Both Statements of a package, keyed by the file name stem each is written under."""
    url = canonical_url(repo_url, root)
    return {
        pkg.name: statement(pkg, repo_url=url, commit=commit, run_id=run_id),
        f"{pkg.name}.promote": detail(pkg, repo_url=url, commit=commit, run_id=run_id),
    }
