"""Validate the TOML tables of the configuration; every error names the file, the dotted key and what was expected."""

from __future__ import annotations

import re
import string
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from promote.config.accel_parse import accelerations
from promote.config.pagepath import path_problem
from promote.config.remote_names import REMOTE_NAME_RULE, remote_name_ok
from promote.config.settings import DEFAULT_TEST_PATHS as DEFAULT_TEST_PATHS
from promote.config.settings import (
    PACKAGE_NAME,
    PACKAGE_NAME_RULE,
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
from promote.config.tables import TableReader
from promote.core.policies import CONFIGURABLE_LEAK_POLICIES, REPORT
from promote.core.station import FLEET_LOCAL, Station


def _is_str(v: object) -> bool:
    return isinstance(v, str)


def _is_str_list(v: object) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


def _is_str_table(v: object) -> bool:
    return isinstance(v, dict) and all(isinstance(x, str) for x in v.values())


def _is_bool(v: object) -> bool:
    return isinstance(v, bool)


def _is_repo_name(v: object) -> bool:
    return isinstance(v, str) and v.count("/") == 1 and all(part.strip() for part in v.split("/"))


def _int_in(low: int, high: int) -> Callable[[object], bool]:
    """An integer in [low, high]: a huge one would reach a thread pool, a range or sqlite as an OverflowError."""
    return lambda v: isinstance(v, int) and not isinstance(v, bool) and low <= v <= high


def _number_in(high: float) -> Callable[[object], bool]:
    """A finite number in (0, high]: inf and nan reach time arithmetic and timeouts as tracebacks."""
    return lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v <= high


# Upper bounds: generous for any real use, small enough that nothing downstream overflows.
MAX_SECONDS = 86400.0
SECONDS = f"a number of seconds > 0 and <= {MAX_SECONDS:.0f}"
_is_seconds = _number_in(MAX_SECONDS)
_is_workers = _int_in(1, 256)
_is_fetch_concurrency = _int_in(1, 64)
_is_max_reruns = _int_in(0, 10000)
_is_memory_gb = _number_in(1 << 20)
_is_runs = _int_in(2, 10000)


def _is_fraction(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= 1


# The fields `publish.page_path` fills in; anything else in a page template is refused.
PAGE_FIELDS = ("date", "commit", "run")


def _is_destination(v: object) -> bool:
    # A leading "-" would reach ssh as an option.
    return isinstance(v, str) and bool(v) and not v.startswith("-") and not any(c.isspace() for c in v)


_is_port = _int_in(1, 65535)


def _local_path(base: Path, url: str) -> str:
    """A relative path is relative to the config file; URLs (scheme://, host:path) stay as written."""
    # git's own rule: a colon before the first slash makes `host:path` an scp-like URL.
    scp_like = ":" in url.split("/", 1)[0]
    if "://" in url or scp_like or Path(url).is_absolute() or url.startswith("~"):
        return url
    return str((base / url).resolve())


class Parser(TableReader):
    """The main tables of the configuration (the accelerations are `accel_parse`'s)."""

    def config(self, raw: dict[str, Any]) -> Config:
        p = self.prefix
        tbl = self.table(
            raw,
            p,
            {"trunk", "mirrors", "deployed", "deployed_command", "deployed_since_command", "deployed_timeout_s",
             "test_paths", "mirror_timeout_s", "fetch_concurrency",
             "max_reruns", "packages", "stations", "ci", "docs", "requirements", "accelerations", "history"},
        )  # fmt: skip
        trunk = self.required(tbl, "trunk", p, "a branch name")
        # Absent: every remote is a mirror (None); an explicit [] means none, and merging is undecided.
        mirrors, mirror_urls = self.mirrors(tbl, p)
        if "deployed" in tbl and "deployed_command" in tbl:
            both = f"either {p}.deployed or {p}.deployed_command, not both"
            raise self.fail(f"{p}.deployed_command", both, show_got=False)
        stations = self.stations(tbl.get("stations", {}))
        packages = self.packages(
            tbl.get("packages", []), {s.name for s in stations}, {s.name for s in stations if s.ssh}
        )
        return Config(
            path=self.path,
            prefix=p,
            trunk=trunk,
            mirrors=mirrors,
            mirror_urls=mirror_urls,
            deployed=self.get(tbl, "deployed", p, _is_str, "a branch, tag or commit", None),
            deployed_command=self.command(tbl, "deployed_command", p),
            deployed_since_command=self.command(tbl, "deployed_since_command", p),
            deployed_timeout_s=float(self.get(tbl, "deployed_timeout_s", p, _is_seconds, SECONDS, 10.0)),
            test_paths=tuple(
                self.get(
                    tbl,
                    "test_paths",
                    p,
                    _is_str_list,
                    "a list of glob patterns",
                    DEFAULT_TEST_PATHS,
                )
            ),
            mirror_timeout_s=float(self.get(tbl, "mirror_timeout_s", p, _is_seconds, SECONDS, 30.0)),
            fetch_concurrency=self.get(
                tbl, "fetch_concurrency", p, _is_fetch_concurrency, "an integer from 1 to 64", 8
            ),
            max_reruns=self.get(tbl, "max_reruns", p, _is_max_reruns, "an integer from 0 to 10000", 50),
            packages=packages,
            stations=stations,
            ci=self.ci(tbl["ci"]) if "ci" in tbl else CIConfig(),
            docs=self.docs(tbl["docs"]) if "docs" in tbl else None,
            requirements=self.requirements(tbl["requirements"]) if "requirements" in tbl else RequirementsConfig(),
            accelerations=accelerations(self, tbl.get("accelerations", []), {pkg.name for pkg in packages}),
            history=self.history(tbl["history"]) if "history" in tbl else HistoryConfig(),
        )

    def mirrors(self, tbl: Mapping[str, Any], p: str) -> tuple[tuple[str, ...] | None, tuple[tuple[str, str], ...]]:
        """(mirror names, (name, URL) of those given by URL): a list of git remote names, or a table name = URL."""
        expected = "a list of git remote names, or a table of name = URL"
        value = self.get(tbl, "mirrors", p, lambda v: _is_str_list(v) or _is_str_table(v), expected, None)
        if value is None:
            return None, ()
        if isinstance(value, list):
            if len(set(value)) != len(value):
                raise self.fail(f"{p}.mirrors", "each remote at most once", value)
            for name in value:
                if not remote_name_ok(name):
                    raise self.fail(f"{p}.mirrors", REMOTE_NAME_RULE, name)
            return tuple(value), ()
        urls = []
        for name, url in value.items():
            if not remote_name_ok(name):
                raise self.fail(f"{p}.mirrors.{name}", REMOTE_NAME_RULE, name)
            if not url.strip() or url.startswith("-"):
                raise self.fail(f"{p}.mirrors.{name}", "a git URL or path (not empty, no leading -)", url)
            urls.append((name, _local_path(self.path.parent, url)))
        return tuple(value), tuple(urls)

    def packages(self, raw: object, station_names: set[str], reachable: set[str]) -> tuple[PackageConfig, ...]:
        key = f"{self.prefix}.packages"
        if not isinstance(raw, list):
            raise self.fail(key, "an array of tables ([[promote.packages]])", raw)
        seen: set[str] = set()
        out = []
        for i, item in enumerate(raw):
            where = f"{key}[{i}]"
            tbl = self.table(
                item,
                where,
                {
                    "name",
                    "path",
                    "workers",
                    "leaks",
                    "station",
                    "stations",
                    "python",
                    "args",
                    "env",
                    "timeout_s",
                    "serial",
                },
            )
            name = self.required(tbl, "name", where, PACKAGE_NAME_RULE)
            if not PACKAGE_NAME.fullmatch(name):
                raise self.fail(f"{where}.name", PACKAGE_NAME_RULE, name)
            if name in seen:
                raise self.fail(f"{where}.name", "a name no other package has", name)
            seen.add(name)
            policies = " or ".join(f'"{p}"' for p in CONFIGURABLE_LEAK_POLICIES)
            leaks = self.get(tbl, "leaks", where, _is_str, policies, REPORT)
            if leaks not in CONFIGURABLE_LEAK_POLICIES:
                raise self.fail(f"{where}.leaks", policies, leaks)
            station = self.get(tbl, "station", where, _is_str, "a station name", None)
            if station is not None and station not in station_names:
                known = ", ".join(sorted(station_names)) or "none defined"
                raise self.fail(
                    f"{where}.station",
                    f"a station under [{self.prefix}.stations] ({known})",
                    station,
                )
            fleet = self.fleet(tbl, where, station, station_names)
            if station in reachable:
                # One way to run elsewhere: a station reached over ssh is the fleet of one.
                fleet = (station,)
            out.append(
                PackageConfig(
                    name=name,
                    path=(self.path.parent / self.required(tbl, "path", where, "a directory")).resolve(),
                    workers=self.get(tbl, "workers", where, _is_workers, "an integer from 1 to 256", 1),
                    leaks=leaks,
                    station=station,
                    stations=fleet,
                    python=self.get(tbl, "python", where, _is_str, "a path to a python interpreter", None),
                    args=tuple(self.get(tbl, "args", where, _is_str_list, "a list of pytest arguments", [])),
                    env=tuple(
                        sorted(self.get(tbl, "env", where, _is_str_table, "a table of string values", {}).items())
                    ),
                    timeout_s=self.get(tbl, "timeout_s", where, _is_seconds, SECONDS, None),
                    serial=tuple(self.get(tbl, "serial", where, _is_str_list, "a list of test id patterns", [])),
                )
            )
        return tuple(out)

    def fleet(self, tbl: Mapping[str, Any], where: str, station: str | None, names: set[str]) -> tuple[str, ...]:
        """A package's `stations`: configured stations (or "local", this machine), each once; not with `station`."""
        known = ", ".join(sorted(names | {FLEET_LOCAL}))
        rule = f"a list of station names ({known}), each once"
        fleet = self.get(tbl, "stations", where, _is_str_list, rule, [])
        if "stations" in tbl and (not fleet or len(set(fleet)) != len(fleet)):
            raise self.fail(f"{where}.stations", rule, fleet)
        for name in fleet:
            if name != FLEET_LOCAL and name not in names:
                raise self.fail(f"{where}.stations", rule, name)
        if fleet and station is not None:
            raise self.fail(
                f"{where}.station", "no `station` beside `stations` (a fleet of one is stations = [NAME])", station
            )
        return tuple(fleet)

    def station(self, name: str, tbl: Mapping[str, Any], where: str) -> Station:
        """What a configured station has, and its ssh destination."""
        return Station(
            name,
            platform=self.get(tbl, "platform", where, _is_str, "a platform like darwin-arm64", None),
            devices=tuple(self.get(tbl, "devices", where, _is_str_list, "a list of device names", [])),
            memory_gb=self.get(tbl, "memory_gb", where, _is_memory_gb, "a number of GB > 0 and <= 1048576", None),
            resources=tuple(self.get(tbl, "resources", where, _is_str_list, "a list of resource names", [])),
            ssh=self.get(tbl, "ssh", where, _is_destination, "user@host (no spaces, no leading -)", None),
        )

    def stations(self, raw: object) -> tuple[StationConfig, ...]:
        key = f"{self.prefix}.stations"
        if not isinstance(raw, dict):
            raise self.fail(key, "a table of stations ([promote.stations.NAME])", raw)
        out = []
        for name, item in raw.items():
            where = f"{key}.{name}"
            tbl = self.table(
                item,
                where,
                {
                    "platform",
                    "devices",
                    "memory_gb",
                    "resources",
                    "ssh",
                    "port",
                    "identity",
                    "python",
                    "workdir",
                    "ssh_options",
                    "sync",
                    "workers",
                },
            )
            sync = self.get(tbl, "sync", where, _is_str, '"git" or "rsync"', "git")
            if sync not in SYNC_METHODS:
                raise self.fail(f"{where}.sync", '"git" or "rsync"', sync)
            identity = self.get(tbl, "identity", where, _is_str, "a path to a private key", None)
            if identity is not None:
                try:
                    # A relative key path is relative to the config file, like every other local path.
                    identity = str(self.path.parent / Path(identity).expanduser())
                except RuntimeError:  # `~name` of a user this system does not know
                    raise self.fail(f"{where}.identity", "a path to a private key (no such user)", identity) from None
            out.append(
                StationConfig(
                    self.station(name, tbl, where),
                    port=self.get(tbl, "port", where, _is_port, "a TCP port (1-65535)", None),
                    identity=identity,
                    python=self.get(tbl, "python", where, _is_str, "a path to python on the station", None),
                    workdir=self.get(tbl, "workdir", where, _is_str, "a directory on the station", None),
                    ssh_options=tuple(self.get(tbl, "ssh_options", where, _is_str_list, "a list of ssh arguments", [])),
                    sync=sync,
                    workers=self.get(tbl, "workers", where, _is_workers, "an integer from 1 to 256", None),
                )
            )
        return tuple(out)

    def ci(self, raw: object) -> CIConfig:
        where = f"{self.prefix}.ci"
        tbl = self.table(raw, where, {"runners", "hosted_available", "repository"})
        runners = self.get(tbl, "runners", where, _is_str_list, "a list of runner labels", None)
        return CIConfig(
            runners=None if runners is None else tuple(runners),
            hosted_available=self.get(tbl, "hosted_available", where, _is_bool, "true or false", True),
            repository=self.get(tbl, "repository", where, _is_repo_name, '"owner/name"', None),
        )

    def docs(self, raw: object) -> DocsConfig:
        where = f"{self.prefix}.docs"
        tbl = self.table(raw, where, {"repo", "pages", "features", "feature_pattern", "page"})
        return DocsConfig(
            repo=(self.path.parent / self.required(tbl, "repo", where, "a path to the docs repository")).resolve(),
            pages=tuple(self.get(tbl, "pages", where, _is_str_list, "a list of glob patterns", ["docs/**/*.md"])),
            features=tuple(self.get(tbl, "features", where, _is_str_list, "a list of feature names", [])),
            feature_pattern=self.get(tbl, "feature_pattern", where, _is_str, "a regular expression", None),
            page=self.page(tbl, where),
        )

    def page(self, tbl: Mapping[str, Any], where: str) -> str:
        """The page template: literal text and the bare fields {date}, {commit}, {run}, nothing else."""
        expected = "a relative path pattern using only {date}, {commit}, {run}"
        value: str = self.get(tbl, "page", where, _is_str, expected, "docs/evidence/{date}-{commit}.md")
        try:
            parts = list(string.Formatter().parse(value))
        except ValueError as e:
            raise self.fail(f"{where}.page", f"{expected} ({e})", value) from None
        for _, name, spec, conversion in parts:
            # `{commit.__class__}`, `{commit[0]}`, `{commit!r}`, `{commit:>10}`: attribute access, indexing,
            # conversions and format specs reach str.format and its objects; only the bare names are taken.
            if name is not None and (name not in PAGE_FIELDS or spec or conversion):
                field = "{" + name + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "") + "}"
                raise self.fail(f"{where}.page", f"{expected} (not {field})", value)
        problem = path_problem("".join(text if name is None else f"{text}x" for text, name, *_ in parts))
        if problem is not None:
            raise self.fail(f"{where}.page", f"{expected} ({problem})", value)
        return value

    def history(self, raw: object) -> HistoryConfig:
        where = f"{self.prefix}.history"
        tbl = self.table(raw, where, {"window", "never_ran_after", "drop_tolerance", "keep"})
        return HistoryConfig(
            window=self.get(tbl, "window", where, _is_runs, "an integer from 2 to 10000", 30),
            never_ran_after=self.get(tbl, "never_ran_after", where, _is_runs, "an integer from 2 to 10000", 14),
            drop_tolerance=float(self.get(tbl, "drop_tolerance", where, _is_fraction, "a fraction from 0 to 1", 0.01)),
            keep=self.get(tbl, "keep", where, _is_runs, "an integer from 2 to 10000", 400),
        )

    def requirements(self, raw: object) -> RequirementsConfig:
        where = f"{self.prefix}.requirements"
        tbl = self.table(raw, where, {"model_dirs", "rules"})
        dirs = self.get(tbl, "model_dirs", where, _is_str_list, "a list of directories", [])
        rules = tbl.get("rules", [])
        if not isinstance(rules, list):
            raise self.fail(f"{where}.rules", "an array of tables ([[promote.requirements.rules]])", rules)
        return RequirementsConfig(
            model_dirs=tuple((self.path.parent / d).resolve() for d in dirs),
            rules=tuple(self.rule(item, f"{where}.rules[{i}]") for i, item in enumerate(rules)),
        )

    def rule(self, raw: object, where: str) -> RuleConfig:
        tbl = self.table(raw, where, {"pattern", "requirement", "frames"})
        pattern = self.required(tbl, "pattern", where, "a regular expression")
        frames = self.get(tbl, "frames", where, _is_str_list, "a list of regular expressions", [])
        requirement = self.required(tbl, "requirement", where, 'a requirement like "hub:{repo}"')
        groups: set[str] = set()
        for key, text in [("pattern", pattern), *(("frames", f) for f in frames)]:
            try:
                groups |= set(re.compile(text).groupindex)
            except re.error as e:
                raise self.fail(f"{where}.{key}", f"a regular expression ({e})", text) from None
        try:
            fields = {name for _, name, _, _ in string.Formatter().parse(requirement) if name is not None}
        except ValueError as e:
            raise self.fail(f"{where}.requirement", f"a template ({e})", requirement) from None
        if fields - groups:
            unnamed = ", ".join(sorted(fields - groups))
            expected = f"fields that pattern or frames name as groups (no group {unnamed})"
            raise self.fail(f"{where}.requirement", expected, requirement)
        return RuleConfig(pattern, requirement, tuple(frames))
