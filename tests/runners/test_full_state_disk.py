"""A full disk under `.promote/` (a real tmpfs there): `test` and `audit` print what they decided, then one line."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from importlib.resources import files
from pathlib import Path
from typing import get_args

import jsonschema
import pytest

from promote.cli.audit_report import UNSTORED
from promote.core.vocab import Stored
from tests.helpers.cli import run, run_json
from tests.helpers.docs import docs_state
from tests.helpers.gitrepos import commit, git
from tests.helpers.packages import write_config, write_package
from tests.helpers.tmpfs import fill, mounted


@pytest.fixture
def work(tmp_path: Path) -> Iterator[Path]:
    """A repository with one package (a pass and a failure, so a rerun runs), `.promote/` a 400 KiB tmpfs."""
    write_package(tmp_path, "pkg", {"test_a.py": "def test_ok():\n    pass\n\ndef test_bad():\n    assert False\n"})
    config = write_config(tmp_path, [{"name": "pkg", "path": "pkg"}])
    config.write_text(config.read_text().replace('trunk = "main"\n', 'trunk = "main"\nmirrors = []\n'))
    git(tmp_path, "init", "-q", "-b", "main")
    commit(tmp_path, "start", {})
    state = tmp_path / ".promote"
    state.mkdir()
    with mounted(state, "400k"):
        yield tmp_path


def clear(state: Path) -> None:
    for path in state.iterdir():
        if path.is_dir():
            subprocess.run(["rm", "-rf", str(path)], check=True)
        else:
            path.unlink()


@pytest.mark.slow
@pytest.mark.parametrize("command", ["test", "audit"])
def test_a_full_state_disk_at_every_step_is_one_line_never_a_traceback(work: Path, command: str) -> None:
    state = work / ".promote"
    seen = set()
    # From no byte free to enough for the whole run: the disk runs out at a different step each time.
    for leave in (0, 4096, 8192, 16384, 32768, 65536, 163840, 393216):
        clear(state)
        fill(state, leave=leave)
        result = run(work, "-q", command)
        assert "Traceback" not in result.output and "Error:" not in result.stderr, (leave, result.output)
        if result.exit_code == 2:
            # One error line, last; before it at most the history's warning that it could not take the run.
            *warnings, line = result.stderr.splitlines()
            assert line.startswith("promote: error: "), (leave, line)
            assert all(w.startswith("promote: warning: history not recorded: ") for w in warnings), (leave, warnings)
            assert "No space left on device" in line or "disk is full" in line, (leave, line)
            if "the run's records were not stored" in line:
                # The tests ran: what they found is printed before the line that says it was not stored.
                printed = "not green" if command == "test" else "FAIL      Everything E2E Tested"
                assert printed in result.stdout, (leave, result.output)
                seen.add("printed, not stored")
            seen.add("refused")
        else:
            # Far enough for the run to finish: its report is printed and the exit code is the run's own.
            assert result.exit_code in (1, 3), (leave, result.output)
            assert (
                "pkg: test_a.py::test_bad (failed)" in result.stdout
                or "FAIL      Everything E2E Tested" in result.stdout
            )
            seen.add("reported")
    assert seen == {"refused", "reported", "printed, not stored"}


@pytest.mark.slow
def test_an_audit_whose_run_cannot_be_stored_prints_its_gates_then_one_line(
    work: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    state = work / ".promote"
    # A docs repository of its own (outside the product's, on a disk with room): --publish must leave it as it was.
    docs = tmp_path_factory.mktemp("docs")
    git(docs, "init", "-q", "-b", "main")
    commit(docs, "docs", {"docs/index.md": "# Docs\n"})
    config = work / "promote.toml"
    config.write_text(config.read_text() + f'\n[promote.docs]\nrepo = "{docs}"\npage = "docs/evidence/latest.md"\n')
    # The levels at which the tests run but their junit.xml and run.json do not fit: the roomiest that does it.
    for leave in (49152, 32768, 24576, 16384):
        clear(state)
        fill(state, leave=leave)
        code, data = run_json(work, "audit")
        if any(u["what"] == "records" for u in data["unstored"]):
            break
    else:
        pytest.fail("no level left the run's records unstored")
    jsonschema.validate(data, json.loads(files("promote.schemas").joinpath("audit.schema.json").read_text("utf-8")))
    assert code == 2
    # What the audit decided from the run in memory: its gates and verdict, the Tested gate failing.
    assert data["gates"]["tested"]["status"] == "fail"
    assert data["verdict"] == "fail" and data["pages"] is None
    assert {u["what"] for u in data["unstored"]} >= {"records", "pages"}
    assert all("No space left on device" in u["error"] or "disk" in u["error"] for u in data["unstored"])
    # Not a first run: the earlier runs could not be read, and the page says so rather than "nothing earlier".
    evidence = data["gates"]["tested"]["evidence"]
    assert any(line.endswith("not compared with earlier runs: the history could not be read") for line in evidence)

    clear(state)
    fill(state, leave=leave)
    before = docs_state(docs)
    result = run(work, "-q", "audit", "--publish")
    assert "Traceback" not in result.output and result.exit_code == 2
    assert result.stdout.startswith("audit ") and "FAIL      Everything E2E Tested" in result.stdout
    assert "\npages: not written\n" in result.stdout
    [line] = result.stderr.splitlines()
    assert line.startswith("promote: error: the run's records were not stored: cannot write "), line
    assert "junit.xml: No space left on device" in line or "run.json: No space left on device" in line
    assert "; the evidence pages were not written: cannot write " in line
    # Evidence whose run is not on disk is not published: the line says so, and the docs repository is as it was.
    assert line.endswith("; nothing was published") and docs_state(docs) == before
    assert set(UNSTORED) == set(get_args(Stored))  # every part the line can name has its words
