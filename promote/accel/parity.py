"""Parity: the same command with the switch off and on, each writing to `{out}`; the two outputs compared."""

from __future__ import annotations

import tempfile
from dataclasses import replace
from pathlib import Path

from promote.accel.commands import CommandError, arm, run, shown
from promote.accel.ledger import LEDGER_ENV, Engagement, read_tally
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
        for way, value in (("off", accel.switch.off), ("on", accel.switch.on)):
            out = Path(tmp) / way / "out"
            out.parent.mkdir()
            argv = [a.replace("{out}", str(out)) for a in parity.command]
            a = arm(config, accel, f"switch {way}: {accel.switch.env}={value}", argv, value)
            # A fresh ledger per arm: the path's own count of what it served in this run, and only this run.
            a = replace(a, env={**a.env, LEDGER_ENV: str(out.parent / "ledger.jsonl")})
            try:
                run(a, timeout_s=parity.timeout_s)
                outputs[way] = arrays.read_output(arrays.locate(out))
            except CommandError as e:
                # The command as configured (`{out}`), not the temporary path that is gone by now.
                return _error(str(e).replace(shown(argv), shown(parity.command)), parity)
            except arrays.OutputError as e:
                return _error(f"`{shown(parity.command)}` ({a.name}): {e}", parity)
        try:
            result = arrays.compare(outputs["off"], outputs["on"], atol=parity.atol, rtol=parity.rtol)
        except arrays.OutputError as e:
            return _error(f"`{shown(parity.command)}`: {e}", parity)
        engaged = Engagement(*(read_tally(Path(tmp) / way / "ledger.jsonl", accel.name) for way in ("off", "on")))
    return ParityResult(**{**result.__dict__, "atol": parity.atol, "rtol": parity.rtol, "engagement": engaged})


def _error(line: str, parity: ParityConfig) -> ParityResult:
    return ParityResult("error", error=line, atol=parity.atol, rtol=parity.rtol)
