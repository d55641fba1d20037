"""`promote demo`: build the example workspace, audit it end to end, and compare the findings with what was planted."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import tempfile
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from promote.config.workspace import open_workspace
from promote.core.errors import UsageError
from promote.core.findings import Finding
from promote.demo.build import BEHIND, DEPLOYED_AT, HISTORY, Example, build
from promote.evidence.audit import AuditResult, audit
from promote.runners.package import ProgressCallback

Say = Callable[[str], None]


@dataclass(frozen=True)
class Planted:
    """A problem the example plants, the check that must find it, and a word its finding must mention."""

    check: str
    needle: str
    what: str


PLANTED = (
    Planted(
        "leaked-state", "test_debug.py",
        "sanctum-mlx: a debug test switches MLX compile off and never back on; a sampler test further down "
        "the alphabet needs it on (leaks = \"restore\": promote puts it back, names the test, and its pass "
        "without restores shows the sampler test failing as plain pytest would)",
    ),
    Planted(
        "order-dependent", "test_drain.py",
        "sanctum-proxy: a test sets SANCTUM_PROXY_DRAIN and never unsets it; a routing test fails after it "
        "(leaks = \"report\": promote bisects to the polluter)",
    ),
    Planted(
        "impossible-requirement", "qwen3-27b-4bit",
        "sanctum-mlx: a fixture needs a 27B checkpoint that no station has, to test an error path",
    ),
    Planted("ci-filtered", "test_checkpoint.py", "CI leaves the module with that test out (--ignore)"),
    Planted(
        "ci-unreachable-runner", "parity-on-metal",
        "CI's Metal parity job asks for a [self-hosted, macos] runner the repository does not have",
    ),
    Planted("undocumented-feature", "DFlash2", "DFlash2 and its kill switch SANCTUM_MLX_DFLASH2 have no docs page"),
    Planted(
        "kill-switch-broken", "test_a_failing_drafter",
        "sanctum-mlx: a DFlash2 test assumes the path is on; with SANCTUM_MLX_DFLASH2=0 it fails (its tests must "
        "pass either way)",
    ),
    Planted(
        "acceleration-failed-request", "temperature=0.4",
        "sanctum-mlx: while DFlash2 is on, the serving box refuses sampled requests (temperature > 0) with a fast "
        "503: the path fails requests it should decline",
    ),
    Planted(
        "parity-differs", "quality non-inferior",
        "sanctum-mlx: past 24 tokens DFlash2 verifies leniently, so long greedy answers drift from plain "
        "decoding's (from tokens 28, 35 and 40); the team's yardstick, paired item by item, finds it no worse: "
        "a warning, and the path holds",
    ),
    Planted(
        "quality-saturated", "saturated",
        "sanctum-mlx: the yardstick solves 46 of its 48 items either way: a difference near its ceiling cannot "
        "be seen, so the gap is a floor",
    ),
    Planted(
        "served-elsewhere", "temperature=0.4",
        "sanctum-proxy: the ladder reads that 503 as \"seat down\" and the hosted rung answers under the model "
        "name the client asked for (every reply looks like a success)",
    ),
)  # fmt: skip

ALSO = (
    f"mirror {BEHIND} left {len(HISTORY) - DEPLOYED_AT} commits behind main, a fast-forward (see Merged)",
    "branch deployed differs from main in test files only (see And Deployed)",
    "DFlash2's short greedy answers are bitwise identical to plain decoding's, and its own ledger says it served "
    "every parity request and every yardstick item (see Everything E2E Tested)",
)


@dataclass(frozen=True)
class DemoRun:
    """The built workspace, the audit of it, and how long both took."""

    example: Example
    result: AuditResult
    seconds: float
    kept: bool = True  # False: the workspace was temporary and is gone
    temporary: bool = False  # True: made in a new temporary directory (no --keep), left there for its pages


def run_demo(root: Path, *, say: Say, on_progress: ProgressCallback | None = None) -> DemoRun:
    """Build the example under `root` (new or empty) and audit it as `promote audit` would."""
    started = time.monotonic()
    say(f"demo: building the example workspace in {root}")
    example = build(root)
    say("demo: auditing it: mirrors, deployed branch, both test packages (real pytest, MLX on CPU), CI, docs")
    result = audit(open_workspace(example.repo), command="promote demo", on_progress=on_progress)
    return DemoRun(example, result, time.monotonic() - started)


def matches(p: Planted, f: Finding) -> bool:
    return f.check == p.check and p.needle in f"{f.subject} {f.message} {f.cause or ''}"


# What the example's packages import: they run in promote's own interpreter, so the demo extra installs them.
DEMO_NEEDS = ("mlx", "mlx_lm")


def require_demo_extra() -> None:
    """Refuse, naming the extra, when the example's packages could not import what they need here."""
    missing = [name for name in DEMO_NEEDS if importlib.util.find_spec(name) is None]
    if missing:
        names = " and ".join(name.replace("_", "-") for name in missing)
        raise UsageError(f"the demo needs {names} (not installed here): {demo_extra_install()}")


def demo_extra_install() -> str:
    """The command that adds the demo extra to this install, from the clone or URL pip installed promote from.

    promote-release is not on the package index, so its name alone would not install; pip records where a
    distribution came from in its `direct_url.json` (PEP 610).
    """
    try:
        raw = importlib.metadata.distribution("promote-release").read_text("direct_url.json")
        origin = json.loads(raw) if raw else {}
    except (importlib.metadata.PackageNotFoundError, ValueError):
        origin = {}
    url = origin.get("url", "") if isinstance(origin, dict) else ""
    if url.startswith("file://"):
        editable = "-e " if origin.get("dir_info", {}).get("editable") else ""
        return f"pip install {editable}'{urllib.parse.unquote(url.removeprefix('file://'))}[demo]'"
    vcs = origin.get("vcs_info") if isinstance(origin, dict) else None
    if url and isinstance(vcs, dict):
        at = f"@{vcs['requested_revision']}" if vcs.get("requested_revision") else ""
        return f"pip install 'promote-release[demo] @ {vcs.get('vcs', 'git')}+{url}{at}'"
    return "pip install '.[demo]' in your clone of promote (promote-release is not on the package index)"


def demo(keep: Path | None, *, say: Say, on_progress: ProgressCallback | None = None) -> DemoRun:
    """Run the demo in `keep`, or in a new temporary directory that is left in place.

    Either way the workspace outlives the run: the report points into it (its pages, its repositories).
    """
    require_demo_extra()
    if keep is not None:
        return run_demo(keep.resolve(), say=say, on_progress=on_progress)
    # Resolved: on macOS the temporary directory is reached through a symlink (/var -> /private/var).
    tmp = Path(tempfile.mkdtemp(prefix="promote-demo-")).resolve()
    return replace(run_demo(tmp, say=say, on_progress=on_progress), temporary=True)
