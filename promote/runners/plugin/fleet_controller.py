"""A fleet's controller: the xdist session over every station's workers, and the records they send back.

Only loaded in the controller of a fleet run (`--promote-fleet`), where pytest-xdist is installed. The
workers come from `--tx` specs promote wrote (`popen` here, `ssh=...//chdir=...` on a station, each with
`promote_station=NAME`); this module hands each worker its station, places tests with
fleet_schedule.Placement, and writes what the workers send (progress lines on their reports, record files
in their output) into the out directory, where promote reads a fleet's records as any local run's.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from xdist.dsession import DSession  # type: ignore[import-untyped]
from xdist.workermanage import NodeManager, WorkerController  # type: ignore[import-untyped]

from promote.core.station import FLEET_LOCAL
from promote.runners.plugin.fleet_schedule import Placement
from promote.runners.plugin.fleet_worker import FILES, FLEET, LINES, RESULT
from promote.runners.plugin.records import progress_path, write_atomic

SHIPPED = ("promote_select", "promote_skip", "promote_ignore")


def station_of(node: Any) -> str:
    return str(getattr(node.gateway.spec, "promote_station", FLEET_LOCAL))


class _Unsynced(NodeManager):  # type: ignore[misc]
    """xdist's node manager without its rsync: promote has put the commit on each station already.

    xdist would otherwise copy this machine's pytest into every station's workdir (its deprecated rsync
    of pytest's own package), where the station's workers would import it instead of their own.
    """

    def _getrsyncdirs(self) -> list[Path]:
        return []


class FleetSession(DSession):  # type: ignore[misc]
    """xdist's session, with workers that no rsync feeds and stations that may drop out."""

    def __init__(self, config: pytest.Config, fleet: Controller) -> None:
        super().__init__(config)
        self.fleet = fleet

    @pytest.hookimpl
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        # xdist's setup_nodes, one spec at a time: a station gone since promote readied it is left out, not fatal.
        manager = self.nodemanager = _Unsynced(self.config)
        self.config.hook.pytest_xdist_setupnodes(config=self.config, specs=manager.specs)
        # The connections at once (each an ssh session and a Python starting there), the workers in order.
        with ThreadPoolExecutor(max_workers=len(manager.specs)) as pool:
            made = list(pool.map(functools.partial(_connect, manager), manager.specs))
        for spec, gateway in zip(manager.specs, made, strict=True):
            station = str(getattr(spec, "promote_station", FLEET_LOCAL))
            if isinstance(gateway, Exception):
                self.fleet.down.setdefault(station, f"{type(gateway).__name__}: {gateway}".strip(": "))
            elif station in self.fleet.down:
                gateway.exit()
            else:
                self._active_nodes.add(self._start(manager, gateway))
        self.fleet.starting = len(self._active_nodes)
        self._session = session
        if not self._active_nodes:
            pytest.exit("no station of the fleet answered: no worker started", returncode=3)

    def _start(self, manager: Any, gateway: Any) -> Any:
        """xdist's NodeManager.setup_node once the gateway is made: its worker set up and sent its input."""
        self.config.hook.pytest_xdist_newgateway(gateway=gateway)
        node = WorkerController(manager, gateway, self.config, self.queue.put)
        gateway.node = node  # keeps the node alive, as xdist does
        node.setup()
        return node

    def _clone_node(self, node: Any) -> Any:
        # A worker that died is replaced on its station; a station that no longer answers is not retried.
        station = station_of(node)
        if station in self.fleet.down:
            return None
        try:
            clone = super()._clone_node(node)
        except Exception as e:  # execnet's HostNotFound, or the connection failing as it starts
            self.fleet.down[station] = f"{type(e).__name__}: {e}".strip(": ")
            return None
        sched = self.sched
        if isinstance(sched, Placement):
            sched.expect()
        return clone


class Controller:
    """Registered in a fleet's controller: hands out stations, relays records, remembers what happened."""

    def __init__(self, config: pytest.Config, out: Path, spec: dict[str, Any]) -> None:
        self.config, self.out = config, out
        self.stations: dict[str, dict[str, Any]] = spec["stations"]
        self.scratch: dict[str, str] = spec["scratch"]
        self.remote: set[str] = set(spec.get("remote", ()))
        self.durations: dict[str, float] = spec.get("durations", {})
        self.rules: list[dict[str, Any]] = spec.get("rules", [])  # the configured ones, for the workers' skips
        self.workers: dict[str, str] = {}
        self.down: dict[str, str] = {}
        self.started: dict[str, str] = {}  # each worker's last test started, as its lines said
        self.placement: Placement | None = None
        self.starting = 0  # the workers that started (a station gone since it was readied has none)
        timeout = spec.get("timeout_s")
        # This machine's workers are watched by promote itself (their pids are here); a station's, from here.
        self.watchdog = Watchdog(float(timeout)) if isinstance(timeout, (int, float)) and self.remote else None

    def pytest_plugin_registered(self, plugin: object, plugin_name: str | None) -> None:
        if plugin_name == "dsession" and not isinstance(plugin, FleetSession):
            manager = self.config.pluginmanager
            manager.unregister(plugin)
            # Its terminal reporter too: ours makes its own, under the same name.
            manager.unregister(name="terminaldistreporter")
            manager.register(FleetSession(self.config, self), "dsession")

    @pytest.hookimpl(tryfirst=True)
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> Placement:
        self.placement = Placement(self.starting, self.durations)
        return self.placement

    def pytest_configure_node(self, node: Any) -> None:
        name = station_of(node)
        wid = str(node.gateway.id)
        self.workers[wid] = name
        others = [s for other, s in self.stations.items() if other != name]
        node.workerinput[FLEET] = {
            "station": self.stations[name],
            "others": others,
            "rules": self.rules,
            "scratch": f"{self.scratch[name]}/{wid}",
            # The files promote's options name are here: a station's worker is handed their text.
            "files": {
                option: Path(path).read_text(encoding="utf-8")
                for option in SHIPPED
                if (path := self.config.getoption(option, default=None))
            },
        }

    def _append(self, wid: str, lines: list[str]) -> None:
        if not lines:
            return
        if self.workers.get(wid) in self.remote:
            # A pid there is no process here: the local watch must never signal it.
            lines = [_without_pid(line) if '"event":"session"' in line else line for line in lines]
        for line in lines:
            if '"event":"start"' in line:
                self.started[wid] = str(json.loads(line).get("nodeid"))
        fd = os.open(progress_path(self.out, wid), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, "".join(lines).encode())
        finally:
            os.close(fd)

    def pytest_runtest_logstart(self, nodeid: str) -> None:
        node = self.placement.sent.get(nodeid) if self.placement is not None else None
        if node is not None and station_of(node) in self.remote and self.watchdog is not None:
            self.watchdog.started(node, nodeid)

    def pytest_runtest_logfinish(self, nodeid: str) -> None:
        if self.watchdog is not None:
            self.watchdog.finished(nodeid)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        node = getattr(report, "node", None)
        lines = getattr(report, LINES, None)
        if node is not None and lines:
            self._append(str(node.gateway.id), list(lines))

    def pytest_handlecrashitem(self, crashitem: str, report: Any, sched: Any) -> None:
        # Died before its setup report: the start line never came, so it is written here.
        wid = str(report.node.gateway.id)
        if self.started.get(wid) != crashitem:
            line = {"worker": wid, "t": round(time.time(), 6), "event": "start", "nodeid": crashitem, "index": -1}
            self._append(wid, [json.dumps(line, separators=(",", ":")) + "\n"])

    def pytest_testnodedown(self, node: Any, error: object | None) -> None:
        wid = str(node.gateway.id)
        output = getattr(node, "workeroutput", None)
        if error is not None or not isinstance(output, dict):
            return
        self._append(wid, list(output.get(LINES, ())))
        for name, text in dict(output.get(FILES, {})).items():
            # A plain file name of the worker's own directory: nothing it sends is written outside this one.
            if name == Path(name).name and not name.startswith(".") and name != progress_path(self.out, wid).name:
                write_atomic(self.out / name, str(text))
        end = {"worker": wid, "t": round(time.time(), 6), "event": "end"}
        self._append(wid, [json.dumps(end, separators=(",", ":")) + "\n"])

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self) -> None:
        unplaced = self.placement.unplaced if self.placement is not None else []
        timed_out = self.watchdog.stop() if self.watchdog is not None else []
        # The controller's own CPU time: what one controller can keep up with (docs/stations.md measures it).
        record = {
            "workers": self.workers, "down": self.down, "unplaced": unplaced, "timed_out": timed_out,
            "cpu_s": time.process_time(),
        }  # fmt: skip
        write_atomic(self.out / RESULT, json.dumps(record, indent=1))


class Watchdog:
    """Ends a station's worker whose test runs past the package's timeout: its ssh session, here, is cut.

    The worker there dies with its session (the plugin's workers exit with their parent); xdist then counts
    the test as unfinished and starts a new worker there. The clock is this machine's, from the moment xdist
    said the test started, so a station's clock does not matter.
    """

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self.running: dict[Any, tuple[str, float]] = {}
        self.timed_out: list[str] = []
        self.lock = threading.Lock()
        self.done = threading.Event()
        threading.Thread(target=self._watch, name="promote-fleet-watchdog", daemon=True).start()

    def started(self, node: Any, nodeid: str) -> None:
        with self.lock:
            self.running[node] = (nodeid, time.monotonic())

    def finished(self, nodeid: str) -> None:
        with self.lock:
            for node in [n for n, (t, _) in self.running.items() if t == nodeid]:
                del self.running[node]

    def _watch(self) -> None:
        while not self.done.wait(0.25):
            now = time.monotonic()
            with self.lock:
                late = [(n, t) for n, (t, at) in self.running.items() if now - at > self.timeout_s]
                for node, nodeid in late:
                    del self.running[node]
                    self.timed_out.append(nodeid)
            for node, _ in late:
                _cut(node)

    def stop(self) -> list[str]:
        self.done.set()
        with self.lock:
            return list(self.timed_out)


def _cut(node: Any) -> None:
    """Kill the ssh process that carries `node`'s worker (execnet's own handle on it)."""
    with contextlib.suppress(Exception):
        node.gateway._io.kill()


def _connect(manager: Any, spec: Any) -> Any:
    """The gateway for `spec`, or the exception that kept it from being made."""
    try:
        return manager.group.makegateway(spec)
    except Exception as e:  # execnet's HostNotFound, or the connection failing as it starts
        return e


def _without_pid(line: str) -> str:
    event = json.loads(line)
    event.pop("pid", None)
    return json.dumps(event, separators=(",", ":")) + "\n"


def configure(config: pytest.Config, out: Path) -> None:
    """Take over xdist's session in this controller, whether xdist has made it yet or makes it later."""
    spec = json.loads(Path(config.getoption("promote_fleet")).read_text(encoding="utf-8"))
    # Its pytest_plugin_registered sees every plugin registered before it too (a historic hook).
    config.pluginmanager.register(Controller(config, out, spec), "promote-fleet")
