"""Evidence documents for page tests: the demo's shape (four long gate rows), hostile names, any length of history."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from promote.core.findings import Finding
from promote.evidence import pages as evidence
from promote.evidence.deltas import Deltas
from promote.evidence.gates import Gate
from promote.release.check import CheckResult
from promote.release.mirrors import MirrorStatus

SHA = "0123456789abcdef0123456789abcdef01234567"
# Would run in a page that let it: each one adds an element with id "pwned" (the browser test looks for it).
PWN_SCRIPT = "<script>document.body.insertAdjacentHTML('beforeend','<b id=pwned>x</b>')</script>"
PWN_IMG = "<img src=x onerror=\"document.body.insertAdjacentHTML('beforeend','<b id=pwned>y</b>')\">"
EVIL_TEST = f"tests/test_x.py::test_a[{PWN_SCRIPT}]"
EVIL_MESSAGE = f"**bold** [click](javascript:alert(1)) {PWN_IMG} | cell | `code` # heading _under_ ~~gone~~"


def history(
    runs: int, *, start: datetime | None = None, every: timedelta = timedelta(hours=12)
) -> list[dict[str, Any]]:
    """`runs` comparable runs, oldest first, a few failing and blocked."""
    start = start or datetime(2026, 6, 1, 2, 0, tzinfo=timezone.utc)
    return [
        {
            "run": f"r{i:03d}",
            "started": (start + every * i).isoformat(timespec="microseconds"),
            "passed": 470 + i % 13,
            "failed": 3 if i % 7 == 0 else 0,
            "blocked": 2,
        }
        for i in range(runs)
    ]


def gates() -> dict[str, Gate]:
    """Rows as long as the demo's."""
    return {
        "tested": Gate(
            "fail",
            (
                "482 tests across 3 packages (sanctum-mlx 36 + sanctum-proxy 249 + sanctum-train 197), plus 6 CI steps",
                "sanctum-mlx ran on training, serially in one process (workers = 1)",
                "sanctum-proxy and sanctum-train ran on local (linux-x86_64), on 4 workers",
                f"sanctum-mlx: 1 failed: `{EVIL_TEST}`",
                "2 red tests found and fixed rather than filtered: `tests/test_a.py::red` and `tests/test_b.py::x`",
                "480 now pass where 474 did",
                "CI: 1 of 482 test ids are run by no CI job; 1 job(s) cannot run in this repository",
            ),
            ("job `test` of .github/workflows/ci.yml on [ubuntu-latest]: runs 481 of 482 test ids", "  `pytest -q`"),
        ),
        "docs": Gate("fail", ("DFlash2: no page", "SANCTUM_PROXY_DRAIN: `docs/proxy.md`")),
        "merged": Gate(
            "pass",
            (
                "main fast-forwarded `9c29a84` to `efbd2ca` on laptop, no force",
                "all 4 mirrors agree: main is `efbd2ca` on origin, mini, station and laptop",
                "each was verified an ancestor of the candidate before it was pushed, so nothing was discarded",
            ),
        ),
        "deployed": Gate(
            "pass",
            (
                "`deployed` (`318fb2d`) has served this tree since 2026-03-07 11:30:00 UTC (commit date)",
                "main (`efbd2ca`) is 3 commits ahead, test-only: binary unchanged",
            ),
            ("files changed: `packages/sanctum-mlx/tests/test_debug.py`",),
        ),
    }


def document(*, runs: int = 2, findings: list[Finding] | None = None) -> dict[str, Any]:
    check = CheckResult(
        verdict="promotable",
        candidate=SHA,
        candidate_ref="main",
        trunk="main",
        mirrors=(MirrorStatus("origin", "/srv/o.git", "up-to-date", SHA, 0, 0),),
        drift=None,
        findings=(),
    )
    if findings is None:
        findings = [
            Finding("order-dependent", "error", EVIL_TEST, EVIL_MESSAGE, cause="tests/test_y.py::test_<b>x</b>")
        ]
    return evidence.document(
        run_id="20261130T230136Z-ab12",
        check=check,
        run=None,
        deltas=Deltas("r0", 474, 480),
        gates=gates(),
        findings=findings,
        last_merge=None,
        history=history(runs),
        provenance={
            "command": "promote audit",
            "started": "2026-11-30T23:01:30.123456+00:00",
            "finished": "2026-11-30T23:01:36.498268+00:00",
        },
    )
