"""`SqliteRunStore`: the embedded run store, one SQLite file, many processes.

Theory of operation: stdlib `sqlite3` in WAL mode with `synchronous=NORMAL` (a commit
survives a crash of the process; `synchronous="FULL"` also survives the machine losing power,
at the cost the benchmark prints). The operations are `SqlRunStore`'s, the same as
PostgreSQL's; here they run on one writer thread of the store's (`sql_engine.WriterThread`),
one at a time, on one connection: a caller's event loop never waits on the file. A write is
one `BEGIN IMMEDIATE` transaction, so another process's write waits (`busy_timeout`). SQL
text is in `helikon.durable.sqlite_sql`; the transaction, the clock and SQLite's errors in
`sqlite_transactions`; its schema's migrations are run by `sql_migrate`.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Literal

from helikon.durable import sqlite_sql
from helikon.durable.records import StoreError
from helikon.durable.signing import resolve_key
from helikon.durable.sql_dialect import Scope
from helikon.durable.sql_engine import WriterThread
from helikon.durable.sql_migrate import migrate
from helikon.durable.sql_store import SqlRunStore
from helikon.durable.sqlite_transactions import Transaction, now, to_wal

DEFAULT_PATH = Path(".helikon") / "runs.db"


class SqliteRunStore(SqlRunStore):
    """Runs kept in one SQLite file (the CLI's default: `.helikon/runs.db`).

    Args:
        path: the database file (made with its folder when missing), or ":memory:".
        key: the key rows are signed with; default $HELIKON_STORE_KEY, else a key file
            beside the database (`<path>.key`, mode 0600).
        synchronous: SQLite's `synchronous` setting: "NORMAL" (a commit survives a process
            crash) or "FULL" (also a power loss).
        busy_timeout: seconds a write waits for another process's write to finish.
    """

    def __init__(
        self,
        path: str | Path = DEFAULT_PATH,
        *,
        key: bytes | str | None = None,
        synchronous: Literal["NORMAL", "FULL"] = "NORMAL",
        busy_timeout: float = 10.0,
    ) -> None:
        self.path = str(path)
        memory = self.path == ":memory:"
        if not memory:
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        signing = resolve_key(key, None if memory else Path(self.path + ".key"))
        try:
            self._db = sqlite3.connect(
                self.path, timeout=busy_timeout, isolation_level=None, check_same_thread=False
            )
            self._db.row_factory = sqlite3.Row
            self._db.create_function("helikon_now", 0, now)
            to_wal(self._db, busy_timeout)
            self._db.execute(f"PRAGMA synchronous={synchronous}")
            self._db.execute("PRAGMA foreign_keys=ON")
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"cannot open the run store {self.path}: {exc}") from None
        self._begin = _Begin(self._db, self.path)
        self._serve(
            Scope(sqlite_sql, signing, self.path, self._begin),
            WriterThread("helikon-sqlite", self.path, self._db.close),
        )
        try:
            self._wait(_migrate(self._scope))
        except BaseException:
            self.close()
            raise

    @property
    def url(self) -> str:
        return f"sqlite:///{self.path}"

    def __repr__(self) -> str:
        return f"SqliteRunStore({self.path!r})"


async def _migrate(scope: Scope) -> None:
    """Bring the file's schema up to date, in one write transaction: a second process
    opening the same file waits, then finds it done."""
    async with scope.begin() as db:
        await migrate(db, sqlite_sql, scope.where, scope.key)


class _Begin:
    """The store's `sql_dialect.Begin`: a transaction on its one connection, `db` (which
    bench/durable_floor.py and durable_layers.py swap for one that records or does
    nothing)."""

    __slots__ = ("_path", "db")

    def __init__(self, db: sqlite3.Connection, path: str) -> None:
        self.db, self._path = db, path

    def __call__(self, *, read_only: bool = False) -> Transaction:
        return Transaction(self.db, self._path, read_only=read_only)
