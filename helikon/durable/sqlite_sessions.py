"""The sessions of `SqliteRunStore`: items chained per session, read, added, cleared and
pruned inside the store's transactions (what the rows mean is `helikon.durable.rows`')."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence

from helikon.core.items import Item
from helikon.durable import rows
from helikon.durable import sqlite_sql as sql


def read(db: sqlite3.Connection, key: bytes, session_id: str) -> tuple[Item, ...]:
    """The session's items, every link checked (inside a read of the caller's)."""
    kept = head(db, session_id)
    found = db.execute(sql.SESSION_ITEMS, (session_id,)).fetchall()
    return rows.read_session(key, session_id, kept, found)


def add(
    db: sqlite3.Connection, key: bytes, session_id: str, items: Sequence[Item], run_id: str
) -> None:
    """Chain `items` after the session's last, and sign its new head."""
    now = time.time()
    added, new = rows.session_rows(session_id, head(db, session_id), items)
    db.executemany(sql.SESSION_ADD, [(session_id, *row, run_id, now) for row in added])
    set_head(db, key, session_id, new)


def clear(db: sqlite3.Connection, session_id: str) -> None:
    for statement in sql.SESSION_CLEAR:
        db.execute(statement, (session_id,))


def prune(db: sqlite3.Connection, key: bytes, session_id: str, upto: int) -> None:
    """Delete a session's items up to `upto`; its chain then starts after them."""
    kept = head(db, session_id)
    base = db.execute(sql.SESSION_ITEM, (session_id, upto)).fetchone()
    db.execute(sql.SESSION_PRUNE, (session_id, upto))
    new = rows.pruned_session(key, session_id, kept, upto, base[0] if base else "")
    if new is None:
        db.execute(sql.SESSION_CLEAR[1], (session_id,))
    elif kept is not None and new != kept[0]:
        set_head(db, key, session_id, new)


def head(db: sqlite3.Connection, session_id: str) -> tuple[rows.SessionHead, str] | None:
    return rows.session_head(db.execute(sql.SESSION_HEAD, (session_id,)).fetchone())


def set_head(db: sqlite3.Connection, key: bytes, session_id: str, new: rows.SessionHead) -> None:
    signature = rows.session_sig(key, session_id, new)
    fields = (new.first, new.base, new.n, new.digest)
    db.execute(sql.SESSION_SET_HEAD, (session_id, *fields, signature))
