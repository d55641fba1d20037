"""Run history in SQLite under `.promote/`: every test and audit run, its tests, findings and gates."""

from __future__ import annotations

import json
import os
import sqlite3
import sys
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypeVar

from promote.core import state
from promote.core.errors import PromoteError
from promote.core.findings import Finding
from promote.core.redact import current as current_redactor
from promote.evidence.history_schema import MIGRATIONS, busy_timeout, schema_intact, wal

DB_NAME = "history.sqlite"
# A run of a package's tests with an acceleration's switch set one way: kept, never compared with the package's own.
SWITCH_KIND = "accel-switch"
T = TypeVar("T")
# SQLite's primary result codes SQLITE_CORRUPT and SQLITE_NOTADB (the sqlite3 module's names are not typed).
_DAMAGED = (11, 26)


class HistoryError(PromoteError):
    """The history database cannot be read or is newer than this promote."""


def damaged(e: Exception) -> bool:
    """Whether SQLite found the file damaged or not a database at all (not busy, full or read-only)."""
    # Bytes of text changed: in a cell (sqlite3's own complaint, with no code), or in the schema, whose message
    # sqlite3 then fails to decode.
    if isinstance(e, UnicodeDecodeError) or "Could not decode to UTF-8" in str(e):
        return True
    code = getattr(e, "sqlite_errorcode", None)  # Python 3.11 on; before it, SQLite's message is all there is
    if code is not None:
        return code in _DAMAGED
    return isinstance(e, sqlite3.DatabaseError) and ("malformed" in str(e) or "not a database" in str(e))


@dataclass(frozen=True)
class TestOutcome:
    """One test's outcome in one stored run."""

    __test__ = False  # a data class, not something for pytest to collect

    package: str
    nodeid: str
    outcome: str
    duration_s: float = 0.0
    station: str = ""
    reason: str | None = None  # why it did not run: a skip's reason, or the requirements it lacked
    blocker: str | None = None  # for a blocked test, the check that blocked it (impossible-requirement, ...)
    verdict: str | None = None  # for a red test, what its reruns showed (genuine, flaky, ...)
    ci: str | None = None  # why no CI job runs it, when the run read CI (`StoredRun.ci_read`) and none does


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
    interrupted: bool = False  # stopped by a signal before it finished: its tests are what had finished
    ci_read: bool = False  # the run read the CI workflows: a test whose `ci` is None is run by some CI job

    @property
    def packages(self) -> set[str]:
        return {t.package for t in self.tests}

    def count(self, outcome: str) -> int:
        return sum(1 for t in self.tests if t.outcome == outcome)

    @property
    def collected(self) -> dict[str, int]:
        """How many tests each package collected (every outcome)."""
        return dict(Counter(t.package for t in self.tests))


# An outcomes row (`o`) as a TestOutcome is read, after its package and id: every reader selects these, then
# makes the outcome with `outcome_from`, so a column added to the row is added once.
OUTCOME_COLUMNS = "o.outcome, o.duration_us, o.station, o.reason, o.blocker, o.verdict, o.ci"


def outcome_from(package: str, nodeid: str, row: Sequence[Any], stations: dict[str, str]) -> TestOutcome:
    """The TestOutcome of OUTCOME_COLUMNS as read; a row keeps its station only when it is not its package's."""
    outcome, us, station, reason, blocker, verdict, ci = row
    where = stations.get(package, "") if station is None else station
    return TestOutcome(package, nodeid, outcome, us / 1e6, where, reason, blocker, verdict, ci)


def _redacted(run: StoredRun) -> StoredRun:
    """`run` with every secret (promote.core.redact) taken out of its text: the history outlives the run."""
    r = current_redactor()
    return replace(
        run,
        command=r(run.command),
        tests=tuple(
            replace(
                t,
                nodeid=r(t.nodeid),
                reason=None if t.reason is None else r(t.reason),
                ci=None if t.ci is None else r(t.ci),
            )
            for t in run.tests
        ),
        findings=tuple(
            replace(f, subject=r(f.subject), message=r(f.message), cause=None if f.cause is None else r(f.cause))
            for f in run.findings
        ),
    )


class History:
    """The history database of one repository (`.promote/history.sqlite`)."""

    def __init__(self, state_dir: Path, *, name: str = DB_NAME) -> None:
        self.path = state_dir / name
        try:
            self._db = self._open()
        except (sqlite3.DatabaseError, UnicodeDecodeError) as e:
            if not damaged(e) or not self.path.exists():
                raise HistoryError(f"{self.path}: cannot open the history database: {e}") from None
            self._db = self._afresh(e)

    def _open(self) -> sqlite3.Connection:
        # isolation_level=None: transactions are begun here, explicitly (BEGIN IMMEDIATE), not by the module.
        # Created 0600 before SQLite opens it (its -wal and -shm files take the same mode): runs may hold secrets.
        try:
            os.close(state.private_file(self.path, os.O_RDWR))
        except OSError as e:  # a read-only or full `.promote`: one line, as SQLite's own refusals are
            raise HistoryError(f"{self.path}: cannot open the history database: {e.strerror or e}") from None
        db = sqlite3.connect(self.path, timeout=busy_timeout(), isolation_level=None)
        try:
            self._migrate(db)
            if not schema_intact(db):
                raise sqlite3.DatabaseError("database disk image is malformed: a table or column of its schema is gone")
            wal(db)
        except BaseException:
            db.close()
            raise
        return db

    def _afresh(self, e: Exception) -> sqlite3.Connection:
        """A new, empty database in place of the damaged one, which is kept beside it for whoever wants to look.

        Neither this run's pages nor its exit code may depend on an old file, nor every later run on someone
        deleting it by hand: damage found on opening and damage found by a later read or write go the same way.
        """
        try:
            aside = self._move_aside()
        except OSError as refused:
            raise HistoryError(f"{self.path}: damaged ({e}) and cannot be moved aside: {refused.strerror}") from None
        print(f"promote: warning: {self.path} is not a usable database ({e}); moved to {aside.name}, "
              "starting a new history", file=sys.stderr, flush=True)  # fmt: skip
        try:
            return self._open()
        except (sqlite3.DatabaseError, UnicodeDecodeError) as again:
            raise HistoryError(f"{self.path}: cannot open the history database: {again}") from None

    def _guarded(self, op: Callable[[], T]) -> T:
        """`op()`; when SQLite finds the file damaged, `op()` again on a new history (see `_afresh`)."""
        try:
            return op()
        except (sqlite3.DatabaseError, UnicodeDecodeError) as e:
            if not damaged(e):
                raise
            self._db.close()
            self._db = self._afresh(e)
        return op()

    def _move_aside(self) -> Path:
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
        aside = self.path.with_name(f"{self.path.name}.corrupt-{stamp}")
        self.path.rename(aside)
        for suffix in ("-wal", "-shm"):
            extra = self.path.with_name(self.path.name + suffix)
            if extra.exists():
                extra.rename(aside.with_name(aside.name + suffix))
        return aside

    def _migrate(self, db: sqlite3.Connection) -> None:
        # One transaction, taken for writing before user_version is read: a second promote creating the same
        # database at the same moment waits here, then finds the schema made and has nothing to do.
        db.execute("BEGIN IMMEDIATE")
        try:
            version = int(db.execute("PRAGMA user_version").fetchone()[0])
            if version > len(MIGRATIONS):
                raise HistoryError(
                    f"{self.path}: written by a newer promote (schema {version}, this one knows {len(MIGRATIONS)})"
                )
            for script in MIGRATIONS[version:]:
                for statement in script.split(";"):
                    if statement.strip():
                        db.execute(statement)
            if version < len(MIGRATIONS):
                db.execute(f"PRAGMA user_version = {len(MIGRATIONS)}")
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise

    def close(self) -> None:
        self._db.close()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield self._db
        except BaseException:
            if self._db.in_transaction:  # SQLite may have rolled back already (a damaged page, a full disk)
                self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def record(self, run: StoredRun, *, keep: int | None = None) -> None:
        """Store one run with its tests and findings (replacing a run of the same id), secrets redacted.

        With `keep`, the runs beyond the newest `keep` are pruned in the same transaction: an interruption leaves
        the database as it was or with the run stored and the old ones gone, never half of either.
        """
        self.write(lambda db: store(db, run, keep=keep))

    def write(self, change: Callable[[sqlite3.Connection], None]) -> None:
        """`change` in one transaction taken for writing: all of it lands, or none (with `store`, `forget`)."""

        def once() -> None:
            with self._tx() as db:
                change(db)

        self._guarded(once)

    def snapshot(self) -> None:
        """Read from now on as the database is now: one read transaction until `close`, whoever writes meanwhile."""

        def begin() -> None:
            self._db.execute("BEGIN")
            self._db.execute("SELECT COUNT(*) FROM runs").fetchone()  # a read transaction's snapshot starts here

        self._guarded(begin)

    def read(self, sql: str, params: tuple[object, ...] = ()) -> list[tuple[Any, ...]]:
        """Rows of one query (for the readers of the history beside this module: stories, counts)."""
        return self._guarded(lambda: self._db.execute(sql, params).fetchall())

    def many(self, sql: str, rows: list[tuple[object, ...]]) -> None:
        """One statement for each of `rows` (a temporary table's rows: nothing of the history is written)."""
        self._guarded(lambda: self._db.executemany(sql, rows))

    def run_ids(self, limit: int | None = None) -> list[str]:
        """Run ids, newest first."""
        rows = self.read(
            "SELECT id FROM runs ORDER BY started DESC, id DESC LIMIT ?", (-1 if limit is None else limit,)
        )
        return [str(r[0]) for r in rows]

    def get(self, run_id: str) -> StoredRun:
        return self._guarded(lambda: self._decoded(run_id))

    def _decoded(self, run_id: str) -> StoredRun:
        try:
            return self._get(run_id)
        except (ValueError, TypeError, AttributeError) as e:
            # A stored value of the wrong kind (JSON cut short, a number where text was): only damage writes one.
            raise sqlite3.DatabaseError(f"database disk image is malformed: run {run_id!r}: {e}") from None

    def _get(self, run_id: str) -> StoredRun:
        row = self._db.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
        if row is None:
            known = ", ".join(self.run_ids(5)) or "none yet"
            raise HistoryError(f"no run {run_id!r} in {self.path} (recent: {known})")
        stations = json.loads(row[7])
        tests = [
            outcome_from(r[0], r[1], r[2:], stations)
            for r in self._db.execute(
                f"SELECT i.package, i.nodeid, {OUTCOME_COLUMNS} FROM outcomes AS o JOIN test_ids AS i ON i.id = o.test"
                " WHERE o.run = ? ORDER BY o.pos",
                (row[10],),
            )
        ]
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
            stations=stations,
            gates=json.loads(row[8]),
            tests=tuple(tests),
            findings=tuple(Finding(*f) for f in findings),
            interrupted=bool(row[9]),
            ci_read=bool(row[11]),
        )

    def previous(self, run: StoredRun) -> StoredRun | None:
        """The newest earlier run that is comparable: it ran every package `run` ran (a `--package` run is not).

        A full run after a `--package` run compares with the last full one; a `--package` run compares with the last
        run that included its package. Earlier means before `run` in (started, id) order, of any kind but an
        acceleration's switch runs (its env set one way); `run` need not be stored yet, and its packages are
        taken from `run` itself, not from the database.
        """
        packages = sorted(run.packages)
        if not packages:
            return None
        # Decided in SQL so that only the one run found is loaded: reading each earlier run in full until one
        # matched made `promote history` quadratic in the size of the history.
        rows = self.read(
            "SELECT r.id FROM runs AS r WHERE (r.started, r.id) < (?, ?) AND r.interrupted = 0 AND r.kind != ?"
            " AND (SELECT COUNT(DISTINCT i.package) FROM outcomes AS o JOIN test_ids AS i ON i.id = o.test"
            f" WHERE o.run = r.seq AND i.package IN ({', '.join('?' * len(packages))})) = ?"
            " ORDER BY r.started DESC, r.id DESC LIMIT 1",
            (run.started, run.run_id, SWITCH_KIND, *packages, len(packages)),
        )
        return self.get(str(rows[0][0])) if rows else None


def store(db: sqlite3.Connection, run: StoredRun, *, keep: int | None = None) -> None:
    """Store `run`, secrets redacted, inside a transaction of `History.write` (see `History.record`)."""
    run = _redacted(run)
    _delete(db, "SELECT seq FROM runs WHERE id = ?", (run.run_id,))
    seq = db.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM runs").fetchone()[0]
    db.execute(
        "INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            run.run_id, run.kind, run.started, run.finished, run.commit, run.command,
            json.dumps(run.mirrors), json.dumps(run.stations), json.dumps(run.gates), int(run.interrupted), seq,
            int(run.ci_read),
        ),
    )  # fmt: skip
    ids = _test_ids(db, run.tests)
    db.executemany(
        "UPDATE test_ids SET last = ? WHERE id = ?",
        [(seq, i) for i in {ids[(t.package, t.nodeid)] for t in run.tests}],
    )
    db.executemany(
        "INSERT INTO outcomes VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [(seq, ids[(t.package, t.nodeid)], pos, t.outcome, round(t.duration_s * 1e6),
          None if t.station == run.stations.get(t.package) else t.station, t.reason, t.blocker, t.verdict, t.ci)
         for pos, t in enumerate(run.tests)],
    )  # fmt: skip
    db.executemany(
        "INSERT INTO findings VALUES (?, ?, ?, ?, ?, ?)",
        [(run.run_id, f.check, f.severity, f.subject, f.message, f.cause) for f in run.findings],
    )
    if keep is not None:
        _delete(db, "SELECT seq FROM runs ORDER BY started DESC, id DESC LIMIT -1 OFFSET ?", (keep,))
        # Every id a kept run has was last seen in that run or later: these are in none.
        db.execute("DELETE FROM test_ids WHERE last < (SELECT MIN(seq) FROM runs)")


def forget(db: sqlite3.Connection, run_ids: list[str]) -> None:
    """Delete the runs `run_ids` and the test ids no run has any more, inside a transaction of `History.write`."""
    for run_id in run_ids:
        _delete(db, "SELECT seq FROM runs WHERE id = ?", (run_id,))
    db.execute("DELETE FROM test_ids WHERE id NOT IN (SELECT test FROM outcomes)")


def _delete(db: sqlite3.Connection, runs: str, params: tuple[object, ...]) -> None:
    """Delete the runs whose `seq` the query `runs` selects, with their tests and findings (inside a transaction)."""
    db.execute(f"DELETE FROM outcomes WHERE run IN ({runs})", params)
    db.execute(f"DELETE FROM findings WHERE run_id IN (SELECT id FROM runs WHERE seq IN ({runs}))", params)
    db.execute(f"DELETE FROM runs WHERE seq IN ({runs})", params)


def _test_ids(db: sqlite3.Connection, tests: tuple[TestOutcome, ...]) -> dict[tuple[str, str], int]:
    """The number of each (package, test id) of `tests`, numbering the ones never seen before."""
    db.executemany(
        "INSERT OR IGNORE INTO test_ids (package, nodeid) VALUES (?, ?)", [(t.package, t.nodeid) for t in tests]
    )
    ids: dict[tuple[str, str], int] = {}
    for package in {t.package for t in tests}:
        for id_, nodeid in db.execute("SELECT id, nodeid FROM test_ids WHERE package = ?", (package,)):
            ids[(package, nodeid)] = id_
    return ids
