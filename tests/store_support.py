"""The run store tests' backends: every test that takes `backend` (or `store`) runs once on
SQLite (a temporary file) and once on a real PostgreSQL (`postgres_url`, a schema per test).
tests/conftest.py makes both fixtures available to every test module.

A `Backend` opens stores on one database and runs raw SQL on it (to tamper with rows, to age
them, to fake an old or a newer schema): the one place the two backends differ. `race` lets
threads loose on a store at once, each on an event loop of its own.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import pytest

from helikon.durable import (
    RunStore,
    SqliteRunStore,
    StoreError,
    open_store,
    postgres_sql,
    sqlite_sql,
)

KEY = b"conformance-suite-key-0123456789"

# ---------------------------------------------------------------- the backends


class Backend:
    """Stores on one database, and raw SQL on it (`?` placeholders on both backends)."""

    name: str
    url: str
    schema_version: str  # the schema version this helikon migrates the backend's databases to
    disk_full: str  # how a store names the database's error for a full disk
    commit_refused: str  # and for the COMMIT `fail_commits` makes fail
    read_refused: str  # and for a read `refusing_reads` makes fail

    def __init__(self) -> None:
        self.opened: list[RunStore] = []

    def open(self, key: bytes | str | None = KEY) -> RunStore:
        store = open_store(self.url, key=key)
        self.opened.append(store)
        return store

    def sql(self, query: str, *args: Any) -> list[tuple[Any, ...]]:
        raise NotImplementedError

    def fill_disk(self, store: RunStore, tables: tuple[str, ...] = ()) -> None:
        """Make `store`'s writes that need more space fail as on a full disk (on
        PostgreSQL, the writes to `tables` alone, when given: its limit is the database's,
        SQLite's the store connection's)."""
        raise NotImplementedError

    def free_disk(self, store: RunStore, tables: tuple[str, ...] = ()) -> None:
        raise NotImplementedError

    def fail_commits(self, store: RunStore) -> None:
        """Make `store`'s COMMIT of a new record fail (the statements before it succeed)."""
        raise NotImplementedError

    def allow_commits(self, store: RunStore) -> None:
        raise NotImplementedError

    def refusing_reads(self, store: RunStore) -> AbstractContextManager[RunStore]:
        """A store on `store`'s database whose reads the database refuses while the
        block runs (SQLite: its authorizer, on `store`'s own connection; PostgreSQL: another
        connection holds every table locked past a store's lock timeout)."""
        raise NotImplementedError

    def close(self) -> None:
        for store in self.opened:
            store.close()


class SqliteBackend(Backend):
    name = "sqlite"
    schema_version = str(sqlite_sql.SCHEMA_VERSION)
    disk_full, commit_refused = "SQLITE_FULL", "SQLITE_AUTH"
    read_refused = "SQLITE_AUTH"

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path
        self.url = f"sqlite:///{path}"

    def sql(self, query: str, *args: Any) -> list[tuple[Any, ...]]:
        db = sqlite3.connect(self.path)
        try:
            with db:
                *before, last = [part for part in query.split("; ") if part.strip()]
                for statement in before:
                    db.execute(statement)
                return db.execute(last, args).fetchall()
        finally:
            db.close()

    # SQLite's limits hold per connection: these set them on the store's own.

    def fill_disk(self, store: RunStore, tables: tuple[str, ...] = ()) -> None:
        db = _connection(store)
        pages = db.execute("PRAGMA page_count").fetchone()[0]
        db.execute(f"PRAGMA max_page_count = {pages}")  # SQLITE_FULL for a page more

    def free_disk(self, store: RunStore, tables: tuple[str, ...] = ()) -> None:
        _connection(store).execute("PRAGMA max_page_count = 4294967294")

    def fail_commits(self, store: RunStore) -> None:
        _connection(store).set_authorizer(_deny_commit)  # SQLITE_AUTH at COMMIT

    def allow_commits(self, store: RunStore) -> None:
        _connection(store).set_authorizer(None)

    @contextmanager
    def refusing_reads(self, store: RunStore) -> Iterator[RunStore]:
        _connection(store).set_authorizer(_deny_read)  # SQLITE_AUTH as a query is prepared
        try:
            yield store
        finally:
            _connection(store).set_authorizer(None)


def _connection(store: RunStore) -> sqlite3.Connection:
    assert isinstance(store, SqliteRunStore)
    return store._db


def _deny_read(action: int, *_: Any) -> int:
    return sqlite3.SQLITE_DENY if action == sqlite3.SQLITE_READ else sqlite3.SQLITE_OK


def _deny_commit(action: int, what: str | None, *_: Any) -> int:
    if action == sqlite3.SQLITE_TRANSACTION and what == "COMMIT":
        return sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK


DISK_FULL = """
    CREATE OR REPLACE FUNCTION disk_full() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
        RAISE EXCEPTION USING ERRCODE = 'disk_full',
            MESSAGE = 'could not extend file "base/16384/16385": No space left on device';
    END $$"""
LOCKED = ("runs", "records", "sessions", "session_heads", "charts", "payloads")
FULL_TABLES = ("records", "effects", "calls", "decisions", "sessions", "charts")


class PostgresBackend(Backend):
    name = "postgres"
    schema_version = str(postgres_sql.SCHEMA_VERSION)
    disk_full = commit_refused = "DiskFull"
    read_refused = "LockNotAvailable"

    def __init__(self, database_url: str) -> None:
        super().__init__()
        import psycopg

        self.psycopg = psycopg
        self.schema = f"t_{uuid.uuid4().hex[:12]}"
        self.admin_url = database_url
        self.url = f"{database_url}?options=-csearch_path%3D{self.schema}"
        self.admin("CREATE SCHEMA {schema}")

    def admin(self, statement: str) -> None:
        with self.psycopg.connect(self.admin_url, autocommit=True) as db:
            db.execute(statement.format(schema=self.schema).encode())

    def sql(self, query: str, *args: Any) -> list[tuple[Any, ...]]:
        with self.psycopg.connect(self.url, autocommit=True) as db:
            cur = db.execute(query.replace("?", "%s").encode(), args)
            return cur.fetchall() if cur.description else []

    # SQLSTATE 53100 (disk_full), raised by triggers as PostgreSQL raises it for a write
    # that needs a page more: every insert, and a call's result.

    def fill_disk(self, store: RunStore, tables: tuple[str, ...] = ()) -> None:
        self.sql(DISK_FULL)
        for table in tables or FULL_TABLES:
            what = "INSERT OR UPDATE" if table == "calls" else "INSERT"
            self.sql(
                f"CREATE TRIGGER full_{table} BEFORE {what} ON {table} "
                "FOR EACH STATEMENT EXECUTE FUNCTION disk_full()"
            )

    def free_disk(self, store: RunStore, tables: tuple[str, ...] = ()) -> None:
        for table in tables or FULL_TABLES:
            self.sql(f"DROP TRIGGER full_{table} ON {table}")

    def fail_commits(self, store: RunStore) -> None:
        self.sql(DISK_FULL)
        self.sql(
            "CREATE CONSTRAINT TRIGGER full_at_commit AFTER INSERT ON records DEFERRABLE "
            "INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION disk_full()"
        )

    def allow_commits(self, store: RunStore) -> None:
        self.sql("DROP TRIGGER full_at_commit ON records")

    @contextmanager
    def refusing_reads(self, store: RunStore) -> Iterator[RunStore]:
        impatient = open_store(self.url + "%20-clock_timeout%3D100", key=KEY)
        self.opened.append(impatient)
        with self.psycopg.connect(self.url) as db:  # one transaction, rolled back at the end
            db.execute(f"LOCK TABLE {', '.join(LOCKED)} IN ACCESS EXCLUSIVE MODE".encode())
            yield impatient

    def close(self) -> None:
        super().close()
        self.admin("DROP SCHEMA {schema} CASCADE")


@pytest.fixture(params=["sqlite", "postgres"])
def backend(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Backend]:
    """An empty database on each backend in turn; no $HELIKON_STORE_KEY unless a test sets
    it (stores open with `KEY` unless told otherwise)."""
    monkeypatch.delenv("HELIKON_STORE_KEY", raising=False)
    chosen: Backend
    if request.param == "sqlite":
        chosen = SqliteBackend(tmp_path / "runs.db")
    else:
        chosen = PostgresBackend(request.getfixturevalue("postgres_url"))
    try:
        yield chosen
    finally:
        chosen.close()


@pytest.fixture
def store(backend: Backend) -> RunStore:
    """A store on `backend`'s database."""
    return backend.open()


def run_in_thread(work: Callable[[], Any]) -> threading.Thread:
    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    return thread


def race(count: int, work: Callable[[int], Any]) -> list[Any]:
    """`work(i)` in `count` threads released at once, each on an event loop of its own;
    what each returned, or the StoreError it raised."""
    barrier = threading.Barrier(count)
    outcomes: list[Any] = [None] * count

    def one(i: int) -> None:
        barrier.wait()
        try:
            outcomes[i] = asyncio.run(work(i))
        except StoreError as exc:
            outcomes[i] = exc

    threads = [run_in_thread(lambda i=i: one(i)) for i in range(count)]
    for thread in threads:
        thread.join(30)
    return outcomes
