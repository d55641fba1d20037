"""Run a parity or bench command the way the package's tests run: its directory, its env, the switch set."""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal, TypeVar

from promote.accel.ledger_writer import LEDGER_ENV
from promote.config.settings import AccelerationConfig, Config
from promote.core.process import Finished, run_bounded, telling_line


class CommandError(RuntimeError):
    """A command failed or could not start; the message is one line naming it."""


class TimedOut(CommandError):
    """A command stopped at its time limit; what it wrote before is still there to read."""


@dataclass(frozen=True)
class Arm:
    """One way of running a command: its arguments, where, and the environment it adds."""

    name: str
    argv: tuple[str, ...]
    cwd: Path
    env: Mapping[str, str]


def shown(argv: Sequence[str]) -> str:
    return shlex.join(argv)


def place(config: Config, accel: AccelerationConfig) -> tuple[Path, dict[str, str]]:
    """Where the path's commands run (its package's directory, else the config's) and the env they add."""
    pkg = next((p for p in config.packages if p.name == accel.package), None)
    if pkg is None:
        return config.root, {}
    return pkg.path, dict(pkg.env)


def interpreter(config: Config, accel: AccelerationConfig) -> str:
    """The Python that runs the package's tests (its own `python`, else promote's): what `python` means in a command."""
    pkg = next((p for p in config.packages if p.name == accel.package), None)
    return sys.executable if pkg is None else pkg.interpreter


def arm(config: Config, accel: AccelerationConfig, name: str, argv: Sequence[str], value: str | None) -> Arm:
    """An arm with the switch set to `value` (None: leave it as the environment has it)."""
    cwd, env = place(config, accel)
    if value is not None:
        env[accel.switch.env] = value
    if argv and argv[0] in ("python", "python3"):
        # Not whatever `python` is first on PATH: the interpreter that has the package's dependencies.
        argv = (interpreter(config, accel), *argv[1:])
    return Arm(name, tuple(argv), cwd, env)


def run(a: Arm, *, timeout_s: float | None) -> Finished:
    """Run `a` to its end; a failure is one line: the command, how it ended, its last line of stderr."""
    what = f"`{shown(a.argv)}` ({a.name})"
    try:
        # The one bounded runner: a command past its time limit is killed with everything it started.
        done = run_bounded(a.argv, cwd=a.cwd, env={**os.environ, **a.env}, timeout=timeout_s)
    except FileNotFoundError:
        raise CommandError(f"{what}: no such program {a.argv[0]!r}") from None
    except OSError as e:
        raise CommandError(f"{what}: cannot start: {e.strerror}") from None
    if done.status is None:
        raise TimedOut(f"{what}: still running after {timeout_s:g}s, stopped")
    if done.status != 0:
        raise CommandError(f"{what} exited {done.status}: {telling_line(done.stderr) or '(no output on stderr)'}")
    return done


Way = Literal["off", "on"]
WAYS: tuple[Way, ...] = ("off", "on")
T = TypeVar("T")


def run_way(
    config: Config, accel: AccelerationConfig, command: Sequence[str], way: Way, out: Path, ledger: Path,
    *, timeout_s: float | None,
) -> Finished:  # fmt: skip
    """`command` with the switch `way`, `{out}` set to `out` and the path's ledger to `ledger` (fresh per arm).

    A failure names the command as configured (`{out}`), not the temporary path that is gone by the time it is read.
    """
    value = accel.switch.off if way == "off" else accel.switch.on
    argv = [a.replace("{out}", str(out)) for a in command]
    a = arm(config, accel, f"switch {way}: {accel.switch.env}={value}", argv, value)
    try:
        return run(replace(a, env={**a.env, LEDGER_ENV: str(ledger)}), timeout_s=timeout_s)
    except CommandError as e:
        raise type(e)(str(e).replace(shown(argv), shown(command))) from None


def both_ways(step: Callable[[Way], T]) -> dict[Way, T]:
    """`step` off and on, at once when there are two cores: independent runs share the wall time."""
    with ThreadPoolExecutor(max_workers=2 if (os.cpu_count() or 1) >= 2 else 1) as pool:
        futures = {w: pool.submit(step, w) for w in WAYS}
        return {w: f.result() for w, f in futures.items()}
