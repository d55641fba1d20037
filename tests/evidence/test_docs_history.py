"""The shared history: two machines publish their audits into one docs repository; each tells the same story."""

from __future__ import annotations

import json
from importlib.resources import files
from pathlib import Path

import jsonschema

from tests.evidence.test_stories import FILTERING_CI, SUITE
from tests.helpers.cli import run_json
from tests.helpers.gitrepos import commit, git, make_fleet
from tests.helpers.packages import write_package


def test_a_test_flaky_across_two_machines_is_told_from_the_published_pages_and_not_from_either_alone(
    tmp_path: Path,
) -> None:
    docs = tmp_path / "docs"
    git(tmp_path, "init", "-q", "-b", "main", str(docs))
    commit(docs, "start", {"README.md": "# Docs\n"})
    fleet = make_fleet(tmp_path / "fleet", names=("origin",))
    write_package(fleet.work, "pkg", {"test_a.py": SUITE})
    # CI leaves test_ok out: what each audit found is on its page, so the shared history tells it too.
    ci = fleet.work / ".github" / "workflows" / "ci.yml"
    ci.parent.mkdir(parents=True)
    ci.write_text(FILTERING_CI.replace("not slow", "not test_ok"))
    (fleet.work / ".gitignore").write_text(".promote/\npkg/counter.txt\n")
    fleet.config(
        'max_reruns = 1\n\n[[promote.packages]]\nname = "pkg"\npath = "pkg"\n\n'
        f'[promote.docs]\nrepo = "{docs}"\npage = "docs/evidence/{{date}}-{{commit}}-{{run}}.md"\n\n'
        "[promote.history]\nwindow = 5\nnever_ran_after = 2\n"
    )
    head = commit(fleet.work, "the package")
    git(fleet.work, "push", "-q", "origin", "main")
    station = fleet.clone_of("origin", "station")  # the training station: the same commit, another clone

    for machine, counter in ((fleet.work, "fail"), (station, "pass")):
        (machine / "pkg" / "counter.txt").write_text(counter + "\n")
        _, audit = run_json(machine, "audit", "--publish")
        assert audit["published"]["status"] == "committed", audit["published"]
        assert any(f.endswith(".json") for f in audit["published"]["files"])

    # Each machine alone saw one run: no flaky story. The published pages hold both.
    _, alone = run_json(station, "history", "--tests")
    assert "test_a.py::test_flaky" not in {s["test"] for s in alone["tests"]}
    for machine in (station, fleet.work):
        _, shared = run_json(machine, "history", "--tests", "--from-docs")
        [flaky] = [s for s in shared["tests"] if s["test"] == "test_a.py::test_flaky"]
        assert (flaky["kind"], flaky["failed_on_commit"], flaky["on_commit"], flaky["commit"]) == (
            "flaky-history", 1, 2, head
        )  # fmt: skip
        never = {s["test"]: (s["severity"], s["streak_of"]) for s in shared["tests"] if s["kind"] == "never-ran"}
        assert never == {
            "test_a.py::test_quarantined": ("warning", "runs"), "test_a.py::test_needs_model": ("error", "runs"),
            "test_a.py::test_ok": ("warning", "audits"),
        }  # fmt: skip
        # One test's timeline from the pages: the run that failed lists it; the one it passed in does not.
        _, timeline = run_json(machine, "history", "--test", "test_a.py::test_flaky", "--from-docs")
        assert [e["outcome"] for e in timeline["timeline"]] == ["failed"] and len(timeline["unlisted"]) == 1
        assert timeline["source"] == "docs" and timeline["stories"][0]["kind"] == "flaky-history"
        jsonschema.validate(timeline, json.loads(files("promote").joinpath("schemas/history.schema.json").read_text()))
    code, nowhere = run_json(station, "history", "--test", "test_a.py::test_fast", "--from-docs")
    assert code == 0 and nowhere["timeline"] == [] and nowhere["unlisted"] == []
    # The local database is the cache: the pages are read once.
    assert (station / ".promote" / "docs-history.sqlite").is_file()
