"""Sessions for tests, lint, type checks and benchmarks (`nox -s NAME`)."""

from __future__ import annotations

import nox

nox.options.sessions = ["tests", "lint", "typecheck"]
nox.options.reuse_existing_virtualenvs = True


@nox.session
def tests(session: nox.Session) -> None:
    """Run the test suite in parallel, slow end-to-end tests included."""
    session.install("-e", ".[dev]")
    session.run("pytest", "-n", "auto", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """Check formatting and lint with ruff."""
    session.install("ruff")
    session.run("ruff", "format", "--check", "promote", "tests", "benchmarks", "noxfile.py")
    session.run("ruff", "check", "promote", "tests", "benchmarks", "noxfile.py")


@nox.session
def typecheck(session: nox.Session) -> None:
    """Type-check the package with mypy (strict)."""
    session.install("-e", ".[dev]")
    session.run("mypy")


@nox.session
def bench(session: nox.Session) -> None:
    """Run every benchmark in benchmarks/ (arms interleaved) and print the figures."""
    # A regular (not editable) install, as users have: the editable finder adds start-up time.
    session.install(".", "detect-test-pollution")
    default = [
        "benchmarks/bench_check.py",
        "benchmarks/bench_test.py",
        "benchmarks/bench_bisect.py",
        "benchmarks/bench_stations.py",
    ]
    for script in sorted(session.posargs or default):
        session.run("python", script)
