"""Validate `[[promote.accelerations]]`: each accelerated path's kill switch, parity command, bench and OS builds."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from fnmatch import fnmatchcase
from typing import Any

from promote.config.settings import (
    AccelerationConfig,
    BenchCase,
    BenchConfig,
    ParityConfig,
    QualityConfig,
    SweepConfig,
    SwitchConfig,
)
from promote.config.tables import TableReader
from promote.core.vocab import Better

MIN_ROUNDS = 5  # fewer leave a median interval too wide to decide anything (see promote.core.stats)

# Bench metrics whose direction is known by name (case ignored), the first pattern that matches deciding:
# rates first, since `tokens_per_s` ends in `_s` like a time but counts tokens per second. Any other
# metric must say `better`: a time read as a rate turns a path twice as slow into a 2x speedup.
KNOWN_METRICS: tuple[tuple[str, Better], ...] = (
    ("*_per_s", "higher"), ("*_per_sec", "higher"), ("*_per_second", "higher"), ("*throughput*", "higher"),
    ("tps", "higher"), ("*_tps", "higher"),
    ("ttft*", "lower"), ("*latency*", "lower"), ("*_s", "lower"), ("*_ms", "lower"), ("*_seconds", "lower"),
)  # fmt: skip


def known_direction(metric: str) -> Better | None:
    """Which way a bench metric improves, from its name; None: not a name promote knows."""
    name = metric.lower()
    return next((better for pattern, better in KNOWN_METRICS if fnmatchcase(name, pattern)), None)


def _is_str(v: object) -> bool:
    return isinstance(v, str) and bool(v.strip())


def _is_str_list(v: object) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


def _number(low: float, high: float, *, open_low: bool = False) -> Callable[[object], bool]:
    def check(v: object) -> bool:
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            return False
        return (low < v if open_low else low <= v) and v <= high

    return check


def _int_in(low: int, high: int) -> Callable[[object], bool]:
    return lambda v: isinstance(v, int) and not isinstance(v, bool) and low <= v <= high


def accelerations(p: TableReader, raw: object, packages: set[str]) -> tuple[AccelerationConfig, ...]:
    """Every `[[PREFIX.accelerations]]` table, validated; names are unique, packages exist."""
    key = f"{p.prefix}.accelerations"
    if not isinstance(raw, list):
        raise p.fail(key, "an array of tables ([[promote.accelerations]])", raw)
    seen: set[str] = set()
    out = []
    for i, item in enumerate(raw):
        where = f"{key}[{i}]"
        tbl = p.table(item, where, {"name", "package", "switch", "parity", "bench", "sweep", "quality", "validated_on"})
        name = p.required(tbl, "name", where, "a name for the accelerated path")
        if name in seen:
            raise p.fail(f"{where}.name", "a name no other acceleration has", name)
        seen.add(name)
        package = p.get(tbl, "package", where, _is_str, "a package name", None)
        if package is not None and package not in packages:
            known = ", ".join(sorted(packages)) or "none defined"
            raise p.fail(f"{where}.package", f"a package under [[{p.prefix}.packages]] ({known})", package)
        if "switch" not in tbl:
            raise p.fail(f"{where}.switch", "a table { env, on, off } (this key is required)", show_got=False)
        out.append(
            AccelerationConfig(
                name=name,
                switch=_switch(p, tbl["switch"], f"{where}.switch"),
                package=package,
                parity=_parity(p, tbl["parity"], f"{where}.parity") if "parity" in tbl else None,
                bench=_bench(p, tbl["bench"], f"{where}.bench") if "bench" in tbl else None,
                validated_on=tuple(p.get(tbl, "validated_on", where, _is_str_list, "a list of OS builds", [])),
                sweep=_sweep(p, tbl["sweep"], f"{where}.sweep") if "sweep" in tbl else None,
                quality=_quality(p, tbl["quality"], f"{where}.quality") if "quality" in tbl else None,
            )
        )
    return tuple(out)


def _switch(p: TableReader, raw: object, where: str) -> SwitchConfig:
    tbl = p.table(raw, where, {"env", "on", "off"})
    env = p.required(tbl, "env", where, "an environment variable name")
    if "=" in env or any(c.isspace() for c in env):
        raise p.fail(f"{where}.env", "an environment variable name", env)
    on = p.get(tbl, "on", where, lambda v: isinstance(v, str), "a string", "1")
    off = p.get(tbl, "off", where, lambda v: isinstance(v, str), "a string", "0")
    if on == off:
        raise p.fail(f"{where}.off", "a value other than `on`", off)
    return SwitchConfig(env, on, off)


def _command(p: TableReader, tbl: Mapping[str, Any], key: str, where: str) -> tuple[str, ...] | None:
    return p.command(tbl, key, where)


def _parity(p: TableReader, raw: object, where: str) -> ParityConfig:
    tbl = p.table(raw, where, {"command", "atol", "rtol", "timeout_s"})
    command = _command(p, tbl, "command", where)
    if command is None:
        raise p.fail(f"{where}.command", "a command writing its output to {out} (this key is required)", show_got=False)
    if not any("{out}" in arg for arg in command):
        raise p.fail(f"{where}.command", "a command with {out} where its output goes", list(command))
    tolerance = _number(0.0, 1e308)
    return ParityConfig(
        command=command,
        atol=float(p.get(tbl, "atol", where, tolerance, "a number >= 0", 0.0)),
        rtol=float(p.get(tbl, "rtol", where, tolerance, "a number >= 0", 0.0)),
        timeout_s=p.get(tbl, "timeout_s", where, _number(0.0, 86400.0, open_low=True), "seconds > 0", None),
    )


def _out_command(p: TableReader, tbl: Mapping[str, Any], where: str, expected: str) -> tuple[str, ...]:
    """The step's command, which must write to `{out}`."""
    command = _command(p, tbl, "command", where)
    if command is None or not any("{out}" in arg for arg in command):
        raise p.fail(
            f"{where}.command", expected, None if command is None else list(command), show_got=command is not None
        )
    return command


def _quality(p: TableReader, raw: object, where: str) -> QualityConfig:
    tbl = p.table(raw, where, {"command", "margin", "confidence", "timeout_s"})
    expected = 'the evaluation, writing one JSON line per item to {out}: {"item": STR, "passed": BOOL}'
    return QualityConfig(
        command=_out_command(p, tbl, where, expected),
        margin=float(
            p.get(tbl, "margin", where, _number(0.0, 1.0, open_low=True), "a fraction of items in (0, 1]", 0.02)
        ),
        confidence=float(p.get(tbl, "confidence", where, _number(0.5, 0.9999), "a level from 0.5 to 0.9999", 0.95)),
        timeout_s=p.get(tbl, "timeout_s", where, _number(0.0, 86400.0, open_low=True), "seconds > 0", None),
    )


def _sweep(p: TableReader, raw: object, where: str) -> SweepConfig:
    tbl = p.table(raw, where, {"command", "group_by", "timeout_s"})
    command = _out_command(p, tbl, where, "a command writing what the caller saw to {out}, one JSON line per request")
    group_by = p.get(
        tbl, "group_by", where, lambda v: _is_str_list(v) and bool(v), "a non-empty list of request parameters", None
    )
    return SweepConfig(
        command=command,
        group_by=None if group_by is None else tuple(group_by),
        timeout_s=p.get(tbl, "timeout_s", where, _number(0.0, 86400.0, open_low=True), "seconds > 0", None),
    )


def _bench(p: TableReader, raw: object, where: str) -> BenchConfig:
    tbl = p.table(raw, where, {
        "command", "baseline", "candidate", "rounds", "target", "warmup", "load_margin", "timeout_s", "cases", "metric",
        "better",
    })  # fmt: skip
    command = _command(p, tbl, "command", where)
    baseline = _command(p, tbl, "baseline", where)
    candidate = _command(p, tbl, "candidate", where)
    if command is not None and (baseline is not None or candidate is not None):
        raise p.fail(f"{where}.command", "either command or baseline and candidate, not both", show_got=False)
    if command is None and (baseline is None or candidate is None):
        expected = "command (run with the switch off and on), or both baseline and candidate"
        raise p.fail(f"{where}.command", expected, show_got=False)
    rounds = p.get(tbl, "rounds", where, lambda v: isinstance(v, int) and not isinstance(v, bool), "an integer", 9)
    if not MIN_ROUNDS <= rounds <= 1000:
        expected = f"an integer from {MIN_ROUNDS} to 1000 (fewer than {MIN_ROUNDS} rounds cannot decide a median)"
        raise p.fail(f"{where}.rounds", expected, rounds)
    metric = p.get(tbl, "metric", where, _is_str, "a key of the JSON object the command writes to {out}", None)
    if metric is not None:
        for key, argv in (("command", command), ("baseline", baseline), ("candidate", candidate)):
            if argv is not None and not any("{out}" in a for a in argv):
                expected = f"a command with {{out}} where it writes its {metric!r} (bench.metric is set)"
                raise p.fail(f"{where}.{key}", expected, list(argv))
    return BenchConfig(
        command=command,
        baseline=baseline,
        candidate=candidate,
        rounds=rounds,
        target=p.get(tbl, "target", where, _number(0.0, 1e6, open_low=True), "a speedup > 0", None),
        warmup=p.get(tbl, "warmup", where, _int_in(0, 100), "an integer from 0 to 100", 1),
        load_margin=float(p.get(tbl, "load_margin", where, _number(0.0, 1e6), "a load difference >= 0", 1.0)),
        timeout_s=p.get(tbl, "timeout_s", where, _number(0.0, 86400.0, open_low=True), "seconds > 0", None),
        cases=_cases(p, tbl, where) if "cases" in tbl else None,
        metric=metric,
        better=_better(p, tbl, where, metric),
    )


def _better(p: TableReader, tbl: Mapping[str, Any], where: str, metric: str | None) -> Better:
    """`better` as given; else the known direction of `metric`; required for a metric promote does not know."""
    given: Better | None = p.get(tbl, "better", where, lambda v: v in ("higher", "lower"), '"higher" or "lower"', None)
    if given is not None:
        return given
    if metric is None:
        return "higher"  # wall time: the speedup is baseline over candidate, whatever `better` says
    known = known_direction(metric)
    if known is None:
        expected = (
            f'"higher" or "lower": which way {metric!r} improves is not known by its name '
            "(known: *_per_s and throughput higher; ttft*, latency*, *_s and *_ms lower)"
        )
        raise p.fail(f"{where}.better", expected, show_got=False)
    return known


def _cases(p: TableReader, tbl: Mapping[str, Any], where: str) -> tuple[BenchCase, ...]:
    """`cases = { code = [ARGS...], ... }`: each workload's name and the arguments appended to the command."""
    raw = tbl["cases"]
    if not isinstance(raw, dict) or not raw:
        raise p.fail(f"{where}.cases", "a table of named workloads, each a list of arguments", raw)
    out = []
    for name, args in raw.items():
        if not _is_str_list(args):
            raise p.fail(f"{where}.cases.{name}", "a list of arguments appended to the command", args)
        out.append(BenchCase(name, tuple(args)))
    return tuple(out)
