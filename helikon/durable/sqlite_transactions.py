"""How `SqliteRunStore` talks to its file: WAL on open, its clock, one transaction at a
time (`Transaction`, the store's `sql_dialect.Db`), and SQLite's errors as the store's
(`StoreError`, `StoreCorrupt`)."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterable
from contextlib import suppress
from typing import Any

from helikon.durable.records import StoreCorrupt, StoreError
from helikon.durable.sql_dialect import Args


class Transaction:
    """`async with store._begin()`, on the store's writer thread: one transaction, a write
    one taken at once (`BEGIN IMMEDIATE`), committed, or rolled back when the block raises.
    SQLite's errors come out as `StoreError` naming SQLite's reason (a full disk, a busy
    file), with the error as its cause: a failed `COMMIT` is rolled back, and a statement
    that failed may have rolled the transaction back itself, so it is rolled back only while
    it is open (else "cannot rollback" would hide the reason). A class, not a
    `@contextmanager` generator: every record and result goes through one, and the
    generator's machinery costs several calls more on each side. Its statements are
    `sql_dialect.Db`'s, run at once (they never wait on a socket)."""

    __slots__ = ("_db", "_doing", "_path")

    def __init__(self, db: sqlite3.Connection, path: str, *, read_only: bool = False) -> None:
        self._db, self._path = db, path
        self._doing = "be read" if read_only else "write"

    def __enter__(self) -> sqlite3.Connection:
        try:
            self._db.execute("BEGIN" if self._doing == "be read" else "BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise failed(self._path, exc, self._doing) from exc
        return self._db

    def __exit__(self, kind: type[BaseException] | None, error: object, _: object) -> None:
        try:
            if kind is None:
                _commit(self._db)
            else:
                _roll_back(self._db)
        except sqlite3.Error as exc:
            raise failed(self._path, exc, self._doing) from exc
        if isinstance(error, sqlite3.Error):
            raise failed(self._path, error, self._doing) from error

    async def __aenter__(self) -> Transaction:
        self.__enter__()
        return self

    async def __aexit__(self, kind: type[BaseException] | None, error: object, _: object) -> None:
        self.__exit__(kind, error, _)

    async def run(self, query: str, args: Args = ()) -> int:
        return self._db.execute(query, args).rowcount

    async def one(self, query: str, args: Args = ()) -> Any:
        return self._db.execute(query, args).fetchone()

    async def all(self, query: str, args: Args = ()) -> list[Any]:
        return self._db.execute(query, args).fetchall()

    async def many(self, query: str, args: Iterable[Args]) -> None:
        self._db.executemany(query, args)


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


def now() -> float:
    """The store's clock, `helikon_now()` in SQL: seconds since the epoch, as SQLite's
    host tells them (SQLite's own `julianday('now')` counts whole milliseconds, too coarse
    to list runs written a moment apart newest first, or to prune at `older_than=0`)."""
    return time.time()
