"""Run history in SQLite under `.promote/`: every test and audit run, its tests, findings and gates."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from promote.errors import PromoteError
from promote.findings import Finding

DB_NAME = "history.sqlite"

# Versioned from the first release: `PRAGMA user_version` is the number of scripts applied.
MIGRATIONS = (
    """
    CREATE TABLE runs (
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
    CREATE TABLE tests (
        run_id TEXT NOT NULL REFERENCES runs(id),
        package TEXT NOT NULL,
        nodeid TEXT NOT NULL,
        outcome TEXT NOT NULL,
        duration_s REAL NOT NULL,
        station TEXT NOT NULL,
        PRIMARY KEY (run_id, package, nodeid)
    );
    CREATE TABLE findings (
        run_id TEXT NOT NULL REFERENCES runs(id),
        check_name TEXT NOT NULL,
        severity TEXT NOT NULL,
        subject TEXT NOT NULL,
        message TEXT NOT NULL,
        cause TEXT
    );
    CREATE INDEX runs_started ON runs(started);
    """,
    # `previous()` walks runs newest-first in (started, id) order and stops at the first match; with `id` in the
    # index that walk needs no sort and no table reads. The old index is a prefix of the new one, so it only cost
    # writes. IF [NOT] EXISTS because executescript autocommits each statement: a migration interrupted before
    # user_version was bumped must be able to run again.
    """
    CREATE INDEX IF NOT EXISTS runs_started_id ON runs(started, id);
    DROP INDEX IF EXISTS runs_started;
    """,
)


class HistoryError(PromoteError):
    """The history database cannot be read or is newer than this promote."""


@dataclass(frozen=True)
class TestOutcome:
    """One test's outcome in one stored run."""

    __test__ = False  # a data class, not something for pytest to collect

    package: str
    nodeid: str
    outcome: str
    duration_s: float = 0.0
    station: str = ""


@dataclass(frozen=True)
class StoredRun:
    """A run as the history keeps it."""

    run_id: str
    kind: str
    started: str
    finished: str
    commit: str | None
    command: str
    mirrors: dict[str, str | None] = field(default_factory=dict)
    stations: dict[str, str] = field(default_factory=dict)
    gates: dict[str, str] = field(default_factory=dict)
    tests: tuple[TestOutcome, ...] = ()
    findings: tuple[Finding, ...] = ()

    @property
    def packages(self) -> set[str]:
        return {t.package for t in self.tests}

    def count(self, outcome: str) -> int:
        return sum(1 for t in self.tests if t.outcome == outcome)


class History:
    """The history database of one repository (`.promote/history.sqlite`)."""

    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / DB_NAME
        try:
            self._db = sqlite3.connect(self.path)
        except sqlite3.Error as e:
            raise HistoryError(f"{self.path}: cannot open the history database: {e}") from None
        self._migrate()

    def _migrate(self) -> None:
        version = int(self._db.execute("PRAGMA user_version").fetchone()[0])
        if version > len(MIGRATIONS):
            raise HistoryError(
                f"{self.path}: written by a newer promote (schema {version}, this one knows {len(MIGRATIONS)})"
            )
        for number, script in enumerate(MIGRATIONS[version:], start=version + 1):
            with self._db:
                self._db.executescript(script)
                self._db.execute(f"PRAGMA user_version = {number}")

    def close(self) -> None:
        self._db.close()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._db:
            yield self._db

    def record(self, run: StoredRun) -> None:
        """Store one run with its tests and findings (replacing a run of the same id)."""
        with self._tx() as db:
            for table, key in (("tests", "run_id"), ("findings", "run_id"), ("runs", "id")):
                db.execute(f"DELETE FROM {table} WHERE {key} = ?", (run.run_id,))
            db.execute(
                "INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    run.run_id, run.kind, run.started, run.finished, run.commit, run.command,
                    json.dumps(run.mirrors), json.dumps(run.stations), json.dumps(run.gates),
                ),
            )  # fmt: skip
            db.executemany(
                "INSERT INTO tests VALUES (?, ?, ?, ?, ?, ?)",
                [(run.run_id, t.package, t.nodeid, t.outcome, t.duration_s, t.station) for t in run.tests],
            )
            db.executemany(
                "INSERT INTO findings VALUES (?, ?, ?, ?, ?, ?)",
                [(run.run_id, f.check, f.severity, f.subject, f.message, f.cause) for f in run.findings],
            )

    def run_ids(self, limit: int | None = None) -> list[str]:
        """Run ids, newest first."""
        rows = self._db.execute(
            "SELECT id FROM runs ORDER BY started DESC, id DESC LIMIT ?", (-1 if limit is None else limit,)
        ).fetchall()
        return [str(r[0]) for r in rows]

    def get(self, run_id: str) -> StoredRun:
        row = self._db.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
        if row is None:
            known = ", ".join(self.run_ids(5)) or "none yet"
            raise HistoryError(f"no run {run_id!r} in {self.path} (recent: {known})")
        tests = self._db.execute(
            "SELECT package, nodeid, outcome, duration_s, station FROM tests WHERE run_id = ? ORDER BY rowid",
            (run_id,),
        ).fetchall()
        findings = self._db.execute(
            "SELECT check_name, severity, subject, message, cause FROM findings WHERE run_id = ? ORDER BY rowid",
            (run_id,),
        ).fetchall()
        return StoredRun(
            run_id=row[0],
            kind=row[1],
            started=row[2],
            finished=row[3],
            commit=row[4],
            command=row[5],
            mirrors=json.loads(row[6]),
            stations=json.loads(row[7]),
            gates=json.loads(row[8]),
            tests=tuple(TestOutcome(*t) for t in tests),
            findings=tuple(Finding(*f) for f in findings),
        )

    def previous(self, run: StoredRun) -> StoredRun | None:
        """The newest earlier run that is comparable: it ran at least one of the same packages.

        Earlier means before `run` in (started, id) order, of any kind; `run` need not be stored yet, and its
        packages are taken from `run` itself, not from the database.
        """
        packages = sorted(run.packages)
        if not packages:
            return None
        # Decided in SQL so that only the one run found is loaded: reading each earlier run in full until one
        # matched made `promote history` quadratic in the size of the history.
        row = self._db.execute(
            "SELECT r.id FROM runs AS r WHERE (r.started, r.id) < (?, ?)"
            " AND EXISTS (SELECT 1 FROM tests AS t WHERE t.run_id = r.id"
            f" AND t.package IN ({', '.join('?' * len(packages))}))"
            " ORDER BY r.started DESC, r.id DESC LIMIT 1",
            (run.started, run.run_id, *packages),
        ).fetchone()
        return None if row is None else self.get(str(row[0]))
