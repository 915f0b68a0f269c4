"""The schema of `PostgresRunStore`'s database brought up to date, under an advisory lock:
the migrations of `postgres_sql`, the key kept in `meta` when none is given, and the rows
of format 1 chained on the way."""

from __future__ import annotations

import secrets
from typing import Any

import psycopg

from helikon.core.quoting import quoted
from helikon.durable import legacy, refusals
from helikon.durable import postgres_sql as sql
from helikon.durable.postgres_engine import Cursor, fetch_all, reason
from helikon.durable.records import StoreCorrupt, StoreError
from helikon.durable.signing import resolve_key


async def migrate(
    connection: psycopg.AsyncConnection[Any], key: bytes | str | None, keyless: bool, where: str
) -> bytes:
    """Bring the schema to `SCHEMA_VERSION` in one transaction, under an advisory lock
    (a second worker waits, then finds it done); the store's key (kept in `meta` when
    `keyless`), which chaining the rows of an earlier format needs."""
    try:
        async with connection.transaction(), connection.cursor() as cur:
            return await _migrate(cur, key, keyless, where)
    except psycopg.Error as exc:
        raise StoreError(f"cannot migrate the run store {where}: {reason(exc)}") from exc


async def _migrate(cur: Cursor, key: bytes | str | None, keyless: bool, where: str) -> bytes:
    await cur.execute(sql.LOCK_SCHEMA, (sql.MIGRATION_LOCK,))
    await cur.execute(sql.META)
    await cur.execute(sql.SCHEMA)
    row = await cur.fetchone()
    version = _version(row[0] if row else "0", where)
    if version > sql.SCHEMA_VERSION:
        raise refusals.newer_schema(where, version, sql.SCHEMA_VERSION)
    found = await _kept_key(cur, where) if keyless else resolve_key(key, None)
    for step in range(version, sql.SCHEMA_VERSION):
        await cur.execute(sql.MIGRATIONS[step].encode())
        if step + 1 == sql.CHAINED_AT:
            await _rechain(cur, found)
    if version < sql.SCHEMA_VERSION:
        await cur.execute(sql.SET_SCHEMA, (str(sql.SCHEMA_VERSION),))
    return found


async def _kept_key(cur: Cursor, where: str) -> bytes:
    """The key kept in `meta`, made on first use."""
    await cur.execute(sql.PUT_KEY, (secrets.token_bytes(32).hex(),))
    await cur.execute(sql.KEY)
    stored = await cur.fetchone()
    assert stored is not None
    try:
        return bytes.fromhex(str(stored[0]))
    except ValueError:
        raise StoreCorrupt(f"the run store {where} keeps a key that is not 64 hex digits") from None


def _version(text: str, where: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise StoreCorrupt(
            f"the run store {where} has schema version {quoted(text)}, not a number"
        ) from None


async def _rechain(cur: Cursor, key: bytes) -> None:
    """Chain the runs and sessions written in format 1 (`helikon.durable.legacy`), then
    refuse the writes of a helikon that does not chain them (`sql.GUARDS`)."""
    await cur.execute(sql.V1_RUNS)
    for run_id, *head in await cur.fetchall():
        found = [await fetch_all(cur, query, run_id) for query in sql.V1_READS]
        done = legacy.rechain_run(key, run_id, (head[0], head[1], head[2]), found)
        if done is not None:
            for query, links in zip(sql.CHAINS, done.parts(), strict=True):
                await cur.executemany(query, [(*row, run_id) for row in links])
            await cur.execute(sql.CHAIN_RUN, (*done.head, run_id))
    await cur.execute(sql.V1_SESSIONS)
    for (session_id,) in await cur.fetchall():
        items = await fetch_all(cur, sql.SESSION_ITEMS, session_id)
        chained = legacy.rechain_session(key, session_id, items)
        if chained is not None:
            await cur.executemany(sql.CHAIN_ITEM, [(*row, session_id) for row in chained[0]])
            await cur.execute(sql.SESSION_SET_HEAD, chained[1])
    await cur.execute(sql.GUARDS.encode())
