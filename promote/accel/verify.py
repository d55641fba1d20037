"""Run every configured acceleration (or one): the switch both ways, parity, the A/B, the validated builds."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from promote.accel import bench as bench_mod
from promote.accel import effect, engaged
from promote.accel import switch as switch_mod
from promote.accel.commands import CommandError
from promote.accel.ledger import fresh
from promote.accel.parity import check_parity
from promote.accel.quality import QualityReport, run_quality
from promote.accel.results import AccelResult, BenchResult, ParityResult, StationBuild, SwitchResult, broken
from promote.accel.speed import disagreement, speed_findings
from promote.accel.sweep import SweepResult, run_sweep
from promote.accel.yardstick import differs_text, quality_findings, undecided_line
from promote.config.settings import AccelerationConfig, Config
from promote.core.errors import EXIT_BLOCKED, EXIT_OK, EXIT_UNDECIDED, UsageError
from promote.core.findings import Finding
from promote.core.git import run_git
from promote.core.vocab import AccelStep, AccelVerdict, Severity, is_red
from promote.runners.package import ProgressCallback
from promote.runners.suite import RunResult

Say = Callable[[str], None]


@dataclass(frozen=True)
class Undecided:
    """A step of one path that could not decide: its error line, or None for a bench whose interval straddles."""

    name: str
    step: AccelStep
    error: str | None


@dataclass(frozen=True)
class AccelReport:
    """Every acceleration's result, and the verdict `promote accel` exits with."""

    results: tuple[AccelResult, ...]

    @property
    def findings(self) -> tuple[Finding, ...]:
        return tuple(f for r in self.results for f in r.findings)

    @property
    def undecided(self) -> tuple[Undecided, ...]:
        """Each step that could not decide, for which path, and its one line of why (None: the interval straddles)."""
        out = []
        for r in self.results:
            if r.switch_error:
                out.append(Undecided(r.name, "switch", r.switch_error))
            if r.parity and r.parity.verdict == "error":
                out.append(Undecided(r.name, "parity", r.parity.error))
            if r.bench and r.bench.verdict in ("undecided", "error"):
                out.append(Undecided(r.name, "bench", r.bench.error or disagreement(r.bench)))
            if r.sweep and r.sweep.error:
                out.append(Undecided(r.name, "sweep", r.sweep.error))
            line = None if r.quality is None else undecided_line(r.quality)
            if line is not None:
                out.append(Undecided(r.name, "quality", line))
        return tuple(out)

    @property
    def verdict(self) -> AccelVerdict:
        """broken (a switch or parity fails), undecided (something could not be decided) or holds."""
        if any(f.severity == "error" for f in self.findings):
            return "broken"
        return "undecided" if self.undecided else "holds"

    @property
    def exit_code(self) -> int:
        return {"holds": EXIT_OK, "broken": EXIT_BLOCKED, "undecided": EXIT_UNDECIDED}[self.verdict]

    def to_json(self) -> dict[str, object]:
        return {
            "verdict": self.verdict,
            "undecided": [{"name": u.name, "step": u.step, "error": u.error} for u in self.undecided],
            "accelerations": [r.to_json() for r in self.results],
            "findings": [f.to_json() for f in self.findings],
        }


def select(config: Config, name: str | None) -> tuple[AccelerationConfig, ...]:
    if not config.accelerations:
        raise UsageError(f"{config.path}: no [[{config.prefix}.accelerations]] configured")
    chosen = tuple(a for a in config.accelerations if name is None or a.name == name)
    if not chosen:
        known = ", ".join(a.name for a in config.accelerations)
        raise UsageError(f"{name!r}: no such acceleration in {config.path} (accelerations: {known})")
    return chosen


def run_accelerations(
    config: Config, name: str | None = None, *, bench: bool = True, rounds: int | None = None,
    on_progress: ProgressCallback | None = None, say: Say | None = None,
) -> AccelReport:  # fmt: skip
    """Each selected acceleration in turn; a step that cannot run says so and the others still run."""
    if rounds is not None and rounds < 5:
        raise UsageError(f"--rounds {rounds}: fewer than 5 rounds cannot decide a median (5 give [min, max])")
    return AccelReport(
        tuple(
            run_one(config, a, bench=bench, rounds=rounds, on_progress=on_progress, say=say)
            for a in select(config, name)
        )
    )


def run_one(
    config: Config, accel: AccelerationConfig, *, bench: bool = True, rounds: int | None = None,
    baseline_ref: str | None = None, on_progress: ProgressCallback | None = None, say: Say | None = None,
) -> AccelResult:  # fmt: skip
    switch, switch_error = None, None
    runs: tuple[RunResult, ...] = ()
    if accel.package is not None:
        try:
            switch, runs = switch_mod.kill_switch(config, accel, on_progress)
        except CommandError as e:
            switch_error = str(e)
    parity = check_parity(config, accel, accel.parity) if accel.parity is not None else None
    timed = None
    if bench and accel.bench is not None:
        timed = run_bench(config, accel, rounds=rounds, baseline_ref=baseline_ref, say=say)
    sweep = run_sweep(config, accel, accel.sweep) if accel.sweep is not None else None
    quality = run_quality(config, accel, accel.quality) if accel.quality is not None else None
    here = parity is not None or timed is not None or sweep is not None or quality is not None
    stations = switch_mod.stations(accel, runs, here=here)
    findings = judge(accel, switch, parity, timed, stations, quality)
    findings += counted(accel, switch, parity, timed, sweep, quality)
    return AccelResult(accel.name, accel.switch.env, accel.package, switch, switch_error, parity, timed, stations,
                       findings, accel.switch.off, accel.switch.on, sweep, quality)  # fmt: skip


def counted(
    accel: AccelerationConfig, switch: SwitchResult | None, parity: ParityResult | None, timed: BenchResult | None,
    sweep: SweepResult | None, quality: QualityReport | None = None,
) -> tuple[Finding, ...]:  # fmt: skip
    """What the path's own counter says: vacuous evidence, the sweep's classes, or that it kept no count at all."""
    steps = [s for s in (switch, parity, timed, quality) if s is not None and s.engagement is not None]
    lines = sum(s.engagement.lines for s in steps if s.engagement is not None)
    lines += 0 if sweep is None else sweep.ledger_lines
    ran = bool(steps) or (sweep is not None and sweep.error is None)
    if not ran:
        return ()
    if lines == 0:
        # No count to read: today's results stand, labelled as such; the caller's view of the sweep still counts.
        return (engaged.missing(accel), *(engaged.sweep_findings(accel, sweep) if sweep is not None else ()))
    out = engaged.vacuous(accel, switch, parity, timed)
    out += effect.ineffective(accel, effect.off_arms(accel, switch, parity, timed, sweep, quality))
    out += effect.idle(accel, effect.on_arms(switch, parity, timed, sweep, quality))
    out += effect.idle_cases(accel, timed)
    if sweep is not None:
        out += engaged.sweep_findings(accel, sweep)
    return tuple(out)


def run_bench(
    config: Config, accel: AccelerationConfig, *, rounds: int | None = None, baseline_ref: str | None = None,
    say: Say | None = None, cores: int | None = None,
) -> BenchResult:  # fmt: skip
    """The A/B; `cores` (default: this machine's) is what the arms' load is judged against."""
    assert accel.bench is not None
    spec = accel.bench if rounds is None else replace(accel.bench, rounds=rounds)
    try:
        with worktree(config.root, baseline_ref) as tree, fresh("bench") as tmp:
            base, cand = bench_mod.arms(config, accel, spec, tree)
            timed = bench_mod.interleave(base, cand, spec, say, cores=cores, ledgers=tmp)
            return replace(bench_mod.with_ledgers(timed, tmp, accel.name), baseline_ref=baseline_ref)
    except CommandError as e:
        return bench_mod.failed(spec, e, baseline_ref)


@contextmanager
def worktree(root: Path, ref: str | None) -> Iterator[Path | None]:
    """A detached git worktree of `ref` for the baseline (removed afterwards), or None without a ref."""
    if ref is None:
        yield None
        return
    tmp = Path(tempfile.mkdtemp(prefix="promote-baseline-"))
    tree = tmp / "tree"
    done = run_git(root, "worktree", "add", "--detach", "--quiet", str(tree), ref)
    if not done.ok:
        shutil.rmtree(tmp, ignore_errors=True)
        raise UsageError(f"--baseline-ref {ref}: {done.reason}")
    try:
        yield tree
    finally:
        # The tree is promote's own scratch copy: delete it, then let git forget it (no forced removal).
        shutil.rmtree(tmp, ignore_errors=True)
        run_git(root, "worktree", "prune")


def judge(
    accel: AccelerationConfig, switch: SwitchResult | None, parity: ParityResult | None, timed: BenchResult | None,
    stations: tuple[StationBuild, ...], quality: QualityReport | None = None,
) -> tuple[Finding, ...]:  # fmt: skip
    """The findings: a broken switch or path names the test; parity differs (unless the yardstick holds); the
    yardstick; speed before parity; OS builds."""
    out = []
    env, sw = accel.switch.env, accel.switch
    if switch is not None:
        for test, way in broken(switch):
            if way == "off":
                msg = f"{accel.name}: passes with {env}={sw.on} but fails with the path switched off ({env}={sw.off})"
                out.append(Finding("kill-switch-broken", "error", test, msg, f"{env}={sw.off}"))
            else:
                msg = f"{accel.name}: passes with {env}={sw.off} but fails with the path on ({env}={sw.on})"
                out.append(Finding("acceleration-broken", "error", test, msg, f"{env}={sw.on}"))
    if switch is not None:
        out += red_both_ways(accel, switch)
    if parity is not None and parity.unreadable is not None:
        # The step stays undecided (exit 3); the finding names the file as the team knows it, by its role.
        out.append(Finding("output-unreadable", "warning", parity.unreadable, parity.error or parity.unreadable))
    if parity is not None and parity.verdict == "differs":
        # Output that differs holds only on the team's own yardstick, paired and non-inferior.
        severity: Severity = "warning" if quality is not None and quality.holds else "error"
        out.append(Finding("parity-differs", severity, accel.name, differs_text(accel, parity, quality)))
    if quality is not None:
        out += quality_findings(accel, quality)
    # Output that differs stands on a non-inferior yardstick: the speed claim then has its evidence.
    judged = parity is not None and parity.verdict == "differs" and quality is not None and quality.holds
    if accel.bench is not None and (parity is None or not parity.proven) and not judged:
        why = "no parity command is configured" if parity is None else f"parity is {parity.verdict}"
        msg = f"a speed target is claimed but numeric parity is not proven ({why}): speed before parity"
        out.append(Finding("parity-missing", "warning", accel.name, msg))
    out += speed_findings(accel, timed)
    for s in stations:
        if s.validated is False:
            build = s.os_build or "an unknown OS build"
            listed = ", ".join(accel.validated_on)
            msg = f"{accel.name}: ran on {build}, which is not among the builds it was validated on ({listed})"
            out.append(Finding("os-unvalidated", "warning", s.name, msg))
    return tuple(out)


def red_both_ways(accel: AccelerationConfig, switch: SwitchResult) -> list[Finding]:
    """`acceleration-tests-fail`: a test red with the path off and on; the switch proves nothing while it is."""
    env, sw, out = accel.switch.env, accel.switch, []
    for test, off in switch.off.outcomes.items():
        if is_red(off) and is_red(switch.on.outcomes.get(test, "passed")):
            msg = (
                f"{accel.name}: fails with the path off ({env}={sw.off}) and on ({env}={sw.on}): "
                "the package's tests must pass both ways"
            )
            out.append(Finding("acceleration-tests-fail", "error", test, msg))
    return out


def bench_only(
    config: Config, name: str, *, baseline_ref: str | None = None, rounds: int | None = None, say: Say | None = None
) -> AccelResult:
    """`promote bench NAME`: the A/B alone, maybe against another revision's baseline."""
    [accel] = select(config, name)
    if accel.bench is None:
        raise UsageError(f"{name}: no bench configured for it in {config.path}")
    if rounds is not None and rounds < 5:
        raise UsageError(f"--rounds {rounds}: fewer than 5 rounds cannot decide a median (5 give [min, max])")
    timed = run_bench(config, accel, rounds=rounds, baseline_ref=baseline_ref, say=say)
    stations = switch_mod.stations(accel, (), here=True)
    findings = tuple(f for f in judge(accel, None, None, timed, stations) if f.check != "parity-missing")
    findings += counted(accel, None, None, timed, None)
    return AccelResult(accel.name, accel.switch.env, accel.package, None, None, None, timed, stations, findings,
                       accel.switch.off, accel.switch.on)  # fmt: skip
