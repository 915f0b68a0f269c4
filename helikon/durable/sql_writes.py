"""A SQL store's writes, once for every dialect: create a run, claim, renew and release its
lease, append a record, add effects, record calls' starts and results, spend decisions.

Theory of operation: every write is one transaction conditioned on the writer's lease
(owner and epoch) and, for a record, on the run's head (compare and swap), so a second
driver is refused and a stale one stops at its next write. PostgreSQL locks the run's row
(`FOR UPDATE` in its `HOLDS`), SQLite the file (`BEGIN IMMEDIATE`), so the writes of a run
take turns: each extends the run's one chain of links (`helikon.durable.chain`), and a
write that added links signs the run's head anew (`seal`). Lease expiry is the database's
clock plus the lease's time to live, taken in SQL. What a row holds is `rows`'.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from helikon.core.approvals import ApprovalDecision
from helikon.core.quoting import quoted
from helikon.durable import refusals, rows
from helikon.durable.chain import Chain, genesis
from helikon.durable.records import (
    CallRecord,
    EffectRecord,
    Lease,
    LeaseLost,
    RunHeader,
    RunStatus,
    StepRecord,
    StoreError,
)
from helikon.durable.rows import RunHead
from helikon.durable.sql_dialect import Db, Scope

ENDED = ("completed", "failed")
"""Statuses whose record releases the run's lease in its own transaction."""
RUN_SPAN = 1 << 32
"""Seqs are below 2**32 (SQLite keys a record by its run's number and its seq)."""


async def create(
    scope: Scope,
    header: RunHeader,
    chart: str | None,
    owner: str,
    ttl: float,
    record: StepRecord,
    effects: Sequence[EffectRecord],
) -> tuple[Lease, str]:
    """Add a run with its first record, leased to `owner` (its chart too, unless None: a
    chart the store keeps already)."""
    run_id, sql = header.run_id, scope.sql
    rows.check_run_id(run_id)
    check_seq(run_id, record.seq)
    data, mac = rows.header_row(scope.key, header)
    chain = Chain(0, genesis("run", run_id))
    events = rows.effect_rows(run_id, chain, 1, effects)
    record_data, record_mac, record_link = rows.record_row(chain, record)
    head = RunHead(record.seq, record_mac, chain.n, chain.digest)
    run = {
        "run_id": run_id,
        "header": data,
        "header_mac": mac,
        "agent": header.agent,
        "parent_run_id": header.parent_run_id,
        "session_id": header.session_id,
        "phase": record.state_after.phase,
        "head_seq": record.seq,
        "head_mac": record_mac,
        "turns": rows.turns_of(record),
        "lease_owner": owner,
        "ttl": ttl,
        "forked_from": header.forked_from,
        "forked_at": header.forked_at,
        "head_sig": rows.head_sig(scope.key, run_id, head),
        "chain_n": head.n,
        "chain_digest": head.digest,
    }
    async with scope.begin() as db:
        if chart is not None:
            await db.run(sql.PUT_CHART, (header.chart_digest, chart))
        created = await db.one(sql.CREATE_RUN, run)
        if created is None:
            raise refusals.run_exists(run_id)
        await db.many(sql.INSERT_EFFECT, events)
        await db.run(
            sql.INSERT_RECORD, _record(run_id, record.seq, record_data, record_mac, record_link)
        )
    return Lease(owner, 1, created["lease_expires"]), record_mac


async def claim(scope: Scope, run_id: str, owner: str, ttl: float, force: bool) -> Lease:
    """Take the run's lease: free, expired, or (`force`) from an owner known dead."""
    async with scope.begin() as db:
        held = await db.one(scope.sql.LEASE, (run_id,))
        if held is None:
            raise refusals.run_not_found(run_id, scope.where)
        args = {"run_id": run_id, "owner": owner, "ttl": ttl, "force": force}
        taken = await db.one(scope.sql.CLAIM, args)
        if taken is None:
            raise refusals.run_leased(run_id, held["lease_owner"], held["lease_expires"])
    return Lease(owner, int(taken["lease_epoch"]), taken["lease_expires"])


async def renew(scope: Scope, run_id: str, lease: Lease, ttl: float) -> Lease:
    async with scope.begin() as db:
        row = await db.one(scope.sql.RENEW, {**_holder(run_id, lease), "ttl": ttl})
        if row is None:
            raise await lost(scope, db, run_id, lease)
    return Lease(lease.owner, lease.epoch, row["lease_expires"])


async def append(
    scope: Scope,
    run_id: str,
    lease: Lease,
    record: StepRecord,
    previous_mac: str,
    effects: Sequence[EffectRecord],
    status: RunStatus,
    calls: Sequence[CallRecord],
) -> str:
    """Write one record, the effects before it and `calls`, if `lease` still holds and the
    run's head is the record before; the new head's signature."""
    check_seq(run_id, record.seq)
    sql = scope.sql
    async with scope.begin() as db:
        before, chain = await held(scope, db, run_id, lease)
        if (before.seq, before.mac) != (record.seq - 1, previous_mac):
            raise await lost(scope, db, run_id, lease)
        await insert_effects(scope, db, run_id, effects, chain)
        data, mac, link = rows.record_row(chain, record)
        await db.run(sql.INSERT_RECORD, _record(run_id, record.seq, data, mac, link))
        await write_calls(scope, db, run_id, calls, chain)
        head = RunHead(record.seq, mac, chain.n, chain.digest)
        ended = status in ENDED  # a run that ended lets go of its lease with its last record
        advance = {
            **_holder(run_id, lease),
            "head_seq": record.seq,
            "head_mac": mac,
            "head_sig": rows.head_sig(scope.key, run_id, head),
            "chain_n": head.n,
            "chain_digest": head.digest,
            "status": status,
            "phase": record.state_after.phase,
            "turns": rows.turns_of(record),
            "ended": ended,
            "before_seq": record.seq - 1,
            "before_mac": previous_mac,
        }
        if not await db.run(sql.ADVANCE, advance):
            raise await lost(scope, db, run_id, lease)
    return mac


async def add_effects(
    scope: Scope, run_id: str, lease: Lease, effects: Sequence[EffectRecord]
) -> None:
    async with scope.begin() as db:
        head, chain = await held(scope, db, run_id, lease)
        await insert_effects(scope, db, run_id, effects, chain)
        await seal(scope, db, run_id, head, chain)


async def record_calls(
    scope: Scope, run_id: str, lease: Lease, calls: Sequence[CallRecord], *, start: bool
) -> None:
    """Record that calls start (`start`: a result the record carries is not written) or
    their results, in one transaction; a call starts once, its first result wins."""
    if start:
        calls = [replace(call, result=None) for call in calls]
    async with scope.begin() as db:
        head, chain = await held(scope, db, run_id, lease)
        await write_calls(scope, db, run_id, calls, chain)
        await seal(scope, db, run_id, head, chain)


async def decide(
    scope: Scope, run_id: str, seq: int, decisions: Sequence[ApprovalDecision]
) -> None:
    """Spend decisions for suspension `seq`, all or none: each call is decided once."""
    async with scope.begin() as db:
        row = await db.one(scope.sql.CHAIN, (run_id,))
        if row is None:
            raise refusals.run_not_found(run_id, scope.where)
        head = RunHead(*row)
        chain = Chain(head.n, head.digest)
        if head.seq != seq:
            raise refusals.not_suspended_at(run_id, head.seq, seq)
        for decision in decisions:
            data, mac, link = rows.decision_row(chain, seq, decision)
            args = {**_record(run_id, seq, data, mac, link), "call_id": decision.call_id}
            if not await db.run(scope.sql.INSERT_DECISION, args):
                raise refusals.decision_spent(run_id, decision.call_id, seq)
        await seal(scope, db, run_id, head, chain)


async def release(scope: Scope, run_id: str, lease: Lease, status: RunStatus) -> None:
    async with scope.begin() as db:
        await db.run(scope.sql.RELEASE, {**_holder(run_id, lease), "status": status})


async def execute(scope: Scope, query: str, *args: object) -> None:
    """One statement in a transaction of its own (a chart or a payload put)."""
    async with scope.begin() as db:
        await db.run(query, args)


# ---------------------------------------------------------------- a run's chain of links


async def held(scope: Scope, db: Db, run_id: str, lease: Lease) -> tuple[RunHead, Chain]:
    """The run's head and its chain to extend (its row locked), if `lease` still holds."""
    row = await db.one(scope.sql.HOLDS, _holder(run_id, lease))
    if row is None:
        raise await lost(scope, db, run_id, lease)
    head = RunHead(*row)
    return head, Chain(head.n, head.digest)


async def seal(scope: Scope, db: Db, run_id: str, head: RunHead, chain: Chain) -> None:
    """Sign the run's head anew when this transaction added links to its chain."""
    if chain.n != head.n:
        head = RunHead(head.seq, head.mac, chain.n, chain.digest)
        signature = rows.head_sig(scope.key, run_id, head)
        await db.run(scope.sql.SET_CHAIN, (head.n, head.digest, signature, run_id))


async def write_calls(
    scope: Scope, db: Db, run_id: str, calls: Sequence[CallRecord], chain: Chain
) -> None:
    """Start or finish `calls`, each written a link of `chain` (none when the row was
    there: a call starts once, its first result wins)."""
    for call in calls:
        result, mac, link = rows.call_row(chain, call)
        args = {
            "run_id": run_id,
            "seq": call.seq,
            "call_id": call.call_id,
            "mac": mac,
            "link": link,
        }
        if result is None:
            args |= {"tool": call.tool, "arguments_hash": call.arguments_hash}
            written = await db.run(scope.sql.START_CALL, args)
        else:
            written = await db.run(scope.sql.FINISH_CALL, {**args, "result": result})
        if not written:
            chain.drop()


async def insert_effects(
    scope: Scope, db: Db, run_id: str, effects: Sequence[EffectRecord], chain: Chain
) -> None:
    """Add `effects` after the run's last, each a link of `chain`."""
    if effects:
        first = int((await db.one(scope.sql.NEXT_EFFECT, (run_id,)))[0])
        await db.many(scope.sql.INSERT_EFFECT, rows.effect_rows(run_id, chain, first, effects))


async def lost(scope: Scope, db: Db, run_id: str, lease: Lease) -> LeaseLost:
    """Why a write under `lease` was refused: another write came first, or the lease went."""
    return refusals.lease_lost(run_id, lease, await db.one(scope.sql.HOLDER, (run_id,)))


def check_seq(run_id: str, seq: int) -> None:
    """A record's seq must fit its key."""
    if not 0 < seq < RUN_SPAN:
        raise StoreError(
            f"run {quoted(run_id)}: record {seq} cannot be stored (seqs are below 2**32)"
        )


def _holder(run_id: str, lease: Lease) -> dict[str, object]:
    return {"run_id": run_id, "owner": lease.owner, "epoch": lease.epoch}


def _record(run_id: str, seq: int, data: str, mac: str, link: int) -> dict[str, object]:
    return {"run_id": run_id, "seq": seq, "data": data, "mac": mac, "link": link}
