"""How `SqliteRunStore` talks to its file: WAL on open, one write transaction at a time,
and SQLite's errors as the store's (`StoreError`, `StoreCorrupt`)."""

from __future__ import annotations

import sqlite3
import threading
import time
from contextlib import suppress

from helikon.durable.records import StoreCorrupt, StoreError


class Transaction:
    """`with store._write() as db`: the store's lock and one write transaction, taken at
    once (`BEGIN IMMEDIATE`), committed, or rolled back when the block raises. SQLite's
    errors come out as `StoreError` naming SQLite's reason (a full disk, a busy file), with
    the error as its cause: a failed `COMMIT` is rolled back, and a statement that failed
    may have rolled the transaction back itself, so it is rolled back only while it is
    open (else "cannot rollback" would hide the reason). A class, not a `@contextmanager`
    generator: every record and result goes through one, and the generator's machinery
    costs several calls more on each side."""

    __slots__ = ("_db", "_lock", "_path")

    def __init__(self, db: sqlite3.Connection, lock: threading.RLock, path: str) -> None:
        self._db, self._lock, self._path = db, lock, path

    def __enter__(self) -> sqlite3.Connection:
        self._lock.acquire()
        try:
            self._db.execute("BEGIN IMMEDIATE")
        except BaseException as exc:
            self._lock.release()
            if isinstance(exc, sqlite3.Error):
                raise failed(self._path, exc) from exc
            raise
        return self._db

    def __exit__(self, kind: type[BaseException] | None, error: object, _: object) -> None:
        try:
            if kind is None:
                _commit(self._db)
            else:
                _roll_back(self._db)
        except sqlite3.Error as exc:
            raise failed(self._path, exc) from exc
        finally:
            self._lock.release()
        if isinstance(error, sqlite3.Error):
            raise failed(self._path, error) from error


def _commit(db: sqlite3.Connection) -> None:
    """COMMIT; one that fails (a full disk) is rolled back, and raises."""
    try:
        db.execute("COMMIT")
    except sqlite3.Error:
        _roll_back(db)
        raise


def _roll_back(db: sqlite3.Connection) -> None:
    """ROLLBACK the transaction, if a failed statement did not end it already; a rollback
    that fails too is left to the error being raised (it says why the write failed)."""
    if db.in_transaction:
        with suppress(sqlite3.Error):
            db.execute("ROLLBACK")


def failed(path: str, exc: sqlite3.Error, doing: str = "write") -> StoreError:
    """SQLite's error as the store's, in one line: SQLite's reason and code. Only a file
    SQLite itself finds damaged is `StoreCorrupt`; a busy file, a failed read or write is
    not (the rows that do not check out are, as `rows` reads them)."""
    name = getattr(exc, "sqlite_errorname", None) or type(exc).__name__
    what = "is busy" if name in ("SQLITE_BUSY", "SQLITE_LOCKED") else f"cannot {doing}"
    kind = StoreCorrupt if name in ("SQLITE_CORRUPT", "SQLITE_NOTADB") else StoreError
    return kind(f"the run store {path} {what}: {exc} ({name})")


def to_wal(db: sqlite3.Connection, busy_timeout: float) -> None:
    """Put the database in WAL mode, waiting up to `busy_timeout` for other connections.

    On a new file, connections opening it at once can deadlock on the switch from the
    rollback journal: SQLite then answers "database is locked" at once, without waiting
    (its busy handler is not called for a deadlock), so the switch is tried again here.
    """
    deadline = time.monotonic() + busy_timeout
    while True:
        try:
            db.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
            time.sleep(0.005)
