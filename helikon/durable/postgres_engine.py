"""What `PostgresRunStore` runs on: its pool, its transactions (`begin`, yielding `PgDb`,
the store's `sql_dialect.Db`, whose rows are read by column name or index), and psycopg's
errors and URLs as its messages name them. Its event loop is `sql_engine.LoopThread`."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg.rows import RowMaker
from psycopg_pool import AsyncConnectionPool

from helikon.durable.records import StoreError
from helikon.durable.sql_dialect import Args

Cursor = psycopg.AsyncCursor[Any]
Pool = AsyncConnectionPool[psycopg.AsyncConnection[Any]]


CONNECT_TIMEOUT = 10.0
"""Seconds opening the store waits for the database before it gives up."""


async def connect(url: str, where: str) -> psycopg.AsyncConnection[Any]:
    """One connection of its own (the migration's): a wrong URL fails here, with libpq's
    reason."""
    try:
        return await psycopg.AsyncConnection.connect(
            url, autocommit=True, connect_timeout=int(CONNECT_TIMEOUT)
        )
    except psycopg.Error as exc:
        raise StoreError(f"cannot open the run store {where}: {reason(exc)}") from exc


async def open_pool(url: str, where: str, min_size: int, max_size: int) -> Pool:
    """The store's pool, open, with `min_size` connections made."""
    pool: Pool = AsyncConnectionPool(
        url,
        min_size=min_size,
        max_size=max_size,
        kwargs={"autocommit": True},
        open=False,
        name="helikon-runs",
    )
    try:
        await pool.open(wait=True, timeout=CONNECT_TIMEOUT)
    except psycopg.Error as exc:
        await pool.close()
        raise StoreError(f"cannot open the run store {where}: {reason(exc)}") from exc
    return pool


async def fetch_all(cur: Cursor, query: str, *args: Any) -> list[Any]:
    await cur.execute(query, args)
    return await cur.fetchall()


READ_ONLY = "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY"
"""A read sees one snapshot: a record appended meanwhile is not half seen."""


@asynccontextmanager
async def begin(pool: Pool, where: str, *, read_only: bool = False) -> AsyncIterator[PgDb]:
    """One transaction on a connection of the pool, committed or rolled back."""
    try:
        async with (
            pool.connection() as connection,
            connection.transaction(),
            connection.cursor(row_factory=named_row) as cur,
        ):
            if read_only:
                await cur.execute(READ_ONLY)
            yield PgDb(cur)
    except psycopg.Error as exc:
        raise StoreError(f"the run store {where} failed: {reason(exc)}") from exc


class PgDb:
    """A transaction's statements, on its cursor."""

    __slots__ = ("_cur",)

    def __init__(self, cur: psycopg.AsyncCursor[NamedRow]) -> None:
        self._cur = cur

    async def run(self, query: str, args: Args = ()) -> int:
        await self._cur.execute(query, args)
        return self._cur.rowcount

    async def one(self, query: str, args: Args = ()) -> Any:
        await self._cur.execute(query, args)
        return await self._cur.fetchone()

    async def all(self, query: str, args: Args = ()) -> list[Any]:
        await self._cur.execute(query, args)
        return await self._cur.fetchall()

    async def many(self, query: str, args: Iterable[Args]) -> None:
        await self._cur.executemany(query, args)


class NamedRow:
    """A row read by column name (`row["head_seq"]`) or index, as `sqlite3.Row` is."""

    __slots__ = ("_names", "_values")

    def __init__(self, values: Sequence[Any], names: dict[str, int]) -> None:
        self._values, self._names = tuple(values), names

    def __getitem__(self, key: str | int | slice) -> Any:
        return self._values[self._names[key] if isinstance(key, str) else key]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)


def named_row(cursor: Any) -> RowMaker[NamedRow]:
    names = {column.name: n for n, column in enumerate(cursor.description or ())}
    return lambda values: NamedRow(values, names)


def reason(exc: psycopg.Error) -> str:
    """psycopg's error in one line: the server's message and its kind (`DiskFull`), without
    the lines of detail and context that follow it."""
    first = (str(exc).strip().splitlines() or [""])[0]
    return f"{first} ({type(exc).__name__})"


def without_password(url: str) -> str:
    """`url` as messages name it: the password left out."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rpartition("@")[2]
    user = f"{parts.username}@" if parts.username else ""
    return urlunsplit(parts._replace(netloc=user + host))
