"""What the hooks learn about each test item and the recorder reads: stash keys, requirements, the failing fixture."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from types import CodeType

import pytest

from promote.core.station import declared
from promote.runners.plugin import outcomes

# How many serial tests the parallel part left for the serial part (set during collection).
SERIAL_LEFT = pytest.StashKey[int]()
# The ids promote itself deselected (a rerun's selection, a part's split): not the package's own selection.
OWN_DESELECTED = pytest.StashKey[set[str]]()
REQUIREMENTS = pytest.StashKey[tuple[str, ...]]()
# Collector node id -> the line of its file that raised, read from the exception (its report has only text).
# Annotated rather than subscripted: the plugin loads on Python 3.9, where `int | None` is no runtime value.
RAISED_AT: pytest.StashKey[dict[str, int | None]] = pytest.StashKey()


def note_raised_at(collector: pytest.Collector, error: BaseException) -> None:
    """Remember which line of a module failed to be collected, for the recorder's record of it."""
    if isinstance(collector, pytest.File):
        lines = collector.config.stash.setdefault(RAISED_AT, {})
        lines[collector.nodeid] = outcomes.raised_at(collector.path, error)


def requirements_of(item: pytest.Item) -> tuple[str, ...]:
    """Everything the item's `requires` markers (its own, its class's, its module's) declare."""
    found: dict[str, None] = {}
    for marker in item.iter_markers("requires"):
        found.update(dict.fromkeys(declared(marker.args, marker.kwargs)))
    return tuple(found)


def failing_fixture(item: pytest.Item, excinfo: pytest.ExceptionInfo[BaseException]) -> str | None:
    """`file::name` of the package code that holds what raised (or skipped) during the item's setup.

    That is the innermost fixture whose code raised, when it is the package's own; for pytest's
    generated fixtures (unittest `setUpClass`, `setUpModule`, xunit `setup_module`/`setup_class`) and
    a plugin's, the first frame of the package's own code they called, e.g. `tests/t.py::T::setUpClass`.
    """
    # `_fixtureinfo` is pytest's own (public in all but name since pytest 3); without it, no attribution.
    defs = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
    names = {getattr(d.func, "__code__", None): name for name, fixturedefs in defs.items() for d in fixturedefs}
    entries = list(excinfo.traceback)
    found = None
    for i, entry in enumerate(entries):
        if entry.frame.code.raw in names:
            found = i
    if found is None:
        return None
    root = item.config.rootpath
    entry = entries[found]
    if _in_package(Path(entry.path), root):
        return f"{Path(entry.path).relative_to(root).as_posix()}::{names[entry.frame.code.raw]}"
    # The fixture's own code is not the package's: name the package's function it ran, whose failure it is.
    ours = next((e for e in entries[found + 1 :] if _in_package(Path(e.path), root)), None)
    if ours is None:
        return None
    return f"{Path(ours.path).relative_to(root).as_posix()}::{_qualname(ours.frame.code.raw, ours.frame.f_locals)}"


def _in_package(path: Path, root: Path) -> bool:
    # A virtualenv inside the package directory holds other projects' code (pytest's own among them).
    return path.is_relative_to(root) and not {"site-packages", "dist-packages"} & set(path.parts)


def _qualname(code: CodeType, f_locals: Mapping[str, object]) -> str:
    """`Class::method` (or `function`) of a frame's code."""
    qualname = getattr(code, "co_qualname", None)  # Python 3.11+
    if qualname is None:
        owner = f_locals.get("cls") or type(f_locals.get("self", None))
        name = getattr(owner, "__qualname__", "NoneType")
        qualname = code.co_name if name == "NoneType" else f"{name}.{code.co_name}"
    return str(qualname).replace(".<locals>.", ".").replace(".", "::")


def chosen_configuration(config: pytest.Config) -> dict[str, str | None]:
    """The rootdir and ini file pytest chose, relative to where it was started (as `cd DIR && pytest` shows)."""
    here = config.invocation_params.dir
    inipath = config.inipath
    return {
        "rootdir": os.path.relpath(config.rootpath, here),
        "inifile": None if inipath is None else os.path.relpath(inipath, here),
    }
