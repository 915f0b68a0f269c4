"""A SQL store's schema brought up to date, once for every dialect: its dialect's
`MIGRATIONS`, one at a time, in the caller's transaction (under an advisory lock where the
dialect names one, `LOCK_SCHEMA`: a second worker waits, then finds it done), the rows of
format 1 chained on the way (`helikon.durable.legacy`), and a database of a newer schema
refused. The key is made on first use and kept in `meta` when the store is given none
(PostgreSQL's keyless mode).
"""

from __future__ import annotations

import secrets
from typing import Any

from helikon.core.quoting import quoted
from helikon.durable import legacy, refusals
from helikon.durable.records import StoreCorrupt
from helikon.durable.sql_dialect import Db


async def migrate(db: Db, sql: Any, where: str, key: bytes | None) -> bytes:
    """Bring the schema to `sql.SCHEMA_VERSION`; the store's key (`key`, or with None the
    one kept in `meta`), which chaining the rows of an earlier format needs."""
    if sql.LOCK_SCHEMA is not None:
        await db.run(sql.LOCK_SCHEMA, (sql.MIGRATION_LOCK,))
    await db.run(sql.META)
    row = await db.one(sql.SCHEMA)
    version = _version(row[0] if row else "0", where)
    if version > sql.SCHEMA_VERSION:
        raise refusals.newer_schema(where, version, sql.SCHEMA_VERSION)
    found = key if key is not None else await _kept_key(db, sql, where)
    for step in range(version, sql.SCHEMA_VERSION):
        for statement in sql.MIGRATIONS[step].split(";"):
            if statement.strip():
                await db.run(statement)
        if step + 1 == sql.CHAINED_AT:
            await _rechain(db, sql, found)
    if version < sql.SCHEMA_VERSION:
        await db.run(sql.SET_SCHEMA, (str(sql.SCHEMA_VERSION),))
    return found


async def _kept_key(db: Db, sql: Any, where: str) -> bytes:
    """The key kept in `meta`, made on first use."""
    await db.run(sql.PUT_KEY, (secrets.token_bytes(32).hex(),))
    stored = await db.one(sql.KEY)
    try:
        return bytes.fromhex(str(stored[0]))
    except ValueError:
        raise StoreCorrupt(f"the run store {where} keeps a key that is not 64 hex digits") from None


def _version(text: str, where: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise StoreCorrupt(
            f"the run store {where} names schema version {quoted(text)}, not a number"
        ) from None


async def _rechain(db: Db, sql: Any, key: bytes) -> None:
    """Chain the runs and sessions written in format 1 (`helikon.durable.legacy`), then
    refuse the writes of a helikon that does not chain them (`sql.GUARDS`)."""
    for run_id, *head in await db.all(sql.LEGACY_RUNS):
        found = [await db.all(query, (run_id,)) for query in sql.LEGACY_READS]
        done = legacy.rechain_run(key, run_id, (head[0], head[1], head[2]), found)
        if done is not None:
            for query, links in zip(sql.CHAINS, done.parts(), strict=True):
                await db.many(query, [(*row, run_id) for row in links])
            await db.run(sql.CHAIN_RUN, (*done.head, run_id))
    for (session_id,) in await db.all(sql.LEGACY_SESSIONS):
        items = [tuple(row) for row in await db.all(sql.SESSION_ITEMS, (session_id,))]
        chained = legacy.rechain_session(key, session_id, items)
        if chained is not None:
            await db.many(sql.CHAIN_ITEM, [(*row, session_id) for row in chained[0]])
            await db.run(sql.SESSION_SET_HEAD, chained[1])
    for guard in sql.GUARDS:
        await db.run(guard)
