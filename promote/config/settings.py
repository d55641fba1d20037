"""The validated configuration, as frozen data (parsing lives in promote.config.parse)."""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from promote.core.policies import REPORT
from promote.core.station import Station
from promote.core.vocab import Better

CONFIG_NAME = "promote.toml"
DEFAULT_TEST_PATHS = ("tests/**", "**/test_*.py", "**/*_test.py", "**/conftest.py")
SYNC_METHODS = ("git", "rsync")
# A package's name is the name of its directory under .promote/runs/<run>/ (and on a station): never a path.
PACKAGE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*")
PACKAGE_NAME_RULE = "a package name: letters, digits, '.', '_' and '-', not starting with '.' or '-'"


@dataclass(frozen=True)
class PackageConfig:
    """A test package that `promote test` runs."""

    name: str
    path: Path
    workers: int = 1
    leaks: str = REPORT  # the first pass sees what plain pytest sees
    station: str | None = None
    # A fleet: one pytest session over these stations' workers ("local" is this machine); () runs on `station`.
    stations: tuple[str, ...] = ()
    python: str | None = None
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    timeout_s: float | None = None
    serial: tuple[str, ...] = ()

    @property
    def interpreter(self) -> str:
        """The Python that runs this package here: its own `python`, else promote's.

        As pytest is started, in the package's directory: a relative path from there, a bare name from PATH.
        """
        if not self.python:
            return sys.executable
        relative = "/" in self.python and not os.path.isabs(self.python)
        return str(self.path / self.python) if relative else self.python


@dataclass(frozen=True)
class StationConfig:
    """A configured machine: what it has (`station`, its `ssh` destination included) and how to reach and use it."""

    station: Station
    port: int | None = None
    identity: str | None = None
    python: str | None = None
    workdir: str | None = None
    ssh_options: tuple[str, ...] = ()
    sync: str = "git"
    workers: int | None = None  # a fleet's workers on this station (None: the package's `workers`)

    @property
    def name(self) -> str:
        return self.station.name

    @property
    def ssh(self) -> str | None:
        """`user@host` when promote runs tests there over ssh; None for a machine it runs on itself."""
        return self.station.ssh


@dataclass(frozen=True)
class RuleConfig:
    """A user rule: `pattern` recognises a failure or skip, `requirement` names what it needed."""

    pattern: str
    requirement: str
    frames: tuple[str, ...] = ()


@dataclass(frozen=True)
class RequirementsConfig:
    """How requirements are inferred: extra rules, and where missing checkpoints live."""

    model_dirs: tuple[Path, ...] = ()
    rules: tuple[RuleConfig, ...] = ()


@dataclass(frozen=True)
class CIConfig:
    runners: tuple[str, ...] | None = None
    hosted_available: bool = True
    repository: str | None = None


@dataclass(frozen=True)
class DocsConfig:
    repo: Path
    pages: tuple[str, ...] = ("docs/**/*.md",)
    features: tuple[str, ...] = ()
    feature_pattern: str | None = None
    # Where `promote audit --publish` writes the page, inside the docs repository.
    page: str = "docs/evidence/{date}-{commit}.md"


@dataclass(frozen=True)
class HistoryConfig:
    """What nightly runs remember: how far back a test's story is read, and when a quiet test or a fall is told."""

    window: int = 30  # runs of a package a test's story is read over
    never_ran_after: int = 14  # runs a test may go without running before it is `never-ran`
    drop_tolerance: float = 0.01  # a larger fall in a package's collected test count is `tests-dropped`
    keep: int = 400  # runs kept; older ones are pruned, all in one transaction


@dataclass(frozen=True)
class SwitchConfig:
    """An accelerated path's kill switch: an environment variable and its two values."""

    env: str
    on: str = "1"
    off: str = "0"


@dataclass(frozen=True)
class ParityConfig:
    """A command that writes its output to `{out}`; run with the switch off and on, the two must agree."""

    command: tuple[str, ...]
    atol: float = 0.0
    rtol: float = 0.0
    timeout_s: float | None = None


@dataclass(frozen=True)
class BenchConfig:
    """The interleaved A/B: one command run with the switch off and on, or a baseline and a candidate command."""

    command: tuple[str, ...] | None = None
    baseline: tuple[str, ...] | None = None
    candidate: tuple[str, ...] | None = None
    rounds: int = 9
    target: float | None = None
    warmup: int = 1
    load_margin: float = 1.0  # how far apart the arms' mean load may be before the run says so
    timeout_s: float | None = None
    # Named workloads, each an A/B of its own with these arguments appended; None: the command as it is.
    cases: tuple[BenchCase, ...] | None = None
    metric: str | None = None  # a key of the JSON the command writes to `{out}`; None: wall time
    better: Better = "higher"


@dataclass(frozen=True)
class BenchCase:
    """One workload of the bench: its name and the arguments appended to the command."""

    name: str
    args: tuple[str, ...]


@dataclass(frozen=True)
class SweepConfig:
    """Requests through the front door, switch off and on; the command writes what the caller saw to `{out}`."""

    command: tuple[str, ...]
    group_by: tuple[str, ...] | None = None  # None: the scalar request parameters both views share
    timeout_s: float | None = None


@dataclass(frozen=True)
class QualityConfig:
    """The team's evaluation, switch off and on; one JSON line per item in `{out}`, judged paired against `margin`."""

    command: tuple[str, ...]
    margin: float = 0.02  # the largest loss accepted, as a fraction of items
    confidence: float = 0.95
    timeout_s: float | None = None


@dataclass(frozen=True)
class AccelerationConfig:
    """An accelerated path and the evidence it must earn: kill switch, parity, speed, validated OS builds."""

    name: str
    switch: SwitchConfig
    package: str | None = None
    parity: ParityConfig | None = None
    bench: BenchConfig | None = None
    validated_on: tuple[str, ...] = ()
    sweep: SweepConfig | None = None
    quality: QualityConfig | None = None


@dataclass(frozen=True)
class Config:
    """Validated configuration; paths are absolute, resolved against the config file."""

    path: Path
    prefix: str
    trunk: str
    mirrors: tuple[str, ...] | None  # None: not configured, every git remote is a mirror
    deployed: str | None = None
    deployed_command: tuple[str, ...] | None = None
    deployed_since_command: tuple[str, ...] | None = None
    deployed_timeout_s: float = 10.0
    test_paths: tuple[str, ...] = DEFAULT_TEST_PATHS
    mirror_timeout_s: float = 30.0
    fetch_concurrency: int = 8
    max_reruns: int = 50
    packages: tuple[PackageConfig, ...] = ()
    stations: tuple[StationConfig, ...] = ()
    ci: CIConfig = field(default_factory=CIConfig)
    docs: DocsConfig | None = None
    requirements: RequirementsConfig = field(default_factory=RequirementsConfig)
    # Mirrors given by URL ([promote.mirrors] as a table): (name, URL) read and pushed without a git remote.
    mirror_urls: tuple[tuple[str, str], ...] = ()
    accelerations: tuple[AccelerationConfig, ...] = ()
    history: HistoryConfig = field(default_factory=HistoryConfig)

    @property
    def root(self) -> Path:
        return self.path.parent
