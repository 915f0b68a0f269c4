"""What `PostgresRunStore`'s writes under a lease add to a run's chain of links: the head the
lease still holds (its row locked), effects and calls as links, and the head signed anew
(in the caller's transaction; what the links are is `helikon.durable.rows`')."""

from __future__ import annotations

from collections.abc import Sequence

from helikon.durable import postgres_sql as sql
from helikon.durable import refusals, rows
from helikon.durable.chain import Chain
from helikon.durable.postgres_engine import Cursor
from helikon.durable.records import CallRecord, EffectRecord, Lease, LeaseLost
from helikon.durable.rows import RunHead


async def held(cur: Cursor, run_id: str, lease: Lease) -> tuple[RunHead, Chain]:
    """The run's head and its chain to extend, locked, if `lease` still holds."""
    await cur.execute(sql.HOLDS, (run_id, lease.owner, lease.epoch))
    row = await cur.fetchone()
    if row is None:
        raise await lost(cur, run_id, lease)
    return RunHead(*row), Chain(row[2], row[3])


async def seal(cur: Cursor, key: bytes, run_id: str, head: RunHead, chain: Chain) -> None:
    """Sign the run's head anew when this transaction added links to its chain."""
    if chain.n != head.n:
        head = RunHead(head.seq, head.mac, chain.n, chain.digest)
        signature = rows.head_sig(key, run_id, head)
        await cur.execute(sql.SET_CHAIN, (head.n, head.digest, signature, run_id))


async def write_calls(cur: Cursor, run_id: str, calls: Sequence[CallRecord], chain: Chain) -> None:
    """Start or finish `calls`, each written a link of `chain` (none when the row was
    there: a call starts once, its first result wins)."""
    for call in calls:
        result, mac, link = rows.call_row(chain, call)
        if result is None:
            args = (run_id, call.seq, call.call_id, call.tool, call.arguments_hash, mac, link)
            await cur.execute(sql.START_CALL, args)
        else:
            finished = (result, mac, link, run_id, call.seq, call.call_id)
            await cur.execute(sql.FINISH_CALL, finished)
        if not cur.rowcount:
            chain.drop()


async def insert_effects(
    cur: Cursor, run_id: str, effects: Sequence[EffectRecord], chain: Chain
) -> None:
    """Add `effects` after the run's last, each a link of `chain`."""
    if not effects:
        return
    await cur.execute(sql.NEXT_EFFECT, (run_id,))
    row = await cur.fetchone()
    assert row is not None
    await cur.executemany(sql.INSERT_EFFECT, rows.effect_rows(run_id, chain, int(row[0]), effects))


async def lost(cur: Cursor, run_id: str, lease: Lease) -> LeaseLost:
    """Why a write under `lease` was refused: another write came first, or the lease went."""
    await cur.execute(sql.HOLDER, (run_id,))
    return refusals.lease_lost(run_id, lease, await cur.fetchone())
