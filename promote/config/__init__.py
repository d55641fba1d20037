"""Find and load `promote.toml` or `[tool.promote]` in `pyproject.toml`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from promote.config.parse import Parser
from promote.config.settings import (
    CONFIG_NAME,
    DEFAULT_TEST_PATHS,
    SYNC_METHODS,
    CIConfig,
    Config,
    DocsConfig,
    HistoryConfig,
    PackageConfig,
    RequirementsConfig,
    RuleConfig,
    StationConfig,
)
from promote.core.capped import read_capped
from promote.core.errors import ConfigError
from promote.core.redact import register

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

__all__ = [
    "CONFIG_NAME",
    "DEFAULT_TEST_PATHS",
    "SYNC_METHODS",
    "CIConfig",
    "Config",
    "DocsConfig",
    "HistoryConfig",
    "PackageConfig",
    "RequirementsConfig",
    "RuleConfig",
    "StationConfig",
    "find_config",
    "load",
    "load_config",
]


def find_config(start: Path) -> Path:
    """The nearest promote.toml, or pyproject.toml with [tool.promote], at or above `start`."""
    for directory in (start, *start.parents):
        candidate = directory / CONFIG_NAME
        if candidate.is_file():
            return candidate
        pyproject = directory / "pyproject.toml"
        if pyproject.is_file() and "promote" in _read_toml(pyproject).get("tool", {}):
            return pyproject
        if (directory / ".git").exists():
            break
    raise ConfigError(
        f"no {CONFIG_NAME} (or [tool.promote] in pyproject.toml) in {start} or above; run `promote init` to write one"
    )


def load(path: Path) -> Config:
    """Read and validate the configuration in `path`."""
    path = path.resolve()
    data = _read_toml(path)
    if path.name == "pyproject.toml":
        prefix = "tool.promote"
        table = data.get("tool", {}).get("promote")
    else:
        prefix = "promote"
        unknown = sorted(set(data) - {"promote"})
        if unknown:
            raise ConfigError(f"{path}: unknown top-level table [{unknown[0]}]; expected [promote]")
        table = data.get("promote")
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: no [{prefix}] table")
    config = Parser(path, prefix).config(table)
    # Whatever a package's env sets may be a credential: its values are redacted from every output.
    register(item for pkg in config.packages for item in pkg.env)
    return config


def load_config(start: Path, config_path: Path | None = None) -> Config:
    """The configuration for `start`, or the one in `config_path`."""
    return load(config_path if config_path is not None else find_config(start.resolve()))


# Far beyond any real configuration (pyproject.toml included): a larger file is refused before it is parsed.
MAX_CONFIG_BYTES = 1 << 20


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        raw = read_capped(path, MAX_CONFIG_BYTES)
    except OSError as e:
        raise ConfigError(f"{path}: cannot read: {e.strerror}") from None
    if raw is None:
        raise ConfigError(
            f"{path}: larger than {MAX_CONFIG_BYTES >> 20} MiB, the most promote reads from a configuration file"
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        raise ConfigError(f"{path}: not UTF-8 text (TOML must be): byte 0x{raw[e.start]:02x} on line {line}") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: not valid TOML: {e}") from None
    except RecursionError:
        # tomllib parses nested arrays and inline tables recursively: a few hundred levels exhaust the stack.
        raise ConfigError(
            f"{path}: arrays or inline tables nested too deeply to read (a few hundred levels at most)"
        ) from None
