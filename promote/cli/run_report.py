"""Human-readable report of a `promote test` run."""

from __future__ import annotations

from collections import Counter

from promote.cli.render import findings_lines, table
from promote.cli.terminal import joined, mark
from promote.core.vocab import is_red
from promote.runners.plugin.records import TestRecord
from promote.runners.requirements import blocked_summary
from promote.runners.suite import RedStreak, RunResult
from promote.runners.summary import PackageResult


def run_report(r: RunResult) -> str:
    rows = []
    for p in r.packages:
        counts = [p.passed, p.failed, p.errors, p.skipped, p.blocked, p.crashed]
        rows.append([p.name, *map(str, counts), f"{p.duration_s:.1f}s", p.station])
    lines = [f"run {r.run_id}", ""]
    lines += table(["PACKAGE", "PASSED", "FAILED", "ERRORS", "SKIPPED", "BLOCKED", "CRASHED", "TIME", "STATION"], rows)
    for p in r.packages:
        if (ran_with := configuration_line(p)) is not None:
            lines.append(f"  {p.name}: {ran_with}")
        if p.placed and len(p.fleet) > 1:  # a fleet of one: its STATION column says it all
            per = Counter(station for _, station in p.placed)
            ran = ", ".join(f"{st} ({n} test{'' if n == 1 else 's'})" for st, n in sorted(per.items()))
            lines.append(f"  {p.name}: ran on {ran}")
        if p.subtests:
            parts = ", ".join(f"{n} {k}" for k, n in sorted(p.subtests.items()))
            lines.append(f"  {p.name} subtests: {parts}")
        if p.random_draws:
            left = "the key put back after each" if p.random_draws_restored else "the generator left as they drew it"
            lines.append(
                f"  {p.name}: {p.random_draws} test(s) only drew from MLX's random generator, no leak ({left})"
            )
        lines += [f"  {p.name}: {line}" for line in blocked_summary(p)]
    # Blocked subtests are in `blockers` too: they did not fail either.
    blocked = {(p.name, b.test) for p in r.packages for b in p.blockers} | {
        (p.name, test) for p in r.packages for test in p.blocked_tests
    }
    failing = [
        (p.name, t) for p in r.packages for t in p.tests if is_red(t.outcome) and (p.name, t.nodeid) not in blocked
    ]
    if failing:
        streaks = {(s.package, s.test): s for s in r.red_streaks}
        where = {p.name: p for p in r.packages}
        grouped = {(p.name, t) for p in r.packages for g in p.groups for t in g.tests}
        lines += ["", "failed:"] + [f"  {name}: {t.nodeid} ({t.outcome}{_on(where[name], t)}"
                                    f"{_streak(streaks.get((name, t.nodeid)))})"
                                    for name, t in failing if (name, t.nodeid) not in grouped]  # fmt: skip
        # A group's tests once, under their cause: its finding lists every one of them.
        lines += [f"  {p.name}: {len(g.tests)} tests fail with {g.cause} (same cause), {g.tests[0]} and "
                  f"{len(g.tests) - 1} more" for p in r.packages for g in p.groups]  # fmt: skip
    if r.findings:
        lines += ["", "findings:", *findings_lines(r.findings)]
    lines += ["", f"results: {r.out_dir}", mark("all green", "good") if r.green else mark("not green", "bad")]
    return joined(lines)


def _on(p: PackageResult, t: TestRecord) -> str:
    station = p.ran_on(t.nodeid)
    if station is None or len(p.fleet) < 2:
        return ""
    elsewhere = next((v.passes_on for v in p.verdicts if v.test == t.nodeid and v.passes_on), ())
    return f" on {station}" + (f"; passes alone on {', '.join(elsewhere)}" if elsewhere else "")


def _streak(s: RedStreak | None) -> str:
    return "" if s is None else f"; red for {s.runs} runs since {s.since[:10]}"


def configuration_line(p: PackageResult) -> str | None:
    """Which pytest configuration the package ran under, as its workers recorded it (None: not recorded)."""
    c = p.configuration
    if c is None or not c.known:
        return None
    where = f"rootdir {c.rootdir.path}" if c.rootdir is not None else "rootdir outside the repository"
    return f"ran with {c.inifile or 'no pytest configuration file'} ({where})"
