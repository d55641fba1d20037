"""Publishing is one commit or none: a full disk, a nested repository, two publishers at once (real git, a tmpfs)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from importlib.resources import files
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from promote.evidence.publish import publish
from tests.helpers.cli import run
from tests.helpers.docs import docs_state
from tests.helpers.gitrepos import commit, git, make_fleet
from tests.helpers.packages import write_package
from tests.helpers.tmpfs import fill, mounted


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs of its own, to fill up for real."""
    mount = tmp_path / "fs"
    mount.mkdir()
    with mounted(mount, "2m"):
        yield mount


def docs_repo(where: Path) -> Path:
    docs = where / "docs"
    docs.mkdir()
    git(docs, "init", "-q", "-b", "main")
    commit(docs, "docs", {"docs/index.md": "# Docs\n"})
    return docs


AUDIT_SCHEMA = json.loads(files("promote").joinpath("schemas/audit.schema.json").read_text("utf-8"))
PAGE = "# Evidence\n\n" + "A gate's evidence, line after line.\n" * 80


def test_a_full_disk_at_every_step_leaves_the_docs_repository_as_it_was(tmpfs: Path) -> None:
    docs = docs_repo(tmpfs)
    causes = []
    # From no byte free to enough: the disk runs out at a different step each time (page, object, index, ref).
    for leave in range(0, 64 * 1024, 4096):
        before = docs_state(docs)
        fill(tmpfs, leave=leave)
        rel = f"docs/evidence/{leave}.md"
        result = publish(docs, {rel: PAGE}, f"promote: evidence {leave}")
        if result.status == "committed":
            break
        assert result.status == "refused", result
        assert result.left_behind == ()
        assert docs_state(docs) == before, leave
        assert not (docs / "docs" / "evidence").exists()
        causes.append(result.cause or "")
    (tmpfs / "filler").unlink()
    assert result.status == "committed" and git(docs, "show", f"HEAD:{rel}") == PAGE.strip()
    assert git(docs, "status", "--porcelain", "--untracked-files=all") == ""
    assert all("space" in c.lower() or "couldn't write" in c for c in causes), causes
    # Refused at several different steps, each named: the work tree, git's objects, the index being built, the ref.
    assert len(causes) >= 4 and len({c.split(":")[0] for c in causes}) >= 3, causes


def test_audit_into_a_full_docs_disk_keeps_the_audit_and_publishes_on_the_rerun(tmp_path: Path, tmpfs: Path) -> None:
    fleet = make_fleet(tmp_path, names=("origin",))
    write_package(fleet.work, "pkg", {"test_a.py": "def test_ok():\n    pass\n"})
    docs = docs_repo(tmpfs)
    fleet.config(
        f'deployed = "main"\n[[promote.packages]]\nname = "pkg"\npath = "pkg"\n'
        f'[promote.docs]\nrepo = "{docs}"\npage = "docs/evidence/latest.md"\n'
    )
    commit(fleet.work, "docs config")
    git(fleet.work, "push", "-q", "origin", "main")
    fill(tmpfs, leave=0)
    before = docs_state(docs)

    full = run(fleet.work, "audit", "--publish", "--json")

    assert full.exit_code == 4, full.output  # every gate passes; the page did not land
    report = json.loads(full.stdout)
    jsonschema.validate(report, AUDIT_SCHEMA)
    assert {g["status"] for g in report["gates"].values()} == {"pass"}
    assert report["published"]["status"] == "refused" and report["published"]["left_behind"] == []
    # The first file it could not write on the docs disk: the note of what it was about to write, or the page.
    cause = report["published"]["cause"]
    assert cause.startswith(f"cannot write {docs}/") and cause.endswith(": No space left on device"), cause
    assert "promote: error: publish: not published (cannot write" in full.stderr
    assert docs_state(docs) == before and Path(report["pages"]["md"]).is_file()

    (tmpfs / "filler").unlink()
    again = run(fleet.work, "audit", "--publish", "--json")
    assert again.exit_code == 0, again.output
    jsonschema.validate(json.loads(again.stdout), AUDIT_SCHEMA)
    published = json.loads(again.stdout)["published"]
    assert published["status"] == "committed" and published["commit"] == git(docs, "rev-parse", "HEAD")


def test_unchanged_only_when_a_commit_holds_the_page_and_never_inside_a_nested_repository(tmp_path: Path) -> None:
    docs = docs_repo(tmp_path)
    first = publish(docs, {"docs/evidence/a.md": PAGE}, "promote: evidence a")
    assert first.status == "committed" and first.commit == git(docs, "rev-parse", "HEAD")
    same = publish(docs, {"docs/evidence/a.md": PAGE}, "promote: evidence a again")
    assert same.status == "unchanged" and same.commit == first.commit
    assert git(docs, "show", f"{same.commit}:docs/evidence/a.md") == PAGE.strip()

    # A cloned theme inside the docs repository: `git add` would add nothing there, and no commit would hold it.
    git(docs, "init", "-q", "-b", "main", "theme")
    commit(docs / "theme", "theme", {"layout.html": "<html></html>\n"})
    before = docs_state(docs)
    nested = publish(docs, {"theme/evidence/a.md": PAGE}, "promote: evidence in the theme")
    assert nested.status == "refused" and nested.commit is None
    assert f"lies inside {docs}/theme, a git repository of its own" in (nested.cause or "")
    assert docs_state(docs) == before and not (docs / "theme" / "evidence").exists()


# What both racing publishers share: their arguments, and a barrier per round (not a timetable: on a loaded
# machine a slow round would put the two out of step).
RACER = """
import json, sys, time
from pathlib import Path
from promote.evidence.publish import publish
docs, who, barrier, rounds = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3]), int(sys.argv[4])
def meet(round_):
    (barrier / f"{round_}-{who}").touch()
    while len(list(barrier.glob(f"{round_}-*"))) < 2:
        time.sleep(0.001)
"""
# One publisher: meet the other, publish one page, print what the docs repository was read back holding.
PUBLISHER = (
    RACER
    + """
for round_ in range(rounds):
    meet(round_)
    began = time.time()
    r = publish(docs, {f"docs/evidence/{round_:02d}-{who}.md": f"# {who} {round_}\\n"}, f"promote: {who} {round_}")
    print(json.dumps({"round": round_, "began": began, "status": r.status, "commit": r.commit, "cause": r.cause}))
"""
)


def race(script: str, docs: Path, tmp_path: Path, rounds: int) -> list[dict[str, Any]]:
    """Two publishers, alpha and beta, running `script` side by side; what each printed, alpha's first."""
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    publishers = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(docs), who, str(barrier), str(rounds)], stdout=subprocess.PIPE, text=True
        )
        for who in ("alpha", "beta")
    ]
    outputs = [p.communicate(timeout=300)[0] for p in publishers]
    assert [p.returncode for p in publishers] == [0, 0]
    return [json.loads(line) for out in outputs for line in out.splitlines()]


@pytest.mark.slow
def test_two_publishers_into_one_docs_repository_at_once_both_land_every_time(tmp_path: Path) -> None:
    docs = docs_repo(tmp_path)
    rounds = 20

    results = race(PUBLISHER, docs, tmp_path, rounds)
    assert len(results) == 2 * rounds
    assert [r for r in results if r["status"] != "committed"] == []
    # They really started together: in most rounds within 50 ms of each other (a late start proves nothing).
    began = {(r["round"], i // rounds): r["began"] for i, r in enumerate(results)}
    together = [n for n in range(rounds) if abs(began[(n, 0)] - began[(n, 1)]) < 0.05]
    assert len(together) >= rounds // 2, began
    # Each publisher's page is in its own commit, each commit on top of the one before: nothing lost.
    log = git(docs, "log", "--format=%s", "--first-parent").splitlines()
    assert len(log) == 1 + 2 * rounds
    assert sorted(log[:-1]) == sorted(f"promote: {w} {i}" for w in ("alpha", "beta") for i in range(rounds))
    in_tree = git(docs, "ls-tree", "-r", "--name-only", "HEAD", "docs/evidence").splitlines()
    assert in_tree == sorted(f"docs/evidence/{i:02d}-{w}.md" for i in range(rounds) for w in ("alpha", "beta"))
    assert {r["commit"] for r in results} == set(git(docs, "rev-list", "HEAD", "--max-count=40").splitlines())
    assert git(docs, "status", "--porcelain", "--untracked-files=all") == ""


def test_a_commit_that_would_undo_one_landed_meanwhile_is_not_published(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from promote.core.git import Repo
    from promote.evidence.publish import _read_back

    docs = docs_repo(tmp_path)
    before = git(docs, "rev-parse", "HEAD")
    (tmp_path / "page.md").write_text(PAGE)
    blob = git(docs, "hash-object", "-w", str(tmp_path / "page.md"))
    # Someone else's commit lands after the publisher read HEAD...
    meanwhile = commit(docs, "someone else", {"docs/other.md": "theirs\n"})
    # ...and the publisher's commit, its tree built on `before`, lands on top of it: it would undo docs/other.md.
    with monkeypatch.context() as m:
        m.setenv("GIT_INDEX_FILE", str(tmp_path / "index"))
        git(docs, "read-tree", before)
        git(docs, "update-index", "--add", "--cacheinfo", f"100644,{blob},docs/evidence/a.md")
        tree = git(docs, "write-tree")
    after = git(docs, "commit-tree", tree, "-p", meanwhile, "-m", "promote: evidence")

    result = _read_back(Repo(docs), before, after, {"docs/evidence/a.md": blob})

    assert result.status == "unverified" and result.commit == after
    assert result.cause == f"HEAD {after} also changes docs/other.md of {meanwhile}, which landed during the commit"


INDEXER = (
    RACER
    + """
from promote.config.settings import DocsConfig
from promote.evidence.audit import publish_files
config = DocsConfig(repo=docs, page="docs/evidence/{run}.md")
for round_ in range(rounds):
    meet(round_)
    run = f"2026120{round_ % 10}T00000{round_ % 10}.{who}"
    page = (f"---\\npromote_evidence: page\\npromote_run: \\"{run}\\"\\npromote_commit: \\"{'a' * 40}\\"\\n"
            "promote_date: \\"2026-12-01\\"\\n"
            f"promote_gates: tested=pass docs=pass merged=pass deployed=pass\\n---\\n\\n# {who}\\n")
    rel = f"docs/evidence/{run}.md"
    r = publish(docs, lambda: publish_files(config, rel, page), f"promote: {who} {round_}")
    print(json.dumps({"round": round_, "status": r.status, "files": list(r.files)}))
"""
)


@pytest.mark.slow
def test_two_publishers_each_index_every_page_the_other_landed(tmp_path: Path) -> None:
    # The index is read from the docs repository once the publish lock is held: a publisher that read it
    # before taking its turn would commit an index that leaves out the page landed while it waited.
    docs = docs_repo(tmp_path)
    rounds = 6

    results = race(INDEXER, docs, tmp_path, rounds)
    assert [r["status"] for r in results] == ["committed"] * 2 * rounds
    assert all("docs/evidence/index.md" in r["files"] for r in results)
    index = git(docs, "show", "HEAD:docs/evidence/index.md")
    pages = git(docs, "ls-tree", "-r", "--name-only", "HEAD", "docs/evidence").splitlines()
    assert len(pages) == 1 + 2 * rounds
    linked = [p for p in pages if p != "docs/evidence/index.md" and f"({p.rsplit('/', 1)[1]})" in index]
    assert len(linked) == 2 * rounds, index
