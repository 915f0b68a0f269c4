"""What `SqliteRunStore`'s writes under a lease add to a run's chain of links: the head the
lease still holds, effects and calls as links, and the head signed anew (inside the
caller's write transaction; what the links are is `helikon.durable.rows`')."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from helikon.durable import refusals, rows
from helikon.durable import sqlite_sql as sql
from helikon.durable.chain import Chain
from helikon.durable.records import CallRecord, EffectRecord, Lease, LeaseLost
from helikon.durable.rows import RunHead


def held(db: sqlite3.Connection, run_id: str, lease: Lease) -> tuple[RunHead, Chain]:
    """The run's head and its chain to extend, if `lease` still holds."""
    row = db.execute(sql.HOLDS, (run_id, lease.owner, lease.epoch)).fetchone()
    if row is None:
        raise lost(db, run_id, lease)
    return RunHead(*row), Chain(row[2], row[3])


def seal(db: sqlite3.Connection, key: bytes, run_id: str, head: RunHead, chain: Chain) -> None:
    """Sign the run's head anew when this transaction added links to its chain."""
    if chain.n != head.n:
        head = RunHead(head.seq, head.mac, chain.n, chain.digest)
        signature = rows.head_sig(key, run_id, head)
        db.execute(sql.SET_CHAIN, (head.n, head.digest, signature, run_id))


def write_calls(
    db: sqlite3.Connection, run_id: str, calls: Sequence[CallRecord], chain: Chain
) -> None:
    """Start or finish `calls`, each written a link of `chain` (none when the row was
    there: a call starts once, its first result wins)."""
    for call in calls:
        result, mac, link = rows.call_row(chain, call)
        if result is None:
            args = (run_id, call.seq, call.call_id, call.tool, call.arguments_hash, mac, link)
            written = db.execute(sql.START_CALL, args).rowcount
        else:
            finished = (result, mac, link, run_id, call.seq, call.call_id)
            written = db.execute(sql.FINISH_CALL, finished).rowcount
        if not written:
            chain.drop()


def insert_effects(
    db: sqlite3.Connection, run_id: str, effects: Sequence[EffectRecord], chain: Chain
) -> None:
    """Add `effects` after the run's last, each a link of `chain`."""
    if not effects:
        return
    first = int(db.execute(sql.NEXT_EFFECT, (run_id,)).fetchone()[0])
    db.executemany(sql.INSERT_EFFECT, rows.effect_rows(run_id, chain, first, effects))


def lost(db: sqlite3.Connection, run_id: str, lease: Lease) -> LeaseLost:
    """Why a write under `lease` was refused: another write came first, or the lease went."""
    row = db.execute(
        "SELECT lease_owner, lease_epoch FROM runs WHERE run_id = ?", (run_id,)
    ).fetchone()
    return refusals.lease_lost(run_id, lease, row)
