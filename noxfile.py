"""Sessions for tests, lint, type checks and benchmarks (`nox -s NAME`)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import nox

if sys.version_info >= (3, 11):
    import tomllib
else:  # nox itself depends on tomli there
    import tomli as tomllib

nox.options.sessions = ["tests", "lint", "typecheck"]
nox.options.reuse_existing_virtualenvs = True


@nox.session
def tests(session: nox.Session) -> None:
    """Run the test suite in parallel, slow end-to-end tests included."""
    session.install("-e", ".[dev]")
    session.run("pytest", "-n", "auto", *session.posargs)


# The dependencies promote imports or drives itself; their lower bounds are the versions it claims to work with.
OLDEST = ("click", "jinja2", "MarkupSafe", "pytest", "pytest-xdist", "PyYAML")


def oldest_constraints() -> list[str]:
    """`name==X.Y.*` for each of OLDEST, from its `>=X.Y` lower bound in pyproject.toml."""
    project = tomllib.loads(Path("pyproject.toml").read_text(encoding="utf-8"))["project"]
    bounds = {}
    for requirement in project["dependencies"]:
        found = re.fullmatch(r"([A-Za-z0-9_.-]+)\s*>=\s*([0-9][0-9.]*)", requirement.split(";")[0].strip())
        if found:
            bounds[found[1].lower()] = found[2]
    missing = [name for name in OLDEST if name.lower() not in bounds]
    if missing:
        raise ValueError(f"pyproject.toml declares no '>=' lower bound for {', '.join(missing)}")
    return [f"{name}=={bounds[name.lower()]}.*" for name in OLDEST]


@nox.session
def oldest(session: nox.Session) -> None:
    """Run the test suite with the oldest versions of promote's core dependencies that pyproject allows."""
    # Beside the session's virtualenv, not in session.create_tmp(): that would point TMPDIR into this
    # repository, and the tests' tmp_path repositories would sit inside it.
    constraints = Path(session.virtualenv.location) / "oldest-constraints.txt"
    constraints.write_text("".join(f"{line}\n" for line in oldest_constraints()), encoding="utf-8")
    session.log("constraints: " + ", ".join(oldest_constraints()))
    session.install("-c", str(constraints), "-e", ".[dev]")
    session.run("python", "-m", "pip", "freeze")
    session.run("pytest", "-n", "auto", *session.posargs)


# The MLX releases the plugin's tests run against: the oldest `mlx[cpu]` on the package index (the lower
# bound pyproject.toml declares, `pip index versions mlx-cpu`) and the newest. Between them, 0.32.2 is the
# last release without `mx.get_memory_limit`; tests/runners/test_mlx_range.py runs it in its own venv.
MLX_RANGE = ("0.26.5", "latest")


@nox.session
@nox.parametrize("mlx", MLX_RANGE)
def mlx_range(session: nox.Session, mlx: str) -> None:
    """Run the plugin's tests against the oldest and the newest `mlx[cpu]` on the index."""
    session.install("-e", ".[dev]")
    session.install("--upgrade", "mlx[cpu]" if mlx == "latest" else f"mlx[cpu]=={mlx}")
    session.run("python", "-c", "import mlx.core as mx; print('mlx', mx.__version__)")
    default = ["tests/runners/plugin", "tests/runners/test_mlx_range.py", "tests/runners/test_leak_modes.py"]
    session.run("pytest", "-n", "2", "-p", "no:randomly", *(session.posargs or default))


@nox.session
def interpreters(session: nox.Session) -> None:
    """Run the plugin in every interpreter a tested package may have (Python 3.9 to 3.13), each one required."""
    # promote runs on 3.10+, the plugin inside the package's own interpreter: the test makes one venv per Python.
    session.install("-e", ".[dev]")
    session.run("pytest", "-n", "auto", "tests/runners/test_interpreters.py", env={"PROMOTE_REQUIRE_PYTHONS": "1"})


@nox.session
def lint(session: nox.Session) -> None:
    """Check formatting and lint with ruff, and the layer contract with import-linter."""
    session.install("ruff", "import-linter", "-e", ".")
    session.run("ruff", "format", "--check", "promote", "tests", "benchmarks", "docs", "noxfile.py")
    session.run("ruff", "check", "promote", "tests", "benchmarks", "docs", "noxfile.py")
    # The layer contract in pyproject.toml: each layer imports only those below it, the plugin only core.
    session.run("lint-imports")


@nox.session
def typecheck(session: nox.Session) -> None:
    """Type-check the package with mypy (strict)."""
    session.install("-e", ".[dev]")
    session.run("mypy")


@nox.session
def docs(session: nox.Session) -> None:
    """Build the manual in docs/ with MkDocs, --strict: a broken link, a missing page or anchor fails."""
    # The reference is rendered from the schema file itself (docs/config_reference.py): promote need not be installed.
    session.install("mkdocs>=1.6")
    session.run("mkdocs", "build", "--strict", *session.posargs)


@nox.session
def bench(session: nox.Session) -> None:
    """Run every benchmark in benchmarks/ (arms interleaved) and print the figures."""
    # A regular (not editable) install, as users have: the editable finder adds start-up time.
    # The suites the benchmarks run use MLX (and mlx-lm's own tests need mlx-lm and requests).
    # bench_ci_corpus asks tox and hatch what the workflows run, as the audit does where they are installed.
    session.install(".[demo]", "detect-test-pollution", "requests", "tox", "tox-uv", "hatch")
    default = [
        "benchmarks/bench_accel_overhead.py",
        "benchmarks/bench_check.py",
        "benchmarks/bench_imports.py",
        "benchmarks/bench_test.py",
        "benchmarks/bench_scale.py",
        "benchmarks/bench_bisect.py",
        "benchmarks/bench_od.py",
        "benchmarks/bench_stations.py",
        "benchmarks/bench_mlxlm.py",
        "benchmarks/bench_plugin.py",
        "benchmarks/bench_history_year.py",
        "benchmarks/bench_inventory.py",
        "benchmarks/bench_ci_corpus.py",
    ]
    for script in sorted(session.posargs or default):
        session.run("python", script)
