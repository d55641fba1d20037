"""What happened to a fleet's stations during a run, from the controller's own record (fleet.json).

A station that stopped answering is one `station-error` naming it, the tests that were running there (crashed
there) and what no other station could take over (never ran). Tests it had queued ran elsewhere, counted once.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from promote.core.bounded_json import JsonRejected, read_object
from promote.core.findings import Finding
from promote.runners.fleet.members import Member
from promote.runners.plugin import progress
from promote.runners.plugin.fleet_worker import RESULT
from promote.runners.remote.faults import station_error


@dataclass(frozen=True)
class FleetOutcome:
    """Each worker's station, the stations that stopped answering (and why), the tests placed nowhere."""

    workers: dict[str, str] = field(default_factory=dict)
    down: dict[str, str] = field(default_factory=dict)
    unplaced: tuple[str, ...] = ()
    timed_out: tuple[str, ...] = ()  # a station's tests the controller ended for running past the timeout
    read: bool = False  # False: the controller wrote no record (it did not get to its end)


def _strings(value: object) -> dict[str, str]:
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}


def read_outcome(part_dir: Path) -> FleetOutcome:
    try:
        data = read_object(part_dir / RESULT)
    except (OSError, JsonRejected):
        return FleetOutcome()
    unplaced, late = data.get("unplaced"), data.get("timed_out")
    ids = tuple(str(n) for n in unplaced) if isinstance(unplaced, list) else ()
    timed_out = tuple(str(n) for n in late) if isinstance(late, list) else ()
    return FleetOutcome(_strings(data.get("workers")), _strings(data.get("down")), ids, timed_out, read=True)


def merged(parts: dict[str, FleetOutcome]) -> FleetOutcome:
    """One outcome for a run's parts (its session and, when it had serial tests, the one after). Each part's
    workers are named gw0, gw1, ... again: a worker is known by its part and its name (`parallel/gw0`)."""
    workers = {f"{part}/{w}": station for part, o in parts.items() for w, station in o.workers.items()}
    down = {station: why for o in parts.values() for station, why in o.down.items()}
    unplaced = tuple(dict.fromkeys(test for o in parts.values() for test in o.unplaced))
    timed_out = tuple(test for o in parts.values() for test in o.timed_out)
    return FleetOutcome(workers, down, unplaced, timed_out, read=any(o.read for o in parts.values()))


def started_by(part_dir: Path) -> list[tuple[str, str]]:
    """(test, worker) of every test a worker of this part started, as its relayed progress lines say."""
    found = []
    for path in sorted(part_dir.glob("progress-*.jsonl")):
        worker = path.stem.removeprefix("progress-")
        found += [(e.nodeid, worker) for e in progress.read_progress(path) if e.event == "start" and e.nodeid]
    return found


def _names(tests: list[str]) -> str:
    shown = ", ".join(tests[:5])
    return shown + (f" and {len(tests) - 5} more" if len(tests) > 5 else "")


def fleet_findings(outcome: FleetOutcome, ready: list[Member], crashed: list[tuple[str, str]]) -> list[Finding]:
    """A station-error per station that dropped out, and one for tests that could run nowhere that was left.

    `crashed`: (test, worker) of each test that was running when its worker died.
    """
    labels = {m.name: m.label for m in ready}
    findings = []
    for station, why in sorted(outcome.down.items()):
        there = [test for test, worker in crashed if outcome.workers.get(worker) == station]
        message = f"station {labels.get(station, station)} stopped answering once the run began ({_reason(why)})"
        if there:
            message += f"; {len(there)} test(s) were running there and count as crashed there: {_names(there)}"
        if any(m.name not in outcome.down for m in ready):
            message += "; the tests queued on it were given to the other stations"
        findings.append(station_error(station, message))
    if outcome.unplaced:
        unplaced = list(outcome.unplaced)
        lost = ", ".join(sorted(outcome.down)) or "its workers ended"
        message = (
            f"{len(unplaced)} test(s) could run only on stations that left the run ({lost}) and never ran: "
            f"{_names(unplaced)}"
        )
        findings.append(station_error(", ".join(sorted(outcome.down)) or "fleet", message))
    return findings


def _reason(why: str) -> str:
    # execnet says only which address it could not reach; the address is in the label already.
    return "no new ssh connection could be made" if why.startswith("HostNotFound") else why


def crashes_on_stations(
    findings: list[Finding], outcome: FleetOutcome, ready: list[Member], crashed: list[tuple[str, str]]
) -> list[Finding]:
    """`findings` with each worker-crash of a station's worker saying which station, and that its connection may
    have been cut: from here a worker killed there and a dropped ssh session look the same."""
    remote = {m.name: m for m in ready if m.remote}
    where = {test: remote[s] for test, worker in crashed if (s := outcome.workers.get(worker)) in remote}
    out = []
    for f in findings:
        member = where.get(f.subject) if f.check == "worker-crash" else None
        if member is not None and member.name in outcome.down:
            message = (
                f"the worker running {f.subject} on station {member.label} stopped as the station stopped answering"
            )
            f = replace(f, message=message + " (its station-error says more)")
        elif member is not None:
            message = (
                f"the worker running {f.subject} on station {member.label} stopped (a segfault, os._exit or a kill "
                "there, or its ssh connection was cut); the rest of the package ran in a replacement worker"
            )
            f = replace(f, message=message)
        out.append(f)
    return out
