"""Where a change to global state was made: the line that called a setter, and the fixture it ran in, if any.

Read from the stack at the moment of the call, by the wrappers that already follow the setters (the seeding
functions, `threading.Thread.start`): a test that calls none of them pays nothing. A fixture is known by its
function's code object, noted as pytest sets the fixture up, so a frame of it is found on the stack whether
the call is made in its setup or in its teardown (a generator fixture's frame keeps its code).
"""

from __future__ import annotations

import contextlib
import inspect
import os
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

import _pytest

from promote.runners.plugin.records import Origin

# Frames searched for a fixture, from the call outward, at most (the search ends at pytest's own first).
MAX_DEPTH = 200
# Where pytest's own code is: fixtures it generates are not the suite's.
_PYTEST = os.path.dirname(_pytest.__file__) + os.sep
# The attribute a started thread carries: where `start()` was called.
STARTED_AT = "_promote_started_at"


@dataclass(frozen=True)
class Site:
    """A call as the stack showed it: file (as the code names it), line, function, and the fixture around it."""

    file: str
    line: int
    function: str
    fixture: tuple[str, str, int] | None = None  # (name, file, line of its `def`)
    # The first line of the calling function's code: what tells one function from another of its name in the file.
    start: int = 0


class Sites:
    """The fixtures seen so far (by code object) and the rootdir, to tell a test's own line from other code's."""

    def __init__(self, rootdir: Path) -> None:
        self.rootdir = rootdir
        self.fixtures: dict[CodeType, tuple[str, str, int]] = {}
        self.seen: set[Callable[..., Any]] = set()

    def fixture(self, name: str, func: Callable[..., Any]) -> None:
        """Note a fixture's function, so that a call made inside it is put down to it."""
        # Once per fixture function: this runs at every fixture setup of every test.
        if func in self.seen:
            return
        self.seen.add(func)
        code = getattr(getattr(inspect.unwrap(func), "__func__", func), "__code__", None)
        # pytest's own (the ones it makes for setup_method, setUpClass, ...) run the suite's code, which is named.
        if isinstance(code, CodeType) and not code.co_filename.startswith(_PYTEST) and code not in self.fixtures:
            self.fixtures[code] = (name, code.co_filename, code.co_firstlineno)

    def at(self, frame: FrameType | None) -> Site | None:
        """The site of the call `frame` is making, and the innermost fixture it runs in."""
        if frame is None:
            return None
        code = frame.f_code
        site = Site(code.co_filename, frame.f_lineno, code.co_name, start=code.co_firstlineno)
        outer: FrameType | None = frame
        for _ in range(MAX_DEPTH):
            # pytest calls a fixture: past its first frame of pytest's own, no fixture of the suite's is around.
            if outer is None or outer.f_code.co_filename.startswith(_PYTEST):
                break
            fixture = self.fixtures.get(outer.f_code)
            if fixture is not None:
                return Site(site.file, site.line, site.function, fixture, site.start)
            outer = outer.f_back
        return site

    def origin(self, site: Site, test_file: str | None) -> Origin | None:
        """The code outside the test that made the change at `site` (None: the test's own module made it)."""
        if site.fixture is not None:
            name, file, line = site.fixture
            path, inside = self.shown(file)
            return Origin(path, line, name, inside, fixture=True)
        if test_file is not None and _same_file(site.file, test_file):
            return None
        path, inside = self.shown(site.file)
        return Origin(path, site.line, site.function, inside, start=site.start)

    def shown(self, file: str) -> tuple[str, bool]:
        """`file` relative to the rootdir (True), else to the import root it was loaded from (False)."""
        return shown(file, self.rootdir)


def shown(file: str, rootdir: Path) -> tuple[str, bool]:
    """`file` relative to `rootdir` (True), else to the import root it was loaded from (False)."""
    path = _absolute(file)
    if path is None:
        return Path(file).name, False
    root = str(rootdir)
    if path.startswith(root + os.sep):
        return Path(path).relative_to(rootdir).as_posix(), True
    # The longest sys.path entry holding it: site-packages/tqdm/_monitor.py -> tqdm/_monitor.py.
    entries = (_absolute(p) for p in sys.path if p)
    roots = [p for p in entries if p is not None and path.startswith(p + os.sep)]
    if roots:
        return Path(path).relative_to(max(roots, key=len)).as_posix(), False
    return Path(path).name, False


# Folders of installed code: a frame there is a library's, never the project's, even inside the rootdir (a venv).
_INSTALLED = frozenset({"site-packages", "dist-packages"})


def failure_site(error: BaseException, rootdir: Path) -> tuple[str, str, bool] | None:
    """What raised and where, for grouping failures by cause: the exception's type, the innermost frame of the
    project's own code (`path:line` relative to `rootdir`), else the innermost frame of any code (as `shown`
    names it), and whether that frame is the project's. None when there is no traceback."""
    tb = error.__traceback__
    inner: tuple[str, int] | None = None
    own: tuple[str, int] | None = None
    while tb is not None:
        file, line = tb.tb_frame.f_code.co_filename, tb.tb_lineno
        inner = (file, line)
        path, inside = shown(file, rootdir)
        # `<string>` and other names of code without a file are nobody's line.
        if inside and os.path.isabs(file) and not _INSTALLED & set(Path(path).parts):
            own = (path, line)
        tb = tb.tb_next
    if inner is None:
        return None
    kind = type(error)
    name = kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"
    where = own or (shown(inner[0], rootdir)[0], inner[1])
    return name, f"{where[0]}:{where[1]}", own is not None


def _same_file(a: str, b: str) -> bool:
    return a == b or (_absolute(a) or a) == (_absolute(b) or b)


def _absolute(path: str) -> str | None:
    """`path` made absolute, or None when it is relative and the process's working directory is gone (a test
    may chdir into a folder and delete it; naming a site must not end the session)."""
    if os.path.isabs(path):
        return os.path.normpath(path)
    try:
        return os.path.abspath(path)
    except OSError:
        return None


class ThreadStarts:
    """Wraps `threading.Thread.start` to note on each thread where it was started; `uninstall()` puts it back."""

    def __init__(self, sites: Sites) -> None:
        self.original: Callable[[threading.Thread], None] | None = threading.Thread.start
        original, at = threading.Thread.start, sites.at

        def start(thread: threading.Thread) -> None:
            # Rare (a few threads a run): the stack is read only here.
            with contextlib.suppress(Exception):
                setattr(thread, STARTED_AT, at(sys._getframe(1)))
            original(thread)

        self.wrapper = start
        threading.Thread.start = start  # type: ignore[method-assign,assignment]

    def uninstall(self) -> None:
        if self.original is not None and threading.Thread.start is self.wrapper:
            threading.Thread.start = self.original  # type: ignore[method-assign,assignment]
        self.original = None


def started_at(thread: threading.Thread) -> Site | None:
    """Where `thread` was started, if it was started while the plugin ran."""
    site = getattr(thread, STARTED_AT, None)
    return site if isinstance(site, Site) else None


def target(thread: threading.Thread) -> str:
    """What a thread runs, the same in every worker (its name is numbered): `module.qualname` of its target or class."""
    func = getattr(thread, "_target", None)
    if func is None and type(thread).run is not threading.Thread.run:
        func = type(thread)
    if func is None:
        return thread.name
    module = getattr(func, "__module__", None) or "?"
    return f"{module}.{getattr(func, '__qualname__', getattr(func, '__name__', '?'))}"
