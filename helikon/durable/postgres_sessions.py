"""The sessions of `PostgresRunStore`: items chained per session, read, added, cleared and
pruned inside the store's transactions, each write under the session's advisory lock
(what the rows mean is `helikon.durable.rows`')."""

from __future__ import annotations

from collections.abc import Sequence

from helikon.core.items import Item
from helikon.durable import postgres_sql as sql
from helikon.durable import rows
from helikon.durable.postgres_engine import Cursor, fetch_all


async def read(cur: Cursor, key: bytes, session_id: str) -> tuple[Item, ...]:
    """The session's items, every link checked (in the caller's read-only transaction)."""
    kept = await head(cur, session_id)
    found = await fetch_all(cur, sql.SESSION_ITEMS, session_id)
    return rows.read_session(key, session_id, kept, found)


async def add(cur: Cursor, key: bytes, session_id: str, items: Sequence[Item], run_id: str) -> None:
    """Chain `items` after the session's last, and sign its new head."""
    await cur.execute(sql.SESSION_LOCK_TAKE, (sql.SESSION_LOCK, session_id))
    added, new = rows.session_rows(session_id, await head(cur, session_id), items)
    await cur.executemany(sql.SESSION_ADD, [(session_id, *row, run_id) for row in added])
    await set_head(cur, key, session_id, new)


async def clear(cur: Cursor, session_id: str) -> None:
    await cur.execute(sql.SESSION_LOCK_TAKE, (sql.SESSION_LOCK, session_id))
    for statement in sql.SESSION_CLEAR:
        await cur.execute(statement, (session_id,))


async def prune(cur: Cursor, key: bytes, session_id: str, upto: int) -> None:
    """Delete a session's items up to `upto`; its chain then starts after them."""
    await cur.execute(sql.SESSION_LOCK_TAKE, (sql.SESSION_LOCK, session_id))
    kept = await head(cur, session_id)
    base = await fetch_all(cur, sql.SESSION_ITEM, session_id, upto)
    await cur.execute(sql.SESSION_PRUNE, (session_id, upto))
    new = rows.pruned_session(key, session_id, kept, upto, base[0][0] if base else "")
    if new is None:
        await cur.execute(sql.SESSION_CLEAR[1], (session_id,))
    elif kept is not None and new != kept[0]:
        await set_head(cur, key, session_id, new)


async def head(cur: Cursor, session_id: str) -> tuple[rows.SessionHead, str] | None:
    await cur.execute(sql.SESSION_HEAD, (session_id,))
    return rows.session_head(await cur.fetchone())


async def set_head(cur: Cursor, key: bytes, session_id: str, new: rows.SessionHead) -> None:
    signature = rows.session_sig(key, session_id, new)
    fields = (new.first, new.base, new.n, new.digest)
    await cur.execute(sql.SESSION_SET_HEAD, (session_id, *fields, signature))
