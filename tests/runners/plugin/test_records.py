"""The files between plugin and runner: results JSON, progress log, findings, value display."""

from __future__ import annotations

import json
from dataclasses import FrozenInstanceError, replace
from pathlib import Path

import pytest

from promote.core.findings import Finding, Location
from promote.runners.plugin.outcomes import truncate
from promote.runners.plugin.probes import MISSING, show
from promote.runners.plugin.progress import ProgressLog, read_progress, unfinished
from promote.runners.plugin.records import (
    StreamRecord,
    TestRecord,
    WorkerResults,
    progress_path,
    read_all_results,
    write_results,
)


def sample(worker: str) -> WorkerResults:
    test = TestRecord("t.py::test_x", "failed", 0.5, worker, 1, "MainThread", 7, longrepr="boom")
    stream = StreamRecord("cpu", 1, "t.py::test_x", "setup", "maker", 9, fixture="shared")
    finding = Finding(
        "leaked-state",
        "warning",
        "t.py::test_x",
        "cwd: 'a' -> 'b' (promote restored it after the test)",
        "t.py::test_x",
    )
    return WorkerResults(worker, 42, "3.11.7", "0.32.4", "restore", 1.0, 2.0, 1, 12.5, (test,), (stream,), (finding,))


def test_results_round_trip_through_disk_for_every_worker(tmp_path: Path) -> None:
    for worker in ("gw1", "gw0"):
        write_results(tmp_path, sample(worker))

    assert read_all_results(tmp_path) == [sample("gw0"), sample("gw1")]
    assert [p.name for p in sorted(tmp_path.iterdir())] == ["results-gw0.json", "results-gw1.json"]


@pytest.mark.parametrize("dropped", [None, "excerpt", "requirements"])
def test_a_test_record_reads_back_equal_from_json_with_or_without_later_keys(dropped: str | None) -> None:
    record = TestRecord("t.py::test_x", "passed", 0.5, "gw0", 3, "MainThread", 7, requirements=("checkpoint:x",))
    data = json.loads(json.dumps(record.to_json()))
    if dropped is not None:
        del data[dropped]  # as a results file from an older promote has it

    back = TestRecord.from_json(data)

    expected = replace(record, **{dropped: TestRecord.__dataclass_fields__[dropped].default}) if dropped else record
    assert back == expected and hash(back) == hash(expected)
    assert isinstance(back.requirements, tuple)
    with pytest.raises(FrozenInstanceError):
        back.outcome = "failed"  # type: ignore[misc]


def test_progress_lines_write_test_ids_as_json_does(tmp_path: Path) -> None:
    # The usual lines are formatted by hand: an awkward test id must come out as json.dumps writes it.
    odd = 't.py::test_x["quoted" \\ back\tslash, ünïcode ✓]'
    log = ProgressLog(tmp_path, "gw0")
    for index, nodeid in enumerate([odd, "t.py::test_y", odd], start=1):
        log.start(nodeid, index)
        log.finish_passed(nodeid, index, 0.25)
    log.close()

    lines = progress_path(tmp_path, "gw0").read_text(encoding="utf-8").splitlines()
    ids = [e.nodeid for e in read_progress(progress_path(tmp_path, "gw0")) if e.event in ("start", "finish")]
    assert ids == [odd, odd, "t.py::test_y", "t.py::test_y", odd, odd]
    assert all(f'"nodeid":{json.dumps(odd)},' in line for line in lines if "quoted" in line)
    assert all(line.isascii() for line in lines)


def test_an_unknown_schema_is_refused(tmp_path: Path) -> None:
    data = sample("main").to_json() | {"schema": 99}

    with pytest.raises(ValueError, match="schema 99"):
        WorkerResults.from_json(data)


def test_finding_round_trips_and_rejects_unknown_severity() -> None:
    f = Finding("cross-thread-stream", "error", "a", "msg")

    assert Finding.from_json(f.to_json()) == f
    assert f.to_json() == {
        "check": "cross-thread-stream",
        "severity": "error",
        "subject": "a",
        "message": "msg",
        "cause": None,
        "location": None,
    }
    placed = Finding("ci-workflow-invalid", "error", "w.yml", "bad", location=Location(".github/workflows/w.yml", 5))
    assert placed.to_json()["location"] == {"path": ".github/workflows/w.yml", "line": 5}
    assert Finding.from_json(placed.to_json()) == placed
    with pytest.raises(ValueError, match="severity"):
        Finding("x", "fatal", "a", "msg")  # type: ignore[arg-type]


def test_progress_names_tests_cut_off_by_a_death_even_when_a_replacement_appends(tmp_path: Path) -> None:
    first = ProgressLog(tmp_path, "gw0")
    first.start("t.py::test_ok", 1)
    first.finish("t.py::test_ok", 1, "passed")
    first.start("t.py::test_dies", 2)
    # no close(): the process died here; a replacement worker appends to the same log
    replacement = ProgressLog(tmp_path, "gw0")
    replacement.start("t.py::test_hangs", 1)
    path = progress_path(tmp_path, "gw0")
    with path.open("a") as f:
        f.write('{"worker": "gw0", "event": "fin')  # a line cut short by a kill

    events = read_progress(path)
    lost = unfinished(path)
    first.close()
    replacement.close()

    assert lost == ["t.py::test_dies", "t.py::test_hangs"]
    assert [e.event for e in events] == ["session", "start", "finish", "start", "session", "start"]


def test_a_closed_log_has_nothing_unfinished(tmp_path: Path) -> None:
    log = ProgressLog(tmp_path, "main")
    log.start("t.py::test_ok", 1)
    log.finish("t.py::test_ok", 1, "passed")
    log.close()

    assert unfinished(progress_path(tmp_path, "main")) == []


def test_long_failure_text_keeps_its_head_and_its_tail() -> None:
    text = "HEAD" + "x" * 10_000 + "RuntimeError: the end"

    cut = truncate(text, 400)

    assert cut.startswith("HEAD") and cut.endswith("RuntimeError: the end")
    assert "characters cut" in cut and len(cut) < 500


@pytest.mark.parametrize(
    ("key", "value", "shown"),
    [
        ("os.environ[HF_TOKEN]", "hf_abc", "***"),
        ("os.environ[aws_secret_access_key]", "abc", "***"),
        ("os.environ[Db_Password]", "abc", "***"),
        ("os.environ[HF_TOKEN]", MISSING, "<unset>"),
        ("os.environ[MIRROR]", "https://bot:pat123@example.com/r.git", "'https://***@example.com/r.git'"),
        ("os.environ[SANCTUM_MLX_DFLASH2]", "0", "'0'"),
    ],
)
def test_values_are_shown_with_secrets_redacted(key: str, value: object, shown: str) -> None:
    assert show(key, value) == shown
