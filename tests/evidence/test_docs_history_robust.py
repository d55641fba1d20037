"""The shared history read from pages that anyone with push access to the docs repository writes: a hostile page
is skipped and named, never a traceback; the cache follows the pages at HEAD; each page is read once."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path
from typing import Any

import pytest

from promote.config import load_config
from promote.core import state
from promote.evidence import docs_history
from promote.evidence.docs_page import SCHEMA_ID
from tests.helpers.cli import run, run_json
from tests.helpers.gitrepos import commit, git
from tests.helpers.tmpfs import fill, mounted

FOLDER = "docs/evidence"


def page(run_id: str, started: str, tests: list[list[Any]], **outcomes: Any) -> dict[str, Any]:
    """A published evidence page as `audit --publish` writes it, reduced to what the shared history reads."""
    return {
        "$schema": SCHEMA_ID,
        "run": run_id,
        "provenance": {"finished": started, "command": "promote audit --publish"},
        "gates": {"tested": {"status": "fail"}, "docs": {"status": "pass"}},
        "outcomes": {
            "kind": "audit", "started": started, "commit": "c" * 40, "stations": {"pkg": "local"},
            "collected": {"pkg": 3}, "ci": False, "tests": tests, **outcomes,
        },
    }  # fmt: skip


def flaky(run_id: str, started: str, outcome: str = "failed") -> dict[str, Any]:
    return page(run_id, started, [["pkg", "test_a.py::test_flaky", outcome, None, None, "flaky"]])


@pytest.fixture
def work(tmp_path: Path) -> Path:
    """A clone whose promote.toml names a docs repository (tmp_path/docs) holding no page yet."""
    docs = tmp_path / "docs"
    git(tmp_path, "init", "-q", "-b", "main", str(docs))
    commit(docs, "start", {"README.md": "# Docs\n"})
    work = tmp_path / "work"
    work.mkdir()
    (work / "promote.toml").write_text(
        f'[promote]\ntrunk = "main"\nmirrors = []\n\n[promote.docs]\nrepo = "{docs}"\n'
        f'page = "{FOLDER}/{{date}}-{{run}}.md"\n\n[promote.history]\nwindow = 5\nnever_ran_after = 2\n'
    )
    git(work, "init", "-q", "-b", "main")
    commit(work, "start", {})
    return work


def publish(work: Path, pages: dict[str, bytes | dict[str, Any]], message: str = "pages") -> None:
    """Commit `pages` (name: JSON document or raw bytes) into the docs repository's evidence folder."""
    docs = work.parent / "docs"
    (docs / FOLDER).mkdir(parents=True, exist_ok=True)
    for name, body in pages.items():
        (docs / FOLDER / name).write_bytes(body if isinstance(body, bytes) else json.dumps(body).encode())
    git(docs, "add", "-A")
    git(docs, "commit", "-q", "-m", message)


HOSTILE: dict[str, tuple[bytes | dict[str, Any], str]] = {
    "deep.json": (b"[" * 100_000 + b"]" * 100_000, "depth"),
    "deep-in-outcomes.json": (
        json.dumps(page("r9", "2026-01-09T00:00:00", []))
        .replace('"tests": []', '"tests": ' + "[" * 5000 + "]" * 5000)
        .encode(),
        "depth",
    ),
    "digits.json": (
        json.dumps(page("r8", "2026-01-08T00:00:00", [])).replace('"pkg": 3', '"pkg": ' + "9" * 400).encode(),
        "number",
    ),
    "beyond-64-bits.json": (
        json.dumps(page("r7", "2026-01-07T00:00:00", [])).replace('"pkg": 3', f'"pkg": {2**64}').encode(),
        "number",
    ),
    "tests-a-string.json": (page("r6", "2026-01-06T00:00:00", "test_a.py::test_x"), "type"),  # type: ignore[arg-type]
    "collected-a-list.json": (
        {
            **page("r5", "2026-01-05T00:00:00", []),
            "outcomes": {**page("r5", "x", [])["outcomes"], "collected": ["pkg"]},
        },
        "type",
    ),
    "run-a-number.json": ({**flaky("r4", "2026-01-04T00:00:00"), "run": 4}, "type"),
    "id-a-list.json": (page("r3", "2026-01-03T00:00:00", [["pkg", ["test"], "failed", None, None, None]]), "type"),
    "lone-surrogate.json": (
        json.dumps(flaky("r2", "2026-01-02T00:00:00")).replace("test_flaky", "test_\\ud800").encode(),
        "type",
    ),
    "nan.json": (json.dumps(flaky("r1", "2026-01-01T00:00:00")).replace('"ci": false', '"ci": NaN').encode(), "number"),
    "latin-1.json": (b'{"run": "\xff"}', "encoding"),
    "outcome-invented.json": (flaky("r0", "2026-01-01T00:00:00", outcome="exploded"), "type"),
}


def test_hostile_pages_are_skipped_and_named_and_the_good_ones_told(work: Path) -> None:
    good = {
        "good-1.json": flaky("g1", "2026-02-01T00:00:00"),
        "good-2.json": flaky("g2", "2026-02-02T00:00:00", "passed"),
    }
    publish(work, {**good, **{name: body for name, (body, _) in HOSTILE.items()}})
    result = run(work, "history", "--tests", "--from-docs", "--json")
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output and result.stderr == ""
    data = json.loads(result.stdout)
    assert {s["page"]: s["fault"] for s in data["skipped"]} == {
        f"{FOLDER}/{name}": fault for name, (_, fault) in HOSTILE.items()
    }
    # The good pages are read as if the others were not there: two runs, one red and one green, a flaky story.
    [story] = [s for s in data["tests"] if s["test"] == "test_a.py::test_flaky"]
    assert (story["kind"], story["runs"], story["failed"]) == ("flaky-history", 2, 1)

    text = run(work, "history", "--tests", "--from-docs")
    skipped = [line for line in text.stdout.splitlines() if line.startswith("skipped ")]
    assert len(skipped) == len(HOSTILE) and all(len(line) < 300 for line in skipped), skipped
    assert "skipped docs/evidence/deep.json: nested deeper than 64 levels" in skipped


def test_a_page_replaced_at_head_is_told_as_it_now_is_and_a_fresh_clone_agrees(work: Path, tmp_path: Path) -> None:
    publish(work, {"2026-03-01.json": flaky("morning", "2026-03-01T08:00:00")})
    _, first = run_json(work, "history", "--test", "test_a.py::test_flaky", "--from-docs")
    assert [e["run"] for e in first["timeline"]] == ["morning"]
    # A second audit the same day publishes under the same name: the page now holds the evening's run only.
    publish(work, {"2026-03-01.json": flaky("evening", "2026-03-01T20:00:00")}, "the evening's audit")
    _, cached = run_json(work, "history", "--test", "test_a.py::test_flaky", "--from-docs")
    assert [e["run"] for e in cached["timeline"]] == ["evening"]
    fresh = tmp_path / "fresh"
    shutil.copytree(work, fresh, ignore=shutil.ignore_patterns(".promote"))
    _, told_fresh = run_json(fresh, "history", "--test", "test_a.py::test_flaky", "--from-docs")
    assert told_fresh == cached
    for_tests = ("history", "--tests", "--from-docs")
    assert run_json(work, *for_tests) == run_json(fresh, *for_tests)
    # A page taken away is taken out of the story too.
    git(work.parent / "docs", "rm", "-q", f"{FOLDER}/2026-03-01.json")
    git(work.parent / "docs", "commit", "-q", "-m", "withdrawn")
    _, gone = run_json(work, "history", "--test", "test_a.py::test_flaky", "--from-docs")
    assert gone["timeline"] == []


def _logging_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A `git` first on PATH that appends its arguments to a log, then runs the real git with them."""
    real = shutil.which("git")
    assert real is not None
    bin_dir, log = tmp_path / "bin", tmp_path / "git.log"
    bin_dir.mkdir()
    wrapper = bin_dir / "git"
    wrapper.write_text(f'#!/bin/sh\necho "$*" >> "{log}"\nexec "{real}" "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return log


def test_each_page_is_read_once_however_many_are_cached(
    work: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    publish(work, {f"2026-04-{i:03d}.json": flaky(f"r{i:03d}", f"2026-04-01T00:{i // 60:02d}:{i % 60:02d}",
                                                  "failed" if i % 2 else "passed") for i in range(300)})  # fmt: skip
    log = _logging_git(tmp_path, monkeypatch)
    assert run(work, "history", "--tests", "--from-docs").exit_code == 0
    first = log.read_text().splitlines()
    assert sum("cat-file --batch" in c for c in first) == 1 and not any(c.startswith("show") for c in first), first
    log.write_text("")
    assert run(work, "history", "--tests", "--from-docs").exit_code == 0
    second = log.read_text().splitlines()
    # Which repository, which commit, which pages: no page read again.
    assert len(second) <= 3 and not any("cat-file" in c or c.startswith("show") for c in second), second
    # One page more: read alone, in one call.
    publish(work, {"2026-05-001.json": flaky("new", "2026-05-01T00:00:00")})
    log.write_text("")
    _, told = run_json(work, "history", "--test", "test_a.py::test_flaky", "--from-docs")
    third = log.read_text().splitlines()
    assert sum("cat-file --batch" in c for c in third) == 1 and len(third) <= 4, third
    assert len(told["timeline"]) == 301  # every page lists it, red or green


def test_a_reader_holding_the_cache_sees_one_snapshot_while_another_brings_it_up_to_date(work: Path) -> None:
    publish(work, {"a.json": flaky("first", "2026-06-01T00:00:00")})
    config = load_config(work, None)
    reader = docs_history.cache(config)
    try:
        publish(work, {"a.json": flaky("second", "2026-06-02T00:00:00")}, "replaced")
        _, other = run_json(work, "history", "--test", "test_a.py::test_flaky", "--from-docs")
        assert [e["run"] for e in other["timeline"]] == ["second"]
        # The reader opened before still reads the pages as they were when it opened: never a mix of both.
        assert reader.run_ids() == ["first"]
        assert reader.read("SELECT run_id FROM pages") == [("first",)]
    finally:
        reader.close()
    fresh = docs_history.cache(config)
    try:
        assert fresh.run_ids() == ["second"]
    finally:
        fresh.close()


def test_a_full_state_disk_while_reading_the_pages_is_one_line_and_exit_2(work: Path) -> None:
    publish(work, {f"p{i}.json": flaky(f"r{i}", f"2026-07-01T00:00:{i:02d}") for i in range(40)})
    state = work / ".promote"
    state.mkdir()
    codes = set()
    with mounted(state, "200k"):
        for leave in (0, 8192, 32768, 163840):
            for path in state.iterdir():
                shutil.rmtree(path) if path.is_dir() else path.unlink()
            fill(state, leave=leave)
            result = run(work, "history", "--tests", "--from-docs")
            assert "Traceback" not in result.output, (leave, result.output)
            codes.add(result.exit_code)
            if result.exit_code != 0:
                assert result.exit_code == 2, (leave, result.output)
                [line] = result.stderr.splitlines()
                assert line.startswith("promote: error: "), (leave, line)
                assert "No space left on device" in line or "disk is full" in line, (leave, line)
    assert codes == {0, 2}, codes  # refused while the disk was full, told once there was room


def test_a_cache_made_before_pages_were_kept_by_object_keeps_no_run_of_a_page_gone(work: Path) -> None:
    from promote.evidence.history import History, StoredRun, TestOutcome

    # The cache as an earlier promote left it: runs only, nothing saying which page each came from.
    old = History(state.state_dir(work), name=docs_history.CACHE_NAME)
    tests = (TestOutcome("pkg", "test_a.py::test_flaky", "failed"),)
    old.record(StoredRun("withdrawn", "audit", "2026-09-01T00:00:00", "x", "c" * 40, "promote audit", tests=tests))
    old.close()
    publish(work, {"a.json": flaky("published", "2026-09-02T00:00:00")})
    _, told = run_json(work, "history", "--test", "test_a.py::test_flaky", "--from-docs")
    assert [e["run"] for e in told["timeline"]] == ["published"]


def test_promotes_bringing_the_cache_up_to_date_at_once_all_tell_the_same_story(work: Path) -> None:
    import subprocess
    import sys

    argv = [sys.executable, "-m", "promote", "history", "--tests", "--from-docs", "--json"]
    for round_ in range(3):
        day = f"2026-10-0{round_ + 1}"
        publish(
            work, {"a.json": flaky(f"a{round_}", f"{day}T00:00"), f"b{round_}.json": flaky(f"b{round_}", day, "passed")}
        )
        procs = [subprocess.Popen(argv, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(3)]
        done = [p.communicate(timeout=120) for p in procs]
        assert [p.returncode for p in procs] == [0, 0, 0], done
        told = {out for out, _ in done}
        assert len(told) == 1, round_
        [story] = [s for s in json.loads(told.pop())["tests"] if s["test"] == "test_a.py::test_flaky"]
        assert story["runs"] == round_ + 2  # this round's page a, and every page b so far
