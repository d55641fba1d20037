"""Probes for ordinary process state, after what CPython's regrtest `save_env` watches."""

from __future__ import annotations

import locale
import logging
import os
import re
import sys
import threading
import warnings
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from promote.core.redact import MASK, PACKAGE_ENV_NAMES, secret_name
from promote.runners.plugin.probes import MISSING, Change, Probe, mapping_changes
from promote.runners.plugin.sites import started_at, target

# The kind of change a daemon thread left running is: one that code outside the test started is no test's leak.
DAEMON_THREAD = "daemon thread"
# pytest sets and clears this around every phase; it is not the test's doing.
_IGNORED_ENV = frozenset({"PYTEST_CURRENT_TEST"})


def _text(value: str | bytes) -> str:
    return os.fsdecode(value) if isinstance(value, bytes) else value


def _environ_snapshot() -> Mapping[Any, Any]:
    # os.environ keeps its encoded data in `_data`; copying that dict costs well under a
    # microsecond, where `dict(os.environ)` decodes every key and value on every test.
    data = getattr(os.environ, "_data", None)
    return data.copy() if isinstance(data, dict) else dict(os.environ)


def _environ_diff(before: Mapping[Any, Any], after: Mapping[Any, Any]) -> list[Change]:
    if before == after:
        return []
    b = {_text(k): _text(v) for k, v in before.items()}
    a = {_text(k): _text(v) for k, v in after.items()}
    for k in _IGNORED_ENV:
        b.pop(k, None)
        a.pop(k, None)
    # A secret's value never reaches a finding: not of a secret-looking name, nor of one the package's env sets.
    secret = set(os.environ.get(PACKAGE_ENV_NAMES, "").split(","))
    return [
        Change(c.key, _masked(c.before), _masked(c.after))
        if secret_name(name := c.key[len("os.environ[") : -1]) or name in secret
        else c
        for c in mapping_changes("os.environ", b, a)
    ]


class _Masked:
    def __repr__(self) -> str:
        return MASK


def _masked(value: object) -> object:
    return value if value is MISSING else _Masked()


def _environ_restore(before: Mapping[Any, Any]) -> None:
    b = {_text(k): _text(v) for k, v in before.items()}
    # Through os.environ (not `_data`) so that putenv/unsetenv reach child processes too.
    for k in [k for k in os.environ if k not in b and k not in _IGNORED_ENV]:
        del os.environ[k]
    for k, v in b.items():
        if k not in _IGNORED_ENV and os.environ.get(k) != v:
            os.environ[k] = v


# Directories pytest itself puts on sys.path as it imports test modules and conftest.py files (the rootdir, each
# conftest's directory, each test module's base directory): filled in once collection is done.
PYTEST_PATHS: set[str] = set()


def note_pytest_paths(rootdir: Path, modules: Iterable[Path]) -> None:
    """Remember the directories pytest's own importer may insert for these test modules (up to the rootdir)."""
    PYTEST_PATHS.add(str(rootdir))
    for module in modules:
        for parent in module.parents:
            if parent == rootdir or not parent.is_relative_to(rootdir):
                break
            PYTEST_PATHS.add(str(parent))
        # prepend import mode inserts the first directory above the module's package, wherever that is.
        base = module.parent
        while (base / "__init__.py").is_file() and base.parent != base:
            base = base.parent
        PYTEST_PATHS.add(str(base))


def _pytests_own(before: Sequence[str], after: Sequence[str]) -> tuple[list[str], list[str]]:
    """`after` split into what pytest added for its own imports (entries of PYTEST_PATHS beyond as many as `before`
    held: pytest prepends a directory again when it is not first) and the rest."""
    extra = {p: after.count(p) - before.count(p) for p in set(after) & PYTEST_PATHS}
    own, rest = [], []
    for p in after:
        if extra.get(p, 0) > 0:
            extra[p] -= 1
            own.append(p)
        else:
            rest.append(p)
    return own, rest


def _sys_path_diff(before: tuple[str, ...], after: tuple[str, ...]) -> list[Change]:
    # An entry pytest added for its own imports (while it set up the test) is pytest's doing, not the test's.
    if _pytests_own(before, after)[1] == list(before):
        return []
    return [Change("sys.path", before, after)]


def _sys_path_restore(before: tuple[str, ...]) -> None:
    # Entries pytest added on its own stay: later tests' imports rely on them, as they do under plain pytest.
    sys.path[:] = _pytests_own(before, sys.path)[0] + list(before)


# The names threading gives a thread not named by its maker ("Thread-3", "Thread-3 (run)"): numbered in start order,
# so not the same in two workers; such a thread is keyed by what it runs instead.
_NUMBERED = re.compile(r"Thread-\d+( \(.*\))?")


def _threads_diff(before: tuple[threading.Thread, ...], after: tuple[threading.Thread, ...]) -> list[Change]:
    # Only threads started and still running count: one that ends is no new leak.
    if before == after:
        return []
    known = set(before)
    return [
        Change(
            f"threads[{target(t) if _NUMBERED.fullmatch(t.name) else t.name}]",
            MISSING,
            "running, daemon" if t.daemon else "running",
            DAEMON_THREAD if t.daemon else "thread",
            tuple(site for site in [started_at(t)] if site is not None),
        )
        for t in after
        if t not in known and t.is_alive()
    ]


def _warnings_restore(before: tuple[Any, ...]) -> None:
    filters: list[Any] = warnings.filters  # type: ignore[assignment]  # a list at runtime
    filters[:] = before
    # The filter cache is keyed by a version that only the warnings module bumps.
    mutated = getattr(warnings, "_filters_mutated", None)
    if callable(mutated):
        mutated()


def _logging_snapshot() -> dict[str, object]:
    root = logging.root
    return {"root.level": root.level, "root.handlers": tuple(root.handlers), "disable": root.manager.disable}


def _logging_restore(before: dict[str, Any]) -> None:
    root = logging.root
    root.setLevel(before["root.level"])
    root.handlers[:] = before["root.handlers"]
    logging.disable(before["disable"])


def _locale_restore(before: str) -> None:
    locale.setlocale(locale.LC_ALL, before)


def process_probes() -> list[Probe]:
    """The stdlib probes: environ, cwd, sys.path, threads, warnings, logging, locale."""
    return [
        Probe("os.environ", _environ_snapshot, _environ_restore, _environ_diff),
        Probe("cwd", os.getcwd, os.chdir),
        Probe("sys.path", lambda: tuple(sys.path), _sys_path_restore, _sys_path_diff),
        Probe("threads", lambda: tuple(threading.enumerate()), None, _threads_diff),
        Probe("warnings.filters", lambda: tuple(warnings.filters), _warnings_restore),
        Probe("logging", _logging_snapshot, _logging_restore),
        Probe("locale", lambda: locale.setlocale(locale.LC_ALL, None), _locale_restore),
    ]
