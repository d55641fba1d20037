"""What `promote demo` prints: the workspace, the audit's report, and each planted problem, found or missed."""

from __future__ import annotations

from promote.cli.audit_report import audit_report
from promote.cli.terminal import plain
from promote.demo.build import DOCS, MIRRORS, REPO
from promote.demo.planted import ALSO, PLANTED, DemoRun, matches


def demo_report(run: DemoRun) -> str:
    """The workspace's layout, the audit's own report, then each planted problem: found or missed."""
    ex = run.example
    lines = [
        f"example workspace: {ex.root}",
        f"  {REPO}/           the repository: packages/sanctum-mlx, packages/sanctum-proxy, promote.toml",
        f"  {DOCS}/      its docs repository",
        f"  mirrors/           {', '.join(MIRRORS)} (bare)",
        "",
        plain(audit_report(run.result)),  # printed as it is made, never coloured
        "",
        "planted in the example:",
    ]
    for p in PLANTED:
        mark = "found " if any(matches(p, f) for f in run.result.findings) else "MISSED"
        lines.append(f"  {mark} {p.check}: {p.what}")
    lines += [f"  also   {line}" for line in ALSO]
    lines += ["", f"demo finished in {run.seconds:.0f}s"]
    if not run.kept:
        lines.append("the workspace was temporary and is removed; `promote demo --keep DIR` keeps it and its pages")
    elif run.temporary:
        lines.append(
            f"the workspace and its pages stay in {ex.root} (a temporary directory: remove it when done); "
            "`promote demo --keep DIR` puts them where you choose"
        )
    return "\n".join(lines)
