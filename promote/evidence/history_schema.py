"""The history database's schema, as numbered migrations, and how a connection waits for another promote."""

from __future__ import annotations

import os
import sqlite3
import time

# Versioned from the first release: `PRAGMA user_version` is the number of scripts applied.
MIGRATIONS = (
    """
    CREATE TABLE IF NOT EXISTS runs (
        id TEXT PRIMARY KEY,
        kind TEXT NOT NULL,
        started TEXT NOT NULL,
        finished TEXT NOT NULL,
        commit_sha TEXT,
        command TEXT NOT NULL,
        mirrors TEXT NOT NULL,
        stations TEXT NOT NULL,
        gates TEXT NOT NULL
    );
    CREATE TABLE IF NOT EXISTS tests (
        run_id TEXT NOT NULL REFERENCES runs(id),
        package TEXT NOT NULL,
        nodeid TEXT NOT NULL,
        outcome TEXT NOT NULL,
        duration_s REAL NOT NULL,
        station TEXT NOT NULL,
        PRIMARY KEY (run_id, package, nodeid)
    );
    CREATE TABLE IF NOT EXISTS findings (
        run_id TEXT NOT NULL REFERENCES runs(id),
        check_name TEXT NOT NULL,
        severity TEXT NOT NULL,
        subject TEXT NOT NULL,
        message TEXT NOT NULL,
        cause TEXT
    );
    CREATE INDEX IF NOT EXISTS runs_started ON runs(started);
    """,
    # `previous()` walks runs newest-first in (started, id) order and stops at the first match; with `id` in the
    # index that walk needs no sort and no table reads. The old index is a prefix of the new one, so it only cost
    # writes. IF [NOT] EXISTS because a database written by an older promote (whose executescript committed each
    # statement) may hold a migration interrupted before user_version was bumped.
    """
    CREATE INDEX IF NOT EXISTS runs_started_id ON runs(started, id);
    DROP INDEX IF EXISTS runs_started;
    """,
    # A run stopped by a signal is kept, marked, rather than missing from the history.
    """
    ALTER TABLE runs ADD COLUMN interrupted INTEGER NOT NULL DEFAULT 0;
    """,
    # A year of nightly runs of a 10,000-test suite is millions of rows: each test's package and id are kept once
    # (`test_ids`), a run is its number (`runs.seq`, never reused), and a row keeps its station only when it is
    # not its package's in `runs.stations`, its duration in whole microseconds. A row also keeps what a test's
    # story needs beyond its outcome: why it did not run (a skip's reason, the requirements it lacked), the check
    # that blocked it (impossible-requirement: no station has what it needs), and what its reruns showed.
    """
    ALTER TABLE runs ADD COLUMN seq INTEGER;
    UPDATE runs SET seq = rowid;
    CREATE UNIQUE INDEX runs_seq ON runs(seq);
    CREATE TABLE test_ids (
        id INTEGER PRIMARY KEY,
        package TEXT NOT NULL,
        nodeid TEXT NOT NULL,
        UNIQUE (package, nodeid)
    );
    INSERT INTO test_ids (package, nodeid) SELECT DISTINCT package, nodeid FROM tests;
    CREATE TABLE outcomes (
        run INTEGER NOT NULL,
        test INTEGER NOT NULL,
        pos INTEGER NOT NULL,
        outcome TEXT NOT NULL,
        duration_us INTEGER NOT NULL,
        station TEXT,
        reason TEXT,
        blocker TEXT,
        verdict TEXT,
        PRIMARY KEY (run, test)
    ) WITHOUT ROWID;
    INSERT INTO outcomes
        SELECT r.seq, i.id, t.rowid, t.outcome, CAST(ROUND(t.duration_s * 1000000) AS INTEGER), t.station,
               NULL, NULL, NULL
        FROM tests AS t JOIN runs AS r ON r.id = t.run_id JOIN test_ids AS i ON i.package = t.package
             AND i.nodeid = t.nodeid;
    DROP TABLE tests;
    """,
    # What CI does with each test is part of its story: a test no CI job runs never does its job at the merge,
    # however often it passes here. `runs.ci` says the run read the CI workflows (an audit); a row's `ci` is why no
    # job runs the test (NULL: a job does, or the run did not read CI).
    """
    ALTER TABLE runs ADD COLUMN ci INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE outcomes ADD COLUMN ci TEXT;
    """,
    # `test_ids.last` is the newest run that has the test: an id no kept run has is pruned with the runs (ids that
    # change every run, a parameter drawn at random, would otherwise grow the table for ever), found without an
    # index on `outcomes.test`.
    """
    ALTER TABLE test_ids ADD COLUMN last INTEGER NOT NULL DEFAULT 0;
    CREATE TEMP TABLE last_runs AS SELECT test, MAX(run) AS last FROM outcomes GROUP BY test;
    CREATE INDEX temp.last_runs_test ON last_runs(test);
    UPDATE test_ids SET last = COALESCE((SELECT l.last FROM last_runs AS l WHERE l.test = test_ids.id), 0);
    DROP TABLE temp.last_runs;
    """,
)


# How long a writer waits for another promote holding the database (two first uses at once, a test run and an
# audit finishing together) before giving up.
BUSY_TIMEOUT_S = 30.0


def busy_timeout() -> float:
    """BUSY_TIMEOUT_S, or PROMOTE_LOCK_WAIT_S when set: the wait for another promote, whatever it holds."""
    if "PROMOTE_LOCK_WAIT_S" in os.environ:
        from promote.core.lock import wait_default

        return wait_default()
    return BUSY_TIMEOUT_S


def wal(db: sqlite3.Connection) -> None:
    """Switch to write-ahead logging (readers never wait for a writer), waiting out another promote doing so."""
    # Changing the journal mode needs the database to itself, and SQLite answers "locked" at once rather than
    # calling the busy handler when two connections both try: so it is retried here, within the busy timeout.
    deadline = time.monotonic() + busy_timeout()
    while True:
        try:
            db.execute("PRAGMA journal_mode=WAL").fetchone()
            return
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def _columns(db: sqlite3.Connection) -> dict[str, set[str]]:
    tables = [str(r[0]) for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    return {t: {str(c[1]) for c in db.execute("SELECT * FROM pragma_table_info(?)", (t,))} for t in tables}


_EXPECTED: dict[str, set[str]] = {}


def schema_intact(db: sqlite3.Connection) -> bool:
    """Whether every table and column the migrations make is there: a damaged file can keep its `user_version`
    while a changed byte renamed a column, and every later read would fail on it."""
    if not _EXPECTED:
        fresh = sqlite3.connect(":memory:")
        for script in MIGRATIONS:
            fresh.executescript(script)
        _EXPECTED.update(_columns(fresh))
        fresh.close()
    found = _columns(db)
    return all(columns <= found.get(table, set()) for table, columns in _EXPECTED.items())
