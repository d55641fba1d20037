"""Run a parity or bench command the way the package's tests run: its directory, its env, the switch set."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from promote.config.model import AccelerationConfig, Config


class CommandError(RuntimeError):
    """A command failed or could not start; the message is one line naming it."""


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


def run(a: Arm, *, timeout_s: float | None) -> subprocess.CompletedProcess[bytes]:
    """Run `a` to its end; a failure is one line: the command, how it ended, its last line of stderr."""
    what = f"`{shown(a.argv)}` ({a.name})"
    try:
        done = subprocess.run(
            list(a.argv), cwd=a.cwd, env={**os.environ, **a.env}, capture_output=True, timeout=timeout_s, check=False
        )
    except FileNotFoundError:
        raise CommandError(f"{what}: no such program {a.argv[0]!r}") from None
    except subprocess.TimeoutExpired:
        raise CommandError(f"{what}: still running after {timeout_s:g}s, stopped") from None
    except OSError as e:
        raise CommandError(f"{what}: cannot start: {e.strerror}") from None
    if done.returncode != 0:
        lines = done.stderr.decode(errors="replace").strip().splitlines() or ["(no output on stderr)"]
        raise CommandError(f"{what} exited {done.returncode}: {lines[-1].strip()}")
    return done
