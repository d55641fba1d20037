"""Run a test package on another station over ssh, and store what ran exactly like a local run.

Step 1: push the candidate commit to the station's workdir and ship the plugin (station_sync).
Step 2: run the same pytest command as a local run, one ssh session per part, with a watcher beside it.
Step 3: bring the out directory back over ssh, and summarize it as any local run's.
Step 4: name every fault (unreachable, refused, dropped mid-run) as a `station-error`; count only what ran.
"""

from __future__ import annotations

import io
import json
import subprocess
import tarfile
import threading
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from promote.config import PackageConfig, StationConfig
from promote.core import state
from promote.core.findings import Rootdir
from promote.core.state import STATE_DIR
from promote.core.station import Station, read_station
from promote.runners import package as runner
from promote.runners import stations
from promote.runners.package import ProcessOutcome, ProgressCallback
from promote.runners.remote import sync as station_sync
from promote.runners.remote.faults import station_error, with_faults
from promote.runners.remote.ssh import StationError, Target, q
from promote.runners.remote.sync import OUT, Workspace
from promote.runners.remote.watch import timed_out
from promote.runners.summary import PackageResult, summarize

FETCH_TIMEOUT_S = 600.0
POLL_S = 0.25
# Python's own exec, after leaving ssh's process group: a dropped run can then be killed as one group.
_SETSID = "import os, sys\ntry:\n    os.setsid()\nexcept OSError:\n    pass\nos.execvp(sys.argv[1], sys.argv[1:])\n"


def default_workdir(top: Path) -> str:
    """The station's workdir for the repository `top` when none is configured: under promote's state dir there."""
    return f"~/{STATE_DIR}/work/{top.name}"


def ran_on(result: PackageResult) -> Station | None:
    """The station a remote package ran on, as detected there when it ran (None for a local package)."""
    path = result.out_dir / "station.json"
    return read_station(path) if path.is_file() else None


class _Watcher:
    """Reads the remote watcher's progress lines (tests finished and collected per part) as they come."""

    def __init__(self, target: Target, ws: Workspace, remote_out: str, parts: list[str], timeout_s: float | None):
        dirs = " ".join(q(f"{remote_out}/{p}") for p in parts)
        limit = "none" if timeout_s is None else str(timeout_s)
        script = (
            f'export PYTHONPATH={q(ws.lib)}"${{PYTHONPATH:+:$PYTHONPATH}}"\n'
            f"exec {q(target.python)} -m promote.runners.remote.watch {limit} {dirs}"
        )
        self.state: dict[str, dict[str, int]] = {}
        self.proc = subprocess.Popen(
            target.argv(script), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        )
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                self.state = json.loads(line)
            except ValueError:
                continue

    def counts(self) -> tuple[int, int]:
        state = self.state
        return sum(p["finished"] for p in state.values()), sum(p["total"] for p in state.values())

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait()


def part_script(pkg: PackageConfig, ws: Workspace, package_dir: str, part_dir: str, part: str, workers: int) -> str:
    """The shell script that runs one part there: the very pytest command a local run uses."""
    station_file = f"{part_dir}/station.json"
    cmd = runner.command(
        replace(pkg, path=Path(package_dir)),
        Path(part_dir),
        python=ws.target.python,
        leaks=pkg.leaks,
        part=part,
        workers=workers,
        station=Path(station_file),
    )
    env = "".join(f"{q(f'{k}={v}')} " for k, v in pkg.env)
    return "\n".join(
        [
            f"cd {q(package_dir)} || exit 96",
            f"mkdir -p {q(part_dir)} || exit 97",
            f"printf '%s\\n' {q(json.dumps(ws.station.to_json()))} > {q(station_file)} || exit 97",
            # Written before the exec: the pid is pytest's own, and after setsid its process group's too.
            f"echo $$ > {q(part_dir + '/remote.pid')}",
            f'export PYTHONPATH={q(ws.lib)}"${{PYTHONPATH:+:$PYTHONPATH}}"',
            f"exec env {env}{q(ws.target.python)} -c {q(_SETSID)} " + " ".join(q(w) for w in cmd),
        ]
    )


def run_parts(
    pkg: PackageConfig,
    ws: Workspace,
    package_dir: str,
    remote_out: str,
    out_dir: Path,
    on_progress: ProgressCallback | None,
) -> list[ProcessOutcome]:
    """Run every part of the package there at once; return when every ssh session has ended."""
    parts = [("all", pkg.workers)] if pkg.workers == 1 else [("parallel", pkg.workers), ("serial", 1)]
    started = time.monotonic()
    running = []
    for part, workers in parts:
        local = out_dir / part
        state.private_dir(local)
        script = part_script(pkg, ws, package_dir, f"{remote_out}/{part}", part, workers)
        with state.open_private_log(local / "pytest.log") as sink:
            running.append((part, local, ws.target.argv(script), ws.target.start(script, sink)))
    watcher = None
    if on_progress is not None or pkg.timeout_s is not None:
        watcher = _Watcher(ws.target, ws, remote_out, [p for p, _ in parts], pkg.timeout_s)
    ended: dict[str, float] = {}
    last = (-1, -1)
    while len(ended) < len(running):
        time.sleep(POLL_S)
        for part, _, _, proc in running:
            if part not in ended and proc.poll() is not None:
                ended[part] = time.monotonic() - started
        if watcher is not None and on_progress is not None and watcher.counts() != last:
            last = watcher.counts()
            on_progress(pkg.name, *last, False)
    if watcher is not None:
        watcher.stop()
    return [
        ProcessOutcome(part, local, tuple(argv), int(proc.returncode), ended[part], local / "pytest.log", workers=n)
        for (part, local, argv, proc), (_, n) in zip(running, parts, strict=True)
    ]


def fetch(ws: Workspace, remote_out: str, out_dir: Path, *, kill: bool) -> str | None:
    """Bring the remote out directory back into `out_dir`; None when it came, else why not."""
    lines = []
    if kill:
        # A session that dropped may have left pytest running there: end its process group first.
        lines.append(f'for f in {q(remote_out)}/*/remote.pid; do kill -s KILL -- -"$(cat "$f")" 2>/dev/null; done')
    lines.append(f"cd {q(remote_out)} && tar -cf - .")
    reply = ws.target.run("\n".join(lines), timeout=FETCH_TIMEOUT_S)
    if not reply.ok:
        return reply.reason
    try:
        _extract(reply.output, out_dir)
    except tarfile.TarError as e:
        return f"what came back is not a tar archive: {e}"
    # The run's directory there is shared by its packages: removed by whichever finishes last.
    ws.target.run(f"rm -rf {q(remote_out)} && rmdir {q(str(Path(remote_out).parent))} 2>/dev/null", timeout=60)
    return None


def _extract(data: bytes, out_dir: Path) -> None:
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(out_dir, filter="data")
        else:  # pragma: no cover - Python before 3.10.12 has no extraction filters: refuse what could escape
            safe = [m for m in tar if m.isreg() or m.isdir()]
            tar.extractall(out_dir, members=[m for m in safe if not m.name.startswith("/") and ".." not in m.name])


def run_remote(
    pkg: PackageConfig,
    sc: StationConfig,
    run_dir: Path,
    on_progress: ProgressCallback | None = None,
    *,
    rootdir: Rootdir | None = None,
) -> PackageResult:
    """Run `pkg` on station `sc` over ssh; never raises for what went wrong there, it becomes a finding.

    `rootdir`: where the package is in the repository here (its findings' locations are relative to it).
    """
    target = Target.from_config(sc)
    out_dir = run_dir / pkg.name
    state.private_dir(out_dir)
    t0 = time.monotonic()
    try:
        top, sha, dirty = station_sync.candidate(pkg.path)
        if not pkg.path.resolve().is_relative_to(top.resolve()):
            raise StationError(f"package {pkg.name} ({pkg.path}) is outside the repository {top}")
        package = pkg.path.resolve().relative_to(top.resolve()).as_posix()
        workdir = sc.workdir or default_workdir(top)
        ws = station_sync.prepare(target, top, sha, workdir, package, sync=sc.sync, configured=sc.station)
    except StationError as e:
        if on_progress is not None:
            on_progress(pkg.name, 0, 0, True)
        finding = station_error(sc.name, str(e))
        return PackageResult(pkg.name, pkg.path, target.label, 255, time.monotonic() - t0, (), (), (finding,), out_dir)
    state.write_private(
        out_dir / "station.json", json.dumps({**ws.station.to_json(), "notes": list(ws.notes)}, indent=1)
    )
    remote_out = f"{ws.workdir}/{OUT}/{run_dir.name}/{pkg.name}"
    parts = run_parts(pkg, ws, f"{ws.workdir}/{package}", remote_out, out_dir, on_progress)
    lost = fetch(ws, remote_out, out_dir, kill=any(p.status not in range(6) for p in parts))
    parts = [replace(p, timed_out=timed_out(p.out_dir)) for p in parts]
    result = summarize(
        pkg.name, pkg.path, out_dir, station=target.label, parts=parts, timeout_s=pkg.timeout_s, rootdir=rootdir
    )
    result = with_faults(result, ws, parts, lost, dirty=dirty and sc.sync == "git")
    if on_progress is not None:
        done = sum(1 for t in result.tests if t.parent is None)
        on_progress(pkg.name, done, done, True)
    return result


def inventory_for(fleet: stations.Inventory, result: PackageResult) -> stations.Inventory:
    """The inventory as seen by `result`'s tests: for a remote package, the station they ran on is `local`."""
    there = ran_on(result)
    if there is None:
        return fleet
    others = tuple(replace(s, local=False) for s in fleet.stations if s.name != there.name)
    return stations.Inventory((replace(there, local=True), *others), fleet.notes)


def as_detected(fleet: stations.Inventory, results: Sequence[PackageResult]) -> stations.Inventory:
    """The inventory with every station a package ran on over ssh as detected there, not as configured."""
    seen = {s.name: s for r in results if (s := ran_on(r)) is not None}
    return stations.Inventory(
        tuple(replace(seen[s.name], local=False, ssh=s.ssh) if s.name in seen else s for s in fleet.stations),
        fleet.notes,
    )
