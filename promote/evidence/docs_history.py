"""The team's shared history: the evidence JSON pages published in the docs repository, read into a local cache.

Each published page carries its run's `outcomes` (every package's collected count, and the tests that did not
pass); `promote history --tests --from-docs` brings `.promote/docs-history.sqlite` to the pages at the docs
repository's HEAD (each page read once, by the object that holds it) and tells the stories over them, so every
machine on the same docs commit tells the same story from the same pages.
"""

from __future__ import annotations

import posixpath
import sqlite3
from dataclasses import dataclass
from typing import Any

from promote.checks.docs import index_path
from promote.config import Config
from promote.core import state
from promote.core.bounded_json import MAX_BYTES, JsonRejected
from promote.core.errors import ConfigError
from promote.core.git import Blob, Repo
from promote.core.vocab import JsonFault
from promote.evidence.docs_page import read_page
from promote.evidence.history import History, HistoryError, StoredRun, forget, store

CACHE_NAME = "docs-history.sqlite"
# Which page (by the object git holds its bytes in) the cache has read, and what it found there: a run, nothing
# (a JSON file that is not an evidence page), or why it was skipped. Keyed by object, so a page replaced under the
# same name is read again, and a page no longer at HEAD is no longer told.
PAGES = (
    "CREATE TABLE IF NOT EXISTS pages (oid TEXT PRIMARY KEY, path TEXT NOT NULL, run_id TEXT, fault TEXT, detail TEXT)"
)


def outcomes(run: StoredRun) -> dict[str, Any]:
    """What a published page needs to be a run of the shared history: the packages' counts, and the tests that did not
    pass or that no CI job runs."""
    return {
        "kind": run.kind,
        "started": run.started,
        "commit": run.commit,
        "stations": run.stations,
        "collected": run.collected,
        "ci": run.ci_read,
        "tests": [[t.package, t.nodeid, t.outcome, t.reason, t.blocker, t.verdict, t.ci]
                  for t in run.tests if t.outcome != "passed" or t.ci],
    }  # fmt: skip


@dataclass(frozen=True)
class Skipped:
    """A published page the shared history leaves out, and why (a bound its JSON broke, a field's type)."""

    path: str
    fault: JsonFault
    detail: str


def _read(repo: Repo, missing: list[Blob]) -> dict[str, StoredRun | Skipped | None]:
    """What each page of `missing` holds, every one read by one `git cat-file --batch` (none too large to read)."""
    found: dict[str, StoredRun | Skipped | None] = {
        b.oid: Skipped(b.path, "size", f"{b.size} bytes, more than {MAX_BYTES}") for b in missing if b.size > MAX_BYTES
    }
    contents = repo.read_blobs([b.oid for b in missing if b.oid not in found])
    for b in missing:
        if b.oid not in found:
            try:
                found[b.oid] = read_page(contents.get(b.oid, b""), max_bytes=MAX_BYTES)
            except JsonRejected as e:
                found[b.oid] = Skipped(b.path, e.kind, str(e))
    return found


def _sync(db: sqlite3.Connection, repo: Repo, listed: list[Blob]) -> None:
    """Bring the cache to `listed` (the pages at HEAD), inside one transaction: readers see it before or after."""
    if not db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'pages'").fetchone():
        # A cache made before pages were kept by object: which page its runs came from is unknown, so none is kept.
        forget(db, [str(r[0]) for r in db.execute("SELECT id FROM runs")])
        db.execute(PAGES)
    known = {oid: run_id for oid, run_id in db.execute("SELECT oid, run_id FROM pages")}
    at_head = {b.oid: b for b in listed}
    read = _read(repo, [b for oid, b in at_head.items() if oid not in known])
    gone = [oid for oid in known if oid not in at_head]
    kept = {run_id for oid, run_id in known.items() if oid in at_head} | {
        r.run_id for r in read.values() if isinstance(r, StoredRun)
    }
    forget(db, sorted({known[oid] for oid in gone if known[oid] is not None} - kept))
    db.executemany("DELETE FROM pages WHERE oid = ?", [(oid,) for oid in gone])
    for oid, page in read.items():
        if isinstance(page, StoredRun):
            store(db, page)
        run_id = page.run_id if isinstance(page, StoredRun) else None
        fault, detail = (page.fault, page.detail) if isinstance(page, Skipped) else (None, None)
        db.execute(
            "INSERT OR REPLACE INTO pages VALUES (?, ?, ?, ?, ?)", (oid, at_head[oid].path, run_id, fault, detail)
        )


def skipped(history: History) -> list[Skipped]:
    """The pages at HEAD that the cache leaves out, by path."""
    rows = history.read("SELECT path, fault, detail FROM pages WHERE fault IS NOT NULL ORDER BY path")
    return [Skipped(path, fault, detail) for path, fault, detail in rows]


def cache(config: Config) -> History:
    """The local cache of the published pages, brought to the docs repository's HEAD and held there: every read of
    it until it is closed sees the pages of one moment, whoever brings it up to date meanwhile."""
    if config.docs is None:
        raise ConfigError(f"{config.path}: --from-docs needs [{config.prefix}.docs] naming the docs repository")
    history = History(state.state_dir(config.root), name=CACHE_NAME)
    try:
        repo = Repo(config.docs.repo)
        head = repo.resolve("HEAD")
        folder = posixpath.dirname(index_path(config.docs.page))
        listed = [b for b in repo.blobs(head, folder) if b.path.endswith(".json")] if head else []
        try:
            history.write(lambda db: _sync(db, repo, listed))
            history.snapshot()
        except sqlite3.Error as e:  # a full disk, another promote holding the cache past the wait
            raise HistoryError(f"{history.path}: cannot bring the cache up to date: {e}") from None
    except BaseException:
        history.close()
        raise
    return history
