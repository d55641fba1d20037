"""The promote pytest plugin (loaded through the `pytest11` entry point, or `-p promote.runners.plugin.hooks`).

Inert unless `--promote-out DIR` is given: then each process that runs tests (the only process
without xdist, each worker with it; never the xdist controller) writes `DIR/results-<worker>.json`
at session end and appends to `DIR/progress-<worker>.jsonl` as each test starts and finishes. Over a
fleet (`--promote-fleet`), each worker writes into a scratch directory of its own and sends the same lines
and files in xdist's channel, and the controller writes them into DIR (fleet_worker, fleet_controller).
promote writes each package's JUnit XML from these records after the run (promote/runners/junit.py).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Generator
from fnmatch import fnmatchcase
from pathlib import Path

import pytest

from promote.core.policies import LEAK_POLICIES, REPORT
from promote.core.station import Station, read_station
from promote.runners.plugin.fleet_worker import fleet_input
from promote.runners.plugin.items import OWN_DESELECTED, REQUIREMENTS, SERIAL_LEFT, note_raised_at, requirements_of
from promote.runners.plugin.shown_ids import SHOWN, shown_id, shown_ids

RECORDER = "promote-recorder"
STATION = pytest.StashKey[Station]()
STATION_FILE = pytest.StashKey[Path]()
IGNORED = pytest.StashKey[frozenset[str]]()
# promote starts pytest first and detects the station while pytest starts up; the file is written
# (atomically) well before the first test runs, but a loaded machine may need a moment more.
STATION_WAIT_S = 60.0


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("promote", "promote: record what ran, catch leaked state")
    group.addoption(
        "--promote-out",
        metavar="DIR",
        default=None,
        help="record every test, leaked state and MLX stream misuse into DIR (off without it)",
    )
    group.addoption(
        "--promote-leaks",
        choices=LEAK_POLICIES,
        default=REPORT,
        # promote's own default: a run sees the state each test left, as plain pytest does.
        help="global state a test leaves changed: only report it (default), restore it, or do not probe at all",
    )
    group.addoption(
        "--promote-serial",
        metavar="PATTERN",
        action="append",
        default=[],
        help="run tests whose id matches PATTERN (fnmatch) in one worker, like the `serial` marker",
    )
    group.addoption(
        "--promote-part",
        choices=("all", "serial", "parallel"),
        default="all",
        help="run only the serial tests, only the others, or all (default)",
    )
    group.addoption(
        "--promote-station",
        metavar="FILE",
        default=None,
        help="the station these tests run on (JSON, as `promote stations --json` shows one); a test whose "
        "`requires` marker names something it lacks is skipped, naming what. Read when a test first declares "
        "a requirement (waiting for FILE to appear: promote writes it while pytest starts)",
    )
    group.addoption(
        "--promote-fleet",
        metavar="FILE",
        default=None,
        help="run over the fleet FILE describes (JSON written by promote: each --tx worker's station, the "
        "stations' inventories): each test only where its requirements are met, records in xdist's channel",
    )
    _add_selection_options(group)


def _add_selection_options(group: pytest.OptionGroup) -> None:
    """The options by which promote's runner chooses which collected tests a process runs."""
    group.addoption(
        "--promote-until",
        metavar="TEST_ID",
        default=None,
        help="run the tests in collection order up to and including TEST_ID, and no further",
    )
    group.addoption(
        "--promote-skip",
        metavar="FILE",
        default=None,
        help="leave out the test ids listed in FILE (those an earlier process of the run finished or died in)",
    )
    group.addoption(
        "--promote-worker",
        metavar="NAME",
        default=None,
        help="this process's worker name without xdist (default: main); names its results and progress files",
    )
    group.addoption(
        "--promote-ignore",
        metavar="FILE",
        default=None,
        help="do not collect the modules whose ids (relative to the rootdir) are listed in FILE",
    )
    group.addoption(
        "--promote-only",
        metavar="MODULE",
        default=None,
        help="collect only this module (its id relative to the rootdir) and the conftest files on its way",
    )
    group.addoption(
        "--promote-select",
        metavar="FILE",
        default=None,
        help="run exactly the test ids listed in FILE (one per line), in that order",
    )
    group.addoption(
        "--promote-selections",
        metavar="FILE",
        default=None,
        help="run each selection in FILE (a JSON list of lists of test ids) in a process of its own, forked after "
        "collection (with --promote-out)",
    )


def worker_id(config: pytest.Config) -> str | None:
    """This process's id: "gw0"... in an xdist worker, "main" without xdist, None in the controller."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        return str(workerinput["workerid"])
    # The controller only distributes tests; its workers record them.
    if config.getoption("dist", default="no") != "no":
        return None
    return str(config.getoption("promote_worker", default=None) or "main")


# Last, after pytest-xdist has made its session: a fleet's controller replaces it (fleet_controller).
@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "requires(*resources, device=None, memory_gb=None): what a test needs from the station it runs on",
    )
    config.addinivalue_line("markers", "serial: run this test in a single worker, apart from the parallel ones")
    station = config.getoption("promote_station", default=None)
    if station:
        config.stash[STATION_FILE] = Path(station)
    out = config.getoption("promote_out", default=None)
    if out is not None:
        from promote.runners.plugin.orphans import exit_with_parent

        # The controller and every worker: none may outlive the promote that reads their records.
        exit_with_parent()
    worker = worker_id(config)
    if out is not None and config.getoption("promote_fleet", default=None) and worker is None:
        from promote.runners.plugin import fleet_controller

        fleet_controller.configure(config, Path(out))
    if out is None or worker is None:
        return
    # Imported here so that a run without --promote-out pays nothing for the plugin.
    from promote.runners.plugin.recorder import Recorder

    leaks = str(config.getoption("promote_leaks", default=REPORT))
    given = fleet_input(config)
    outbox: list[str] | None = None
    if given is not None:
        from promote.runners.plugin import fleet_worker

        outbox = []
        config.stash[STATION] = fleet_worker.station(given)
        config.pluginmanager.register(fleet_worker.Relay(config, out_dir(config), worker, outbox))
    recorder = Recorder(config, out_dir(config), worker, leaks, outbox)
    config.pluginmanager.register(recorder, RECORDER)


def option_text(config: pytest.Config, name: str) -> str:
    """The file an option names, read here; in a fleet's worker, as the controller read it (the file is there)."""
    given = fleet_input(config)
    if given is not None and name in given.get("files", {}):
        return str(given["files"][name])
    return Path(config.getoption(name)).read_text(encoding="utf-8")


def out_dir(config: pytest.Config) -> Path:
    """Where this process writes its records: `--promote-out`, or a fleet's worker's own scratch directory."""
    given = fleet_input(config)
    if given is not None:
        return Path(given["scratch"]).resolve()
    return Path(config.getoption("promote_out")).resolve()


def station_of(config: pytest.Config) -> Station | None:
    """The station named by `--promote-station`, read when a test first declares a requirement."""
    station = config.stash.get(STATION, None)
    path = config.stash.get(STATION_FILE, None)
    if station is not None or path is None:
        return station
    deadline = time.monotonic() + STATION_WAIT_S
    while not path.is_file():
        if time.monotonic() > deadline:
            pytest.exit(f"--promote-station {path}: no such file (waited {STATION_WAIT_S:g} s)", returncode=4)
        time.sleep(0.01)
    station = config.stash[STATION] = read_station(path)
    return station


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    # Before any fixture is set up: a test that cannot run here should not load half its model first.
    requirements = item.stash[REQUIREMENTS] = requirements_of(item)
    station = station_of(item.config) if requirements else None
    lacking = station.lacking(requirements) if station is not None else ()
    if station is not None and lacking:
        pytest.skip(f"requires {', '.join(lacking)}: not on station {station.name}")


@pytest.hookimpl(wrapper=True)
def pytest_load_initial_conftests(early_config: pytest.Config) -> Generator[None, None, None]:
    try:
        return (yield)
    except SystemExit as e:
        # pytest ends without a word when a conftest.py it loads first exits: say which, for the log.
        if getattr(early_config.known_args_namespace, "promote_out", None) is not None:
            where = _conftest_line(e, early_config.rootpath)
            sys.stderr.write(f"ERROR: {where} called sys.exit({e.code!r}) while pytest loaded it: no test can run\n")
        raise


def _conftest_line(e: BaseException, root: Path) -> str:
    """`path:line` of the innermost conftest.py frame `e` passed through (relative to `root` when inside it)."""
    where = "a conftest.py"
    tb = e.__traceback__
    while tb is not None:
        path = Path(tb.tb_frame.f_code.co_filename)
        if path.name == "conftest.py":
            where = f"{path.relative_to(root) if path.is_relative_to(root) else path}:{tb.tb_lineno}"
        tb = tb.tb_next
    return where


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(
    collector: pytest.Collector,
) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
    try:
        return (yield)
    except SystemExit as e:
        # pytest lets a module (or conftest.py) that exits at import end the whole session, so no other
        # module would run; under promote it is that module's collection error, and the rest still runs.
        if collector.config.getoption("promote_out", default=None) is None:
            raise
        longrepr = collector.repr_failure(pytest.ExceptionInfo.from_exception(e))
        note_raised_at(collector, e)
        return pytest.CollectReport(collector.nodeid, "failed", longrepr, None)


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    only = config.getoption("promote_only", default=None)
    if only:
        return _outside(collection_path, config.rootpath, str(only))
    ignore = config.getoption("promote_ignore", default=None)
    if not ignore:
        return None
    modules = config.stash.get(IGNORED, None)
    if modules is None:
        modules = config.stash[IGNORED] = frozenset(option_text(config, "promote_ignore").splitlines())
    try:
        nodeid = collection_path.relative_to(config.rootpath).as_posix()
    except ValueError:
        return None
    # True ignores the module; None leaves the decision to pytest and other plugins.
    return True if nodeid in modules else None


def _outside(path: Path, rootdir: Path, module: str) -> bool | None:
    """True for what a run of `module` alone, as `pytest MODULE` would collect it, leaves out: every other module.
    The directories on its way and their `conftest.py` and `__init__.py` are kept (None: pytest decides)."""
    try:
        rel = path.relative_to(rootdir).as_posix()
    except ValueError:
        return None
    if rel == module or module.startswith(rel + "/") or rel == ".":
        return None
    parent, _, name = rel.rpartition("/")
    on_its_way = module.startswith(parent + "/") if parent else True
    return None if on_its_way and name in ("conftest.py", "__init__.py") else True


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    out, worker = session.config.getoption("promote_out", default=None), worker_id(session.config)
    if out is not None and worker is not None:
        from promote.runners.plugin.stops import write_collected

        # After every selection, promote's and the package's: what this process set out to run.
        write_collected(
            out_dir(session.config), worker, [shown_id(session.config, item.nodeid) for item in session.items]
        )


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    out = session.config.getoption("promote_out", default=None)
    # pytest's own stop (--maxfail, -x) in this process; under xdist the controller's, which counts every worker's.
    dsession = session.config.pluginmanager.getplugin("dsession")
    reason = session.shouldfail or session.shouldstop or getattr(dsession, "shouldstop", False)
    if out is not None and reason:
        from promote.runners.plugin.stops import write_stop

        maxfail = int(session.config.getoption("maxfail", default=0) or 0)
        write_stop(out_dir(session.config), worker_id(session.config) or "controller", str(reason), maxfail)


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session: pytest.Session) -> bool | None:
    """With --promote-selections, each selection runs in a child of its own, forked after collection (forked)."""
    recorder = session.config.pluginmanager.get_plugin(RECORDER)
    if session.config.getoption("promote_selections", default=None) is None or recorder is None:
        return None
    from promote.runners.plugin import forked

    forked.run_selections(session, recorder.out_dir, recorder)
    return True


def _deselect(config: pytest.Config, items: list[pytest.Item]) -> None:
    """promote's own selection (a rerun's, a part's), told to pytest and kept apart from the package's own."""
    config.stash.setdefault(OWN_DESELECTED, set()).update(item.nodeid for item in items)
    config.hook.pytest_deselected(items=items)


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> Generator[None, None, None]:
    """promote's own selection, made after every other plugin has ordered and selected the items.

    A plugin of the package's that reorders (its `-p` in addopts, a conftest) has then given the suite's own
    order, which `--promote-until` cuts; and `--promote-select` fixes the order a rerun or bisection asks for,
    which that plugin can no longer change.
    """
    # Before any selection: ids that redact alike are numbered over the whole collection, as every worker sees it.
    config.stash[SHOWN] = shown_ids([item.nodeid for item in items])
    result = yield
    _select(session, config, items)
    return result


def _select(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    given = fleet_input(config)
    if given is not None:
        from promote.runners.plugin.fleet_worker import note_elsewhere, placed_elsewhere

        away = set(map(id, placed_elsewhere(given, items)))
        note_elsewhere(out_dir(config), str(worker_id(config)), [i.nodeid for i in items if id(i) in away])
        if away:
            _deselect(config, [item for item in items if id(item) in away])
            items[:] = [item for item in items if id(item) not in away]
    side = config.getoption("promote_selections", default=None)
    if side:
        from promote.runners.plugin import forked

        chosen = forked.choose(session, items, forked.read_selections(Path(side)))
        kept = set(map(id, chosen))
        _deselect(config, [item for item in items if id(item) not in kept])
        items[:] = chosen
    select = config.getoption("promote_select", default=None)
    if select:
        wanted = [line for line in option_text(config, "promote_select").splitlines() if line]
        by_id = {item.nodeid: item for item in items}
        chosen = [by_id[nodeid] for nodeid in wanted if nodeid in by_id]
        kept = set(map(id, chosen))
        _deselect(config, [item for item in items if id(item) not in kept])
        items[:] = chosen
    skip = config.getoption("promote_skip", default=None)
    if skip:
        done = set(option_text(config, "promote_skip").splitlines())
        _deselect(config, [item for item in items if item.nodeid in done])
        items[:] = [item for item in items if item.nodeid not in done]
    until = config.getoption("promote_until", default=None)
    if until:
        last = next((i for i, item in enumerate(items) if item.nodeid == until), len(items) - 1)
        _deselect(config, items[last + 1 :])
        del items[last + 1 :]
    part = config.getoption("promote_part", default="all")
    if part == "all":
        return
    patterns = config.getoption("promote_serial", default=[])
    keep: list[pytest.Item] = []
    drop: list[pytest.Item] = []
    for item in items:
        serial = item.get_closest_marker("serial") is not None or any(fnmatchcase(item.nodeid, p) for p in patterns)
        (keep if serial == (part == "serial") else drop).append(item)
    if drop:
        _deselect(config, drop)
        items[:] = keep
    if part == "parallel":
        # The runner starts the serial part only when this says there is something for it to run.
        config.stash[SERIAL_LEFT] = len(drop)
