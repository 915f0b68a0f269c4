"""`PostgresRunStore`: runs kept in a PostgreSQL database, for many workers on many hosts.

Theory of operation: the operations are `SqlRunStore`'s, the same as SQLite's; here they
run on psycopg 3's async engine, a `psycopg_pool.AsyncConnectionPool` on an event loop of
the store's own (`sql_engine.LoopThread`): a store outlives its callers' loops
(`Runner.run_sync` opens one per run, a test one per test), and an async pool belongs to
the loop it was opened in. A write locks the run's row (`FOR UPDATE`), so a claim waits
until a write under the lease is committed; times are the server's clock (`NOW`), the one
clock every worker shares. SQL text is in `helikon.durable.postgres_sql`; the pool, the
transactions and psycopg's errors in `postgres_engine`, the migrations in
`postgres_migrate`.
"""

from __future__ import annotations

import os
from functools import partial
from typing import NoReturn

try:
    import psycopg  # noqa: F401  (used by postgres_engine: a missing one is named here)
    import psycopg_pool  # noqa: F401
except ModuleNotFoundError as exc:  # say which extra, not just which module
    if exc.name not in ("psycopg", "psycopg_pool"):
        raise
    raise ModuleNotFoundError(
        "PostgresRunStore needs the psycopg package: pip install 'helikon[postgres]'",
        name=exc.name,
    ) from exc

from helikon.durable import postgres_sql
from helikon.durable.postgres_engine import (
    CONNECT_TIMEOUT as CONNECT_TIMEOUT,
)
from helikon.durable.postgres_engine import (
    Pool,
    begin,
    connect,
    open_pool,
    without_password,
)
from helikon.durable.postgres_migrate import migrate
from helikon.durable.signing import KEY_VARIABLE, resolve_key
from helikon.durable.sql_dialect import Scope
from helikon.durable.sql_engine import LoopThread
from helikon.durable.sql_store import SqlRunStore


class PostgresRunStore(SqlRunStore):
    """Runs kept in a PostgreSQL database (`open_store("postgresql://...")`).

    Args:
        url: a libpq URL, `postgresql://user:password@host:port/database`; its `options`
            may set a `search_path`, whose first schema then holds the tables.
        key: the key rows are signed with; default $HELIKON_STORE_KEY. Without either, a
            random key is made on first use and kept in the database's `meta` table: rows
            are then still checked against accidental corruption (an edited or truncated
            row, a restore of another database), but not against an attacker who can
            write to the database, since the key is beside the rows. Give a key (from your
            secret store) to have forged rows and approvals refused.
        min_size, max_size: connections the pool keeps open, and may open at most.

    Raises:
        StoreError: the database cannot be reached, or its schema cannot be migrated.
        StoreCorrupt: the database has a schema from a newer helikon.
    """

    def __init__(
        self,
        url: str,
        *,
        key: bytes | str | None = None,
        min_size: int = 1,
        max_size: int = 10,
    ) -> None:
        self._url = url
        self._where = without_password(url)
        pools: list[Pool] = []  # the one pool, once open (closed when the engine stops)

        async def close_pools() -> None:
            for pool in pools:
                await pool.close()

        engine = LoopThread("helikon-postgres", self._where, close_pools)
        opening = Scope(postgres_sql, b"", self._where, partial(_no_pool, self._where))
        self._serve(opening, engine)
        try:
            found = self._wait(self._open(key, min_size, max_size, pools))
        except BaseException:
            self.close()
            raise
        self._scope = Scope(postgres_sql, found, self._where, partial(begin, pools[0], self._where))

    @property
    def url(self) -> str:
        return self._url

    def __repr__(self) -> str:
        return f"PostgresRunStore({self._where!r})"

    async def _open(
        self, key: bytes | str | None, min_size: int, max_size: int, pools: list[Pool]
    ) -> bytes:
        """Migrate the schema and find the key on a connection of their own (a wrong URL
        fails here at once, with libpq's reason), then open the pool."""
        keyless = key is None and not os.environ.get(KEY_VARIABLE)
        given = None if keyless else resolve_key(key, None)
        async with await connect(self._url, self._where) as connection:
            found = await migrate(connection, given, self._where)
        pools.append(await open_pool(self._url, self._where, min_size, max_size))
        return found


def _no_pool(where: str, **_: object) -> NoReturn:
    raise RuntimeError(f"the run store {where} is still opening")
