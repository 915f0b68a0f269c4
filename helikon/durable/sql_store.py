"""`SqlRunStore`: the run store's operations, written once over a SQL dialect and a
connection adapter; `SqliteRunStore` and `PostgresRunStore` only open their database.

Theory of operation: each method hands one operation (`sql_writes`, `sql_reads`,
`sql_sessions`: coroutines over `sql_dialect.Db`) to the store's engine (`sql_engine`),
which runs it on the store's own thread: store IO never runs on a caller's event loop. The
async methods await the answer; their sync twins (`get`, `runs`, sessions, `delete`, ...)
wait for it, so a sync caller needs no event loop.
"""

from __future__ import annotations

import weakref
from collections.abc import Coroutine, Sequence
from typing import Any, Self, TypeVar

from helikon.core.approvals import ApprovalDecision, ApprovalRequest
from helikon.core.items import Item
from helikon.durable import sql_reads as reads
from helikon.durable import sql_sessions as sessions
from helikon.durable import sql_writes as writes
from helikon.durable.payloads import digest_of
from helikon.durable.records import (
    CallRecord,
    EffectRecord,
    Lease,
    RunHeader,
    RunInfo,
    RunStatus,
    StepRecord,
    StoredRun,
)
from helikon.durable.sql_dialect import Scope
from helikon.durable.sql_engine import Engine
from helikon.durable.views import EventStream, Revision, Session, pending_of

T = TypeVar("T")


class SqlRunStore:
    """What a SQL run store does, whatever its database (a subclass opens it, then
    `_serve`s)."""

    _scope: Scope
    _engine: Engine
    _charts: set[str]  # digests this store object has seen committed

    def _serve(self, scope: Scope, engine: Engine) -> None:
        """Start serving through `engine` (stopped on `close`, when the store is collected,
        or at exit, whichever comes first: a store never closed leaks nothing)."""
        self._scope, self._engine, self._charts = scope, engine, set()
        self._closing = weakref.finalize(self, engine.stop)

    def close(self) -> None:
        """Finish the operations under way, then close the database (safe to call twice)."""
        self._closing()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _wait(self, work: Coroutine[Any, Any, T]) -> T:
        """Run `work` on the store's thread and wait for it (the sync methods)."""
        return self._engine.wait(work)

    def _await(self, work: Coroutine[Any, Any, T]) -> Coroutine[Any, Any, T]:
        """Run `work` on the store's thread; the caller's loop goes on meanwhile. (The
        engine's coroutine itself, awaited by the caller: no frame of this one between.)"""
        return self._engine.call(work)

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
        digest = header.chart_digest
        chart = None if digest in self._charts else chart_data  # kept once per store
        made = await self._await(
            writes.create(self._scope, header, chart, owner, ttl, record, effects)
        )
        self._charts.add(digest)  # committed (charts are never deleted)
        return made

    async def claim(self, run_id: str, owner: str, ttl: float, *, force: bool = False) -> Lease:
        """Take the run's lease: free, expired, or (`force`) from an owner known dead.

        Raises:
            RunNotFound: no such run.
            RunLeased: another owner holds an unexpired lease.
        """
        return await self._await(writes.claim(self._scope, run_id, owner, ttl, force))

    async def renew(self, run_id: str, lease: Lease, ttl: float) -> Lease:
        """Extend the lease by `ttl` seconds from now (the database's now).

        Raises:
            LeaseLost: the lease was taken over.
        """
        return await self._await(writes.renew(self._scope, run_id, lease, ttl))

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
            writes.append(self._scope, run_id, lease, record, previous_mac, effects, status, calls)
        )

    async def add_effects(self, run_id: str, lease: Lease, effects: Sequence[EffectRecord]) -> None:
        """Write effects that no record follows yet (when a run stops).

        Raises:
            LeaseLost: the lease was taken over.
        """
        if effects:
            await self._await(writes.add_effects(self._scope, run_id, lease, effects))

    async def start_call(self, run_id: str, lease: Lease, call: CallRecord) -> None:
        """Record that a call starts (a call already recorded keeps its row; a result the
        record carries is not written: that is `finish_call`'s).

        Raises:
            LeaseLost: the lease was taken over.
        """
        await self._await(writes.record_calls(self._scope, run_id, lease, (call,), start=True))

    async def finish_call(self, run_id: str, lease: Lease, *calls: CallRecord) -> None:
        """Record calls' results, in one transaction; the first result written wins.

        Raises:
            LeaseLost: the lease was taken over.
        """
        await self._await(writes.record_calls(self._scope, run_id, lease, calls, start=False))

    async def decide(self, run_id: str, seq: int, decisions: Sequence[ApprovalDecision]) -> None:
        """Spend approval decisions for suspension `seq`: each call is decided once (all
        of them, or none).

        Raises:
            DecisionSpent: a call of these was decided already.
        """
        await self._await(writes.decide(self._scope, run_id, seq, decisions))

    async def release(self, run_id: str, lease: Lease, status: RunStatus) -> None:
        """Give the lease up, leaving the run `status` (nothing, when the lease is gone)."""
        await self._await(writes.release(self._scope, run_id, lease, status))

    # ------------------------------------------------------------ reading

    async def load(self, run_id: str) -> StoredRun:
        """`get`, awaited."""
        return await self._await(reads.stored(self._scope, run_id))

    def get(self, run_id: str) -> StoredRun:
        """Everything the store holds for `run_id`, read as one snapshot, every signature
        checked.

        Raises:
            RunNotFound: no such run.
            StoreCorrupt: a row does not check out.
        """
        return self._wait(reads.stored(self._scope, run_id))

    async def aheader(self, run_id: str) -> RunHeader:
        """`header`, awaited."""
        return await self._await(reads.header(self._scope, run_id))

    def header(self, run_id: str) -> RunHeader:
        """The run's header alone, its signature checked as `get` checks it: a read that
        does not grow with the run (`get` reads and checks every record).

        Raises:
            RunNotFound: no such run.
            StoreCorrupt: the header does not check out.
        """
        return self._wait(reads.header(self._scope, run_id))

    async def arevision(self, run_id: str) -> Revision:
        """`revision`, awaited."""
        return await self._await(reads.revision(self._scope, run_id))

    def revision(self, run_id: str) -> Revision:
        """What changes whenever the run's records, its effects' events or its row do (a
        record appended, an event stored, a lease taken, the run ended): a follower reads
        the run again, checked, only when it changed. It is not checked itself: a forged
        one can only make a follower read again, or later.

        Raises:
            RunNotFound: no such run.
        """
        return self._wait(reads.revision(self._scope, run_id))

    def runs(
        self, status: RunStatus | None = None, *, include_nested: bool = False
    ) -> list[RunInfo]:
        """The runs in the store, newest first: id, agent, phase, seq, status, turns, times."""
        return self._wait(reads.run_list(self._scope, status, include_nested))

    async def aruns(
        self, status: RunStatus | None = None, *, include_nested: bool = False
    ) -> list[RunInfo]:
        return await self._await(reads.run_list(self._scope, status, include_nested))

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

    # ------------------------------------------------------------ sessions

    def session(self, session_id: str) -> Session:
        """Conversation memory across runs (`agent.run(..., session=...)`)."""
        return Session(self, session_id)

    async def asession(self, session_id: str) -> Session:
        return self.session(session_id)

    def session_items(self, session_id: str) -> tuple[Item, ...]:
        return self._wait(sessions.items(self._scope, session_id))

    async def asession_items(self, session_id: str) -> tuple[Item, ...]:
        return await self._await(sessions.items(self._scope, session_id))

    def add_session_items(self, session_id: str, items: Sequence[Item], run_id: str) -> None:
        if items:
            self._wait(sessions.add(self._scope, session_id, items, run_id))

    async def aadd_session_items(self, session_id: str, items: Sequence[Item], run_id: str) -> None:
        if items:
            await self._await(sessions.add(self._scope, session_id, items, run_id))

    def clear_session(self, session_id: str) -> None:
        self._wait(sessions.clear(self._scope, session_id))

    async def aclear_session(self, session_id: str) -> None:
        await self._await(sessions.clear(self._scope, session_id))

    # ------------------------------------------------------------ retention

    def delete(self, run_id: str) -> int:
        """Delete a run with the runs nested in it; how many runs went.

        Raises:
            RunNotFound: no such run.
        """
        return self._wait(sessions.delete(self._scope, run_id))

    async def adelete(self, run_id: str) -> int:
        return await self._await(sessions.delete(self._scope, run_id))

    def prune(self, older_than: float) -> int:
        """Delete runs (with their nested runs) and session items not updated for
        `older_than` seconds, except runs a live driver holds; how many runs went."""
        return self._wait(sessions.prune(self._scope, older_than))

    async def aprune(self, older_than: float) -> int:
        return await self._await(sessions.prune(self._scope, older_than))

    # ------------------------------------------------------------ payloads and charts

    def put_payload(self, run_id: str, data: bytes) -> str:
        digest = digest_of(data)
        self._wait(writes.execute(self._scope, self._scope.sql.PUT_PAYLOAD, run_id, digest, data))
        return digest

    async def aput_payload(self, run_id: str, data: bytes) -> str:
        """Keep `data` for `run_id` (once: a second put of the same bytes is the first); its
        key, the sha256 of the bytes."""
        digest = digest_of(data)
        put = writes.execute(self._scope, self._scope.sql.PUT_PAYLOAD, run_id, digest, data)
        await self._await(put)
        return digest

    def payload(self, run_id: str, digest: str) -> bytes:
        return self._wait(reads.payload(self._scope, run_id, digest))

    async def apayload(self, run_id: str, digest: str) -> bytes:
        """The payload of `run_id` kept under `digest`, verified (`payloads.checked`)."""
        return await self._await(reads.payload(self._scope, run_id, digest))

    def put_chart(self, digest: str, data: str) -> None:
        self._wait(writes.execute(self._scope, self._scope.sql.PUT_CHART, digest, data))

    def chart(self, digest: str) -> str | None:
        return self._wait(reads.chart(self._scope, digest))
