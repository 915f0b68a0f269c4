"""`PostgresRunStore`: runs kept in a PostgreSQL database, for many workers on many hosts.

Theory of operation: one async engine, psycopg 3 on a `psycopg_pool.AsyncConnectionPool`,
run on an event loop of the store's own (a daemon thread). An async pool belongs to the loop
it was opened in (psycopg/psycopg#737: used from a second `asyncio.run` it hangs), and a
store outlives its callers' loops: `Runner.run_sync` opens one per run, a test one per test,
a thread one of its own. So every operation is a coroutine on the store's loop; the async
methods the driver awaits hand it over and await the answer (the caller's loop never
blocks), and the sync ones (`get`, `runs`, `pending`, `events`, sessions, `delete`,
`prune`, charts) wait for it, so a sync caller needs no event loop, inside one or not.

Every write is one transaction conditioned on the writer's lease (owner and epoch), which
it locks, so a claim waits until the write is committed; a record is written only if the
run's head is the record before (compare and swap). What a row means and whether it checks
out is decided in `helikon.durable.rows`, as for SQLite; SQL text is in
`helikon.durable.postgres_sql`. psycopg's errors come out as `StoreError`. The loop, the
pool and psycopg's errors are in `postgres_engine`, the migrations in `postgres_migrate`,
the reads in `postgres_reads`, sessions in `postgres_sessions`, what a write adds to a
run's chain in `postgres_links`.
"""

from __future__ import annotations

import asyncio
import os
import threading
import weakref
from collections.abc import AsyncIterator, Coroutine, Sequence
from concurrent.futures import Future
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Any, TypeVar

try:
    import psycopg
    import psycopg_pool  # noqa: F401  (used by postgres_engine: a missing one is named here)
except ModuleNotFoundError as exc:  # say which extra, not just which module
    if exc.name not in ("psycopg", "psycopg_pool"):
        raise
    raise ModuleNotFoundError(
        "PostgresRunStore needs the psycopg package: pip install 'helikon[postgres]'",
        name=exc.name,
    ) from exc

from helikon.core.approvals import ApprovalDecision, ApprovalRequest
from helikon.core.items import Item
from helikon.durable import postgres_links as links
from helikon.durable import postgres_reads as reads
from helikon.durable import postgres_sessions, refusals, rows
from helikon.durable import postgres_sql as sql
from helikon.durable.chain import Chain, genesis
from helikon.durable.payloads import checked, digest_of
from helikon.durable.postgres_engine import (
    CONNECT_TIMEOUT as CONNECT_TIMEOUT,
)
from helikon.durable.postgres_engine import (
    Cursor,
    Pool,
    connect,
    fetch_all,
    open_pool,
    reason,
    serve,
    shut_down,
    without_password,
)
from helikon.durable.postgres_migrate import migrate
from helikon.durable.records import (
    CallRecord,
    EffectRecord,
    Lease,
    RunHeader,
    RunInfo,
    RunStatus,
    StepRecord,
    StoredRun,
    StoreError,
)
from helikon.durable.rows import RunHead
from helikon.durable.signing import KEY_VARIABLE
from helikon.durable.views import EventStream, Revision, Session, pending_of

T = TypeVar("T")


class PostgresRunStore:
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
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=serve, args=(self._loop,), name="helikon-postgres", daemon=True
        )
        self._thread.start()
        self._pools: list[Pool] = []  # the one pool, once open (the finalizer closes it)
        # Closes the pool and stops the loop on close(), when the store is collected, or
        # at exit, whichever comes first: a store never closed leaks no connection.
        self._closing = weakref.finalize(self, shut_down, self._loop, self._thread, self._pools)
        try:
            self._key = self._wait(self._open(key, min_size, max_size))
        except BaseException:
            self.close()
            raise

    @property
    def url(self) -> str:
        return self._url

    def __repr__(self) -> str:
        return f"PostgresRunStore({self._where!r})"

    def close(self) -> None:
        """Close the pool's connections and stop the store's loop (safe to call twice)."""
        self._closing()

    def __enter__(self) -> PostgresRunStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ the engine

    def _wait(self, work: Coroutine[Any, Any, T]) -> T:
        """Run `work` on the store's loop and wait for it (the sync methods)."""
        return self._submit(work).result()

    async def _await(self, work: Coroutine[Any, Any, T]) -> T:
        """Run `work` on the store's loop; the caller's loop goes on meanwhile."""
        return await asyncio.wrap_future(self._submit(work))

    def _submit(self, work: Coroutine[Any, Any, T]) -> Future[T]:
        if not self._closing.alive:
            work.close()
            raise StoreError(f"the run store {self._where} is closed")
        if threading.current_thread() is self._thread:  # it would wait for itself forever
            work.close()
            raise RuntimeError("a run store's own loop cannot wait on the store")
        return asyncio.run_coroutine_threadsafe(work, self._loop)

    async def _open(self, key: bytes | str | None, min_size: int, max_size: int) -> bytes:
        """Migrate the schema and find the key on a connection of their own (a wrong URL
        fails here at once, with libpq's reason), then open the pool."""
        keyless = key is None and not os.environ.get(KEY_VARIABLE)
        async with await connect(self._url, self._where) as connection:
            found = await migrate(connection, key, keyless, self._where)
        self._pools.append(await open_pool(self._url, self._where, min_size, max_size))
        return found

    @asynccontextmanager
    async def _transaction(self, *, read_only: bool = False) -> AsyncIterator[Cursor]:
        """One transaction on a connection of the pool, committed or rolled back; with
        `read_only`, every read sees one snapshot (a record appended meanwhile is not half
        seen)."""
        try:
            async with (
                self._pools[0].connection() as connection,
                connection.transaction(),
                connection.cursor() as cur,
            ):
                if read_only:
                    await cur.execute(sql.READ_ONLY)
                yield cur
        except psycopg.Error as exc:
            raise StoreError(f"the run store {self._where} failed: {reason(exc)}") from exc

    # ------------------------------------------------------------ driving a run

    async def create(
        self,
        header: RunHeader,
        chart_data: str,
        owner: str,
        ttl: float,
        record: StepRecord,
        effects: Sequence[EffectRecord] = (),
    ) -> tuple[Lease, str]:
        """Add a new run with its first record, leased to `owner`: one transaction, so a
        run is never stored without the input it started from. (The lease, the first
        record's signature.)

        Raises:
            RunExists: a run of that id is in the store.
        """
        return await self._await(self._create(header, chart_data, owner, ttl, record, effects))

    async def _create(
        self,
        header: RunHeader,
        chart_data: str,
        owner: str,
        ttl: float,
        record: StepRecord,
        effects: Sequence[EffectRecord],
    ) -> tuple[Lease, str]:
        rows.check_run_id(header.run_id)
        data, mac = rows.header_row(self._key, header)
        chain = Chain(0, genesis("run", header.run_id))
        events = rows.effect_rows(header.run_id, chain, 1, effects)
        record_data, record_mac, record_link = rows.record_row(chain, record)
        head = RunHead(record.seq, record_mac, chain.n, chain.digest)
        async with self._transaction() as cur:
            await cur.execute(sql.PUT_CHART, (header.chart_digest, chart_data))
            await cur.execute(
                sql.CREATE_RUN,
                (
                    header.run_id,
                    data,
                    mac,
                    header.agent,
                    header.parent_run_id,
                    header.session_id,
                    record.state_after.phase,
                    record.seq,
                    record_mac,
                    rows.turns_of(record),
                    owner,
                    ttl,
                    header.forked_from,
                    header.forked_at,
                    rows.head_sig(self._key, header.run_id, head),
                    head.n,
                    head.digest,
                ),
            )
            row = await cur.fetchone()
            if row is None:
                raise refusals.run_exists(header.run_id)
            await cur.executemany(sql.INSERT_EFFECT, events)
            args = (header.run_id, record.seq, record_data, record_mac, record_link)
            await cur.execute(sql.INSERT_RECORD, args)
        return Lease(owner, 1, row[0]), record_mac

    async def claim(self, run_id: str, owner: str, ttl: float, *, force: bool = False) -> Lease:
        """Take the run's lease: free, expired, or (`force`) from an owner known dead.

        Raises:
            RunNotFound: no such run.
            RunLeased: another owner holds an unexpired lease.
        """
        return await self._await(self._claim(run_id, owner, ttl, force))

    async def _claim(self, run_id: str, owner: str, ttl: float, force: bool) -> Lease:
        async with self._transaction() as cur:
            await cur.execute(sql.LEASE, (run_id,))
            held = await cur.fetchone()
            if held is None:
                raise refusals.run_not_found(run_id, self._where)
            await cur.execute(sql.CLAIM, (owner, ttl, run_id, force))
            taken = await cur.fetchone()
            if taken is None:
                raise refusals.run_leased(run_id, held[0], held[2])
        return Lease(owner, int(taken[0]), taken[1])

    async def renew(self, run_id: str, lease: Lease, ttl: float) -> Lease:
        """Extend the lease by `ttl` seconds from now.

        Raises:
            LeaseLost: the lease was taken over.
        """
        return await self._await(self._renew(run_id, lease, ttl))

    async def _renew(self, run_id: str, lease: Lease, ttl: float) -> Lease:
        async with self._transaction() as cur:
            await cur.execute(sql.RENEW, (ttl, run_id, lease.owner, lease.epoch))
            row = await cur.fetchone()
            if row is None:
                raise await links.lost(cur, run_id, lease)
        return Lease(lease.owner, lease.epoch, row[0])

    async def append(
        self,
        run_id: str,
        lease: Lease,
        record: StepRecord,
        previous_mac: str,
        effects: Sequence[EffectRecord],
        status: RunStatus,
        calls: Sequence[CallRecord] = (),
    ) -> str:
        """Write one record (and the effects before it, and `calls`: rows of calls that
        start, results of calls that finished, first write wins), if `lease` still holds
        and the run's head is the record before; the new head's signature.

        Raises:
            LeaseLost: another driver took the run, or wrote this seq first.
        """
        return await self._await(
            self._append(run_id, lease, record, previous_mac, effects, status, calls)
        )

    async def _append(
        self,
        run_id: str,
        lease: Lease,
        record: StepRecord,
        previous_mac: str,
        effects: Sequence[EffectRecord],
        status: RunStatus,
        calls: Sequence[CallRecord],
    ) -> str:
        where = (run_id, lease.owner, lease.epoch, record.seq - 1, previous_mac)
        async with self._transaction() as cur:
            before, chain = await links.held(cur, run_id, lease)
            if (before.seq, before.mac) != (record.seq - 1, previous_mac):
                raise await links.lost(cur, run_id, lease)
            await links.insert_effects(cur, run_id, effects, chain)
            data, mac, link = rows.record_row(chain, record)
            await cur.execute(sql.INSERT_RECORD, (run_id, record.seq, data, mac, link))
            await links.write_calls(cur, run_id, calls, chain)
            new = RunHead(record.seq, mac, chain.n, chain.digest)
            signed = (new.seq, mac, rows.head_sig(self._key, run_id, new), new.n, new.digest)
            ended = status in ("completed", "failed")  # its last record lets go of the lease
            changes = (*signed, status, record.state_after.phase, rows.turns_of(record))
            await cur.execute(sql.ADVANCE, (*changes, ended, ended, *where))
            if not cur.rowcount:
                raise await links.lost(cur, run_id, lease)
        return mac

    async def add_effects(self, run_id: str, lease: Lease, effects: Sequence[EffectRecord]) -> None:
        """Write effects that no record follows yet (when a run stops).

        Raises:
            LeaseLost: the lease was taken over.
        """
        if effects:
            await self._await(self._add_effects(run_id, lease, effects))

    async def _add_effects(
        self, run_id: str, lease: Lease, effects: Sequence[EffectRecord]
    ) -> None:
        async with self._transaction() as cur:
            head, chain = await links.held(cur, run_id, lease)
            await links.insert_effects(cur, run_id, effects, chain)
            await links.seal(cur, self._key, run_id, head, chain)

    async def start_call(self, run_id: str, lease: Lease, call: CallRecord) -> None:
        """Record that a call starts (a call already recorded keeps its row).

        Raises:
            LeaseLost: the lease was taken over.
        """
        await self._await(self._start_call(run_id, lease, call))

    async def _start_call(self, run_id: str, lease: Lease, call: CallRecord) -> None:
        async with self._transaction() as cur:
            head, chain = await links.held(cur, run_id, lease)
            await links.write_calls(cur, run_id, (replace(call, result=None),), chain)
            await links.seal(cur, self._key, run_id, head, chain)

    async def finish_call(self, run_id: str, lease: Lease, *calls: CallRecord) -> None:
        """Record calls' results, in one transaction; the first result written wins.

        Raises:
            LeaseLost: the lease was taken over.
        """
        await self._await(self._finish_call(run_id, lease, calls))

    async def _finish_call(self, run_id: str, lease: Lease, calls: Sequence[CallRecord]) -> None:
        async with self._transaction() as cur:
            head, chain = await links.held(cur, run_id, lease)
            await links.write_calls(cur, run_id, calls, chain)
            await links.seal(cur, self._key, run_id, head, chain)

    async def decide(self, run_id: str, seq: int, decisions: Sequence[ApprovalDecision]) -> None:
        """Spend approval decisions for suspension `seq`: each call is decided once (all
        of them, or none).

        Raises:
            DecisionSpent: a call of these was decided already.
        """
        await self._await(self._decide(run_id, seq, decisions))

    async def _decide(self, run_id: str, seq: int, decisions: Sequence[ApprovalDecision]) -> None:
        async with self._transaction() as cur:
            await cur.execute(sql.CHAIN, (run_id,))
            row = await cur.fetchone()
            if row is None:
                raise refusals.run_not_found(run_id, self._where)
            head, chain = RunHead(*row), Chain(row[2], row[3])
            if head.seq != seq:
                raise refusals.not_suspended_at(run_id, head.seq, seq)
            for decision in decisions:
                data, mac, link = rows.decision_row(chain, seq, decision)
                args = (run_id, seq, decision.call_id, data, mac, link)
                await cur.execute(sql.INSERT_DECISION, args)
                if await cur.fetchone() is None:
                    raise refusals.decision_spent(run_id, decision.call_id, seq)
            await links.seal(cur, self._key, run_id, head, chain)

    async def release(self, run_id: str, lease: Lease, status: RunStatus) -> None:
        """Give the lease up, leaving the run `status` (nothing, when the lease is gone)."""
        await self._await(self._release(run_id, lease, status))

    async def _release(self, run_id: str, lease: Lease, status: RunStatus) -> None:
        async with self._transaction() as cur:
            await cur.execute(sql.RELEASE, (status, run_id, lease.owner, lease.epoch))

    # ------------------------------------------------------------ reading

    async def load(self, run_id: str) -> StoredRun:
        """`get`, awaited."""
        return await self._await(self._get(run_id))

    def get(self, run_id: str) -> StoredRun:
        """Everything the store holds for `run_id`, every signature checked.

        Raises:
            RunNotFound: no such run.
            StoreCorrupt: a row does not check out.
        """
        return self._wait(self._get(run_id))

    async def _get(self, run_id: str) -> StoredRun:
        return await reads.stored(self._transaction, self._key, self._where, run_id)

    async def aheader(self, run_id: str) -> RunHeader:
        """`header`, awaited."""
        return await self._await(self._header(run_id))

    def header(self, run_id: str) -> RunHeader:
        """The run's header alone, its signature checked as `get` checks it: a read that
        does not grow with the run (`get` reads and checks every record).

        Raises:
            RunNotFound: no such run.
            StoreCorrupt: the header does not check out.
        """
        return self._wait(self._header(run_id))

    async def arevision(self, run_id: str) -> Revision:
        """`revision`, awaited."""
        return await self._await(self._revision(run_id))

    def revision(self, run_id: str) -> Revision:
        """What changes whenever the run's records, its effects' events or its row do (a
        record appended, an event stored, a lease taken, the run ended): a follower reads
        the run again, checked, only when it changed. It is not checked itself: a forged
        one can only make a follower read again, or later.

        Raises:
            RunNotFound: no such run.
        """
        return self._wait(self._revision(run_id))

    async def _revision(self, run_id: str) -> Revision:
        async with self._transaction(read_only=True) as cur:
            return await reads.revision(cur, self._where, run_id)

    async def _header(self, run_id: str) -> RunHeader:
        async with self._transaction(read_only=True) as cur:
            return (await reads.run_row(cur, self._key, self._where, run_id))[1]

    def runs(
        self, status: RunStatus | None = None, *, include_nested: bool = False
    ) -> list[RunInfo]:
        """The runs in the store, newest first: id, agent, phase, seq, status, turns, times."""
        return self._wait(self._runs(status, include_nested))

    async def aruns(
        self, status: RunStatus | None = None, *, include_nested: bool = False
    ) -> list[RunInfo]:
        return await self._await(self._runs(status, include_nested))

    async def _runs(self, status: RunStatus | None, include_nested: bool) -> list[RunInfo]:
        async with self._transaction() as cur:
            return await reads.run_list(cur, status, include_nested)

    def pending(self, run_id: str) -> tuple[ApprovalRequest, ...]:
        """The `ApprovalRequest`s a suspended run waits on (stamped: decide on these)."""
        return pending_of(self.get(run_id))

    async def apending(self, run_id: str) -> tuple[ApprovalRequest, ...]:
        return pending_of(await self.load(run_id))

    def events(self, run_id: str, after: int = 0, *, follow: bool = False) -> EventStream:
        """The run's events after the first `after` (`for` or `async for` them); with
        `follow`, wait for more until the run ends or suspends. Deltas are not stored."""
        return EventStream(
            self.get,
            run_id,
            after,
            follow,
            aget=self.load,
            revision=self.revision,
            arevision=self.arevision,
        )

    aevents = events

    def session(self, session_id: str) -> Session:
        """Conversation memory across runs (`agent.run(..., session=...)`)."""
        return Session(self, session_id)

    async def asession(self, session_id: str) -> Session:
        return self.session(session_id)

    # ------------------------------------------------------------ sessions

    def session_items(self, session_id: str) -> tuple[Item, ...]:
        return self._wait(self._session_items(session_id))

    async def _session_items(self, session_id: str) -> tuple[Item, ...]:
        async with self._transaction(read_only=True) as cur:
            return await postgres_sessions.read(cur, self._key, session_id)

    def add_session_items(self, session_id: str, items: Sequence[Item], run_id: str) -> None:
        if items:
            self._wait(self._add_session_items(session_id, items, run_id))

    async def _add_session_items(self, session_id: str, items: Sequence[Item], run_id: str) -> None:
        async with self._transaction() as cur:
            await postgres_sessions.add(cur, self._key, session_id, items, run_id)

    def clear_session(self, session_id: str) -> None:
        self._wait(self._clear_session(session_id))

    async def _clear_session(self, session_id: str) -> None:
        async with self._transaction() as cur:
            await postgres_sessions.clear(cur, session_id)

    async def _execute(self, query: str, *args: Any) -> None:
        async with self._transaction() as cur:
            await cur.execute(query, args)

    # ------------------------------------------------------------ retention

    def delete(self, run_id: str) -> int:
        """Delete a run with the runs nested in it; how many runs went.

        Raises:
            RunNotFound: no such run.
        """
        return self._wait(self._delete(sql.TREE, run_id, missing=run_id))

    async def adelete(self, run_id: str) -> int:
        return await self._await(self._delete(sql.TREE, run_id, missing=run_id))

    def prune(self, older_than: float) -> int:
        """Delete runs (with their nested runs) and session items not updated for
        `older_than` seconds; how many runs went."""
        return self._wait(self._delete(sql.OLD_TREES, older_than, sessions=older_than))

    async def aprune(self, older_than: float) -> int:
        return await self._await(self._delete(sql.OLD_TREES, older_than, sessions=older_than))

    async def _delete(
        self,
        tree: str,
        arg: Any,
        *,
        missing: str | None = None,
        sessions: float | None = None,
    ) -> int:
        async with self._transaction() as cur:
            gone = [row[0] for row in await fetch_all(cur, tree, arg)]
            if missing is not None and not gone:
                raise refusals.run_not_found(missing, self._where)
            for statement in sql.DELETE_RUNS:
                await cur.execute(statement, (gone,))
            if sessions is not None:
                for session_id, upto in await fetch_all(cur, sql.OLD_SESSIONS, sessions):
                    await postgres_sessions.prune(cur, self._key, session_id, upto)
        return len(gone)

    async def aput_payload(self, run_id: str, data: bytes) -> str:
        """Keep `data` for `run_id` (once: a second put of the same bytes is the first); its
        key, the sha256 of the bytes."""
        digest = digest_of(data)
        await self._await(self._execute(sql.PUT_PAYLOAD, run_id, digest, data))
        return digest

    async def apayload(self, run_id: str, digest: str) -> bytes:
        """The payload of `run_id` kept under `digest`, verified (`payloads.checked`)."""
        return await self._await(self._payload(run_id, digest))

    async def _payload(self, run_id: str, digest: str) -> bytes:
        async with self._transaction() as cur:
            found = await fetch_all(cur, sql.PAYLOAD, run_id, digest)
        return checked(run_id, digest, found[0][0] if found else None, self._where)

    def put_chart(self, digest: str, data: str) -> None:
        self._wait(self._execute(sql.PUT_CHART, digest, data))

    def chart(self, digest: str) -> str | None:
        return self._wait(self._chart(digest))

    async def _chart(self, digest: str) -> str | None:
        async with self._transaction() as cur:
            found = await fetch_all(cur, sql.CHART, digest)
        return found[0][0] if found else None
