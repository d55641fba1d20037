"""Parity: the same command with the switch off and on, each writing to `{out}`; the two outputs compared."""

from __future__ import annotations

import tempfile
from pathlib import Path

from promote.accel.commands import WAYS, CommandError, run_way, shown
from promote.accel.ledger import Engagement, read_tally
from promote.accel.results import ParityResult
from promote.config.settings import AccelerationConfig, Config, ParityConfig


def check_parity(config: Config, accel: AccelerationConfig, parity: ParityConfig) -> ParityResult:
    """Run both ways and compare; a command or output that fails gives verdict `error` with one line."""
    try:
        # numpy comes with MLX (promote's `mlx` extra); without it no array can be read.
        from promote.accel import arrays
    except ImportError as e:
        return _error(f"`{shown(parity.command)}`: cannot compare arrays here: {e}", parity)
    outputs = {}
    with tempfile.TemporaryDirectory(prefix="promote-parity-") as tmp:
        for way in WAYS:
            out = Path(tmp) / way / "out"
            out.parent.mkdir()
            try:
                # A fresh ledger per arm: the path's own count of what it served in this run, and only this run.
                run_way(
                    config, accel, parity.command, way, out, out.parent / "ledger.jsonl", timeout_s=parity.timeout_s
                )
                found = arrays.locate(out)
            except CommandError as e:
                return _error(str(e), parity)
            except arrays.OutputError as e:
                return _error(_way(accel, parity, way, e), parity)
            role = f"the parity output with the switch {way}"
            try:
                outputs[way] = arrays.read_output(found, role)
            except arrays.OutputError as e:
                return _error(_way(accel, parity, way, e), parity, unreadable=role)
        try:
            result = arrays.compare(outputs["off"], outputs["on"], atol=parity.atol, rtol=parity.rtol)
        except arrays.OutputError as e:
            return _error(f"`{shown(parity.command)}`: {e}", parity)
        engaged = Engagement(*(read_tally(Path(tmp) / way / "ledger.jsonl", accel.name) for way in WAYS))
    return ParityResult(**{**result.__dict__, "atol": parity.atol, "rtol": parity.rtol, "engagement": engaged})


def _way(accel: AccelerationConfig, parity: ParityConfig, way: str, e: Exception) -> str:
    value = accel.switch.off if way == "off" else accel.switch.on
    return f"`{shown(parity.command)}` (switch {way}: {accel.switch.env}={value}): {e}"


def _error(line: str, parity: ParityConfig, unreadable: str | None = None) -> ParityResult:
    return ParityResult("error", error=line, atol=parity.atol, rtol=parity.rtol, unreadable=unreadable)
