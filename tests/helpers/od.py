"""Real order-dependent cases (shared/corpora/od, beside the repository): built as a user would, pytest calls counted.

Each case is built once per cache directory by the corpus's own `build_case.py` (a git repository and a venv with
the case's pinned requirements from the package index); every test then clones the repository afresh. The venv's
`python-counted` is a wrapper that appends a line to a file for each pytest call made through it, then runs the
venv's python under its own name, so that `sys.executable` (which detect-test-pollution reruns) is the wrapper too.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers.gitrepos import GIT_ENV

CORPUS = next(
    (
        p / "shared" / "corpora" / "od"
        for p in Path(__file__).resolve().parents[1:]
        if (p / "shared/corpora/od").is_dir()
    ),
    Path(__file__).resolve().parents[2].parent / "shared" / "corpora" / "od",
)
PYTEST = ["-p", "no:randomly", "-p", "no:cacheprovider"]


@dataclass(frozen=True)
class Case:
    name: str
    repo: Path  # a fresh clone, with promote.toml
    root: Path  # where the case's pytest runs (the manifest's `root` in the clone)
    python: Path  # the counting wrapper
    calls: Path  # one line per pytest call through `python`
    victim: str
    polluters: tuple[str, ...]
    order: tuple[str, ...]  # the suite's tests, then the polluters, then the victim; the cleaners left out
    fails_in_suite_order: bool

    def count(self) -> int:
        return len(self.calls.read_text().splitlines()) if self.calls.exists() else 0

    def reset(self) -> None:
        self.calls.write_text("")


def manifest() -> list[dict[str, object]]:
    path = CORPUS / "cases.json"
    if not path.is_file():
        if os.environ.get("PROMOTE_REQUIRE_CORPUS"):
            pytest.fail(f"the order-dependent corpus is missing: {CORPUS}")
        pytest.skip(f"no order-dependent corpus at {CORPUS}")
    cases: list[dict[str, object]] = json.loads(path.read_text())["cases"]
    return cases


def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the built cases live: PROMOTE_OD_CASES (kept between runs, as .ci/run does), else this session's tmp."""
    given = os.environ.get("PROMOTE_OD_CASES")
    return Path(given) if given else tmp_path_factory.getbasetemp() / "od-cases"


def built(name: str, cache: Path) -> Path:
    """The case built once under `cache` (a lock file keeps two xdist workers from building it at once)."""
    import fcntl

    cache.mkdir(parents=True, exist_ok=True)
    dest = cache / name
    with open(cache / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (dest / "done").exists():
            subprocess.run(["rm", "-rf", str(dest)], check=True)
            done = subprocess.run(
                [sys.executable, str(CORPUS / "build_case.py"), name, str(dest), "--no-promote-toml"],
                capture_output=True,
                text=True,
            )
            assert done.returncode == 0, done.stderr[-2000:]
            (dest / "done").write_text(done.stdout.splitlines()[-1])
    return dest


def case(name: str, cache: Path, where: Path, *, reorder: bool = True) -> Case:
    """A fresh clone of the built case at `where`, configured for promote: the victim last when `reorder`, else the
    suite in its own order (the case's `tests`)."""
    entry = next(c for c in manifest() if c["name"] == name)
    dest = built(name, cache)
    repo = where / "repo"
    subprocess.run(["git", "clone", "-q", str(dest / "repo"), str(repo)], check=True, env={**os.environ, **GIT_ENV})
    venv_python = dest / "venv" / "bin" / "python"
    calls = where / "pytest-calls"
    wrapper = dest / "venv" / "bin" / f"python-counted-{where.name}"
    wrapper.write_text(
        "#!/bin/bash\n"
        f'case " $* " in *" -m pytest "*|*" -mpytest "*) echo "$*" >> {shlex.quote(str(calls))};; esac\n'
        f'exec -a "$0" {shlex.quote(str(venv_python))} "$@"\n'
    )
    wrapper.chmod(0o755)
    root = repo / str(entry["root"])
    victim, polluters = str(entry["victim"]), tuple(str(p) for p in entry["polluters"])  # type: ignore[union-attr]
    cleaners = {c for cs in dict(entry.get("cleaners") or {}).values() for c in cs}
    ids = collected(venv_python, root, str(entry["tests"]).split())
    # The polluters just before the victim, so that no other test of the suite can undo what they leave behind.
    order = tuple([t for t in ids if t != victim and t not in cleaners and t not in polluters] + [*polluters, victim])
    args = list(order) if reorder else str(entry["tests"]).split()
    config = (
        f'[promote]\ntrunk = "main"\nmirrors = []\n\n[[promote.packages]]\nname = "{name}"\npath = "{entry["root"]}"\n'
        f"python = {json.dumps(str(wrapper))}\nworkers = 1\nargs = {json.dumps([*PYTEST, *args])}\n"
    )
    (repo / "promote.toml").write_text(config)
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True, env={**os.environ, **GIT_ENV})
    subprocess.run(["git", "commit", "-qm", "promote"], cwd=repo, check=True, env={**os.environ, **GIT_ENV})
    fails = bool(entry["fails_in_suite_order"])
    return Case(name, repo, root, wrapper, calls, victim, polluters, order, fails)


def collected(python: Path, root: Path, tests: list[str]) -> list[str]:
    """The suite's test ids in its own order, as pytest collects them."""
    done = subprocess.run(
        [str(python), "-m", "pytest", *PYTEST, "--collect-only", "-q", *tests], cwd=root, capture_output=True, text=True
    )
    return [line for line in done.stdout.splitlines() if "::" in line and not line.startswith(" ")]


def detect_test_pollution(c: Case, root: Path) -> tuple[int, str]:
    """detect-test-pollution on the same victim and order, through the same counting wrapper: (calls, its output)."""
    ids = root.parent / f"{c.repo.name}-testids.txt"
    ids.write_text("".join(f"{t}\n" for t in c.order))
    c.reset()
    # Its console script run by the wrapper: `-m detect_test_pollution` would load it as __main__, and the plugin
    # it passes to pytest by module name would then not be found.
    script = c.python.parent / "detect-test-pollution"
    done = subprocess.run(
        [str(c.python), str(script), "--failing-test", c.victim, "--testids-file", str(ids)],
        cwd=root,
        capture_output=True,
        text=True,
    )
    return c.count(), done.stdout + done.stderr
