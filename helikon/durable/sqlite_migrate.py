"""The schema of `SqliteRunStore`'s file brought up to date: the migrations of
`sqlite_sql`, one at a time, and the rows of format 1 chained on the way."""

from __future__ import annotations

import sqlite3

from helikon.core.quoting import quoted
from helikon.durable import legacy, refusals
from helikon.durable import sqlite_sql as sql
from helikon.durable.records import StoreCorrupt


def migrate(db: sqlite3.Connection, key: bytes, path: str) -> None:
    """Bring the schema to `SCHEMA_VERSION`, one migration at a time (inside the caller's
    write transaction: a second process opening the same file waits, then finds it done)."""
    db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
    row = db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
    version = _version(row[0] if row else "0", path)
    if version > sql.SCHEMA_VERSION:
        raise refusals.newer_schema(path, version, sql.SCHEMA_VERSION)
    for step in range(version, sql.SCHEMA_VERSION):
        for statement in sql.MIGRATIONS[step].split(";"):
            if statement.strip():
                db.execute(statement)
        if step + 1 == sql.CHAINED_AT:
            _rechain(db, key)
    db.execute(
        "INSERT OR REPLACE INTO meta (key, value) VALUES ('schema', ?)",
        (str(sql.SCHEMA_VERSION),),
    )


def _version(text: str, path: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise StoreCorrupt(
            f"the run store {path} names schema version {quoted(text)}, not a number"
        ) from None


def _rechain(db: sqlite3.Connection, key: bytes) -> None:
    """Chain the runs and sessions written in format 1 (`helikon.durable.legacy`), then
    refuse the writes of a helikon that does not chain them (`sql.GUARDS`)."""
    for run_id, run_key, *head in db.execute(sql.V3_RUNS).fetchall():
        reads = zip(sql.V3_READS, (run_key, run_id, run_id, run_id), strict=True)
        found = tuple(db.execute(query, (arg,)).fetchall() for query, arg in reads)
        done = legacy.rechain_run(key, run_id, (head[0], head[1], head[2]), found)
        if done is not None:
            db.executemany(sql.CHAIN_RECORD, [(*row, run_key) for row in done.records])
            for query, links in zip(_CHAINS, done.parts()[1:], strict=True):
                db.executemany(query, [(*row, run_id) for row in links])
            db.execute(sql.CHAIN_RUN, (*done.head, run_id))
    for (session_id,) in db.execute(sql.V3_SESSIONS).fetchall():
        items = db.execute(sql.SESSION_ITEMS, (session_id,)).fetchall()
        chained = legacy.rechain_session(key, session_id, items)
        if chained is not None:
            db.executemany(sql.CHAIN_ITEM, [(*row, session_id) for row in chained[0]])
            db.execute(sql.SESSION_SET_HEAD, chained[1])
    for guard in sql.GUARDS:
        db.execute(guard)


_CHAINS = (sql.CHAIN_EFFECT, sql.CHAIN_CALL, sql.CHAIN_DECISION)
