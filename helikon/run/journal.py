"""A run's journal in a run store: what the driver writes at every boundary, and reads back
to resume.

Theory of operation: the driver hands its journal each transition as it applies it, and the
journal commits the record before the driver starts the effect the transition asks for.
Events that effects produce between transitions are kept in order and written with the next
record (or when the run stops). A tool call gets a row as it starts and its result as it
finishes. Two of those rows ride in a record's transaction instead of one of their own:

- The calls a record asks to start at once (its `ExecuteTools` batch, up to the parallel
  limit) get their rows in the record's own transaction, committed before any of them
  starts, as a row of their own would be. A crash after that commit and before a call
  started leaves it "in flight" (its outcome unknown), which is what the store must assume
  of any call with a row and no result anyway.
- The result that completes a batch is written with the next record, the one that consumes
  it. Between the two, the driver only computes that record's transition, which is pure: no
  effect starts and nothing outside the process can see the result, so nothing depends on
  it before it is committed. A crash in between is a crash a moment before the result's own
  write would have landed: the call is "in flight" and its tool's rule applies (run again
  if `read_only` or `idempotent`, else the "interrupted" result). Every other result is
  written as its call finishes, in one transaction with the results of the calls that
  finish in the same pass of the event loop (the first of them waits that pass out), so a
  finished call is never held back by a slower one, and calls that finish together commit
  once; when the batch's last result came in that pass too, no call is slower, and they
  ride with the next record as it does, for the same reason (a crash then loses what a
  crash a moment earlier, before their own write, would have). (Output guardrails are
  effects: the driver flushes held results before they run.)

Every write is conditioned on the run's lease; a lease renews itself while the
run goes on, and a journal whose lease was taken over refuses to write (`LeaseLost`): the
driver then stops the run without writing anything more.

What is written is redacted when the run redacts (`RunConfig(redact=...)`), and never here:
the listeners' port (`helikon.run.listening`, the one redaction exit) hands the journal a
record and the effects' events as it reports them, and the driver a call's result and the
approval decisions as the port exports them (`Listeners.exported`), before they come here.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import socket
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from helikon.core.approvals import ApprovalDecision, arguments_hash
from helikon.core.codec import dumps, to_data
from helikon.core.events import DELTAS
from helikon.core.items import ToolCall, ToolResult
from helikon.core.state import TransitionOutcome
from helikon.core.table import TransitionTable
from helikon.core.tool_spec import ToolSpec
from helikon.core.transition import Match
from helikon.durable.records import (
    CallRecord,
    EffectRecord,
    Lease,
    RunHeader,
    RunStatus,
    StoredRun,
    StoreError,
    step_record,
)
from helikon.durable.store import RunStore
from helikon.trace.times import StepTime, Times, emitted, iso

LEASE_SECONDS = 30.0
"""How long a lease lasts without renewal; a run renews it every third of that."""


def owner_id() -> str:
    """This driver's name in leases: host, process and a random part."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


FORKING = "fork:"
"""How the owner of a fork's lease begins while the fork is being copied (`fork_stored`):
`fork:HOST:PID:RANDOM`, the copying process's `owner_id`."""
FORKING_SECONDS = 10 * 365 * 24 * 3600.0
"""A fork's lease while it is copied: it never expires, so a copy cut short by a crash is
never taken for a run whose driver died (`runs recover`, `force=True`); it is deleted."""


def copier_gone(owner: str | None) -> bool:
    """Whether `owner` is a fork's lease (`FORKING`) whose copying process is known to be
    gone: it ran on this host and no process has its pid now. A copier on another host is
    never known gone (its lease does not expire either): whoever knows it died says so."""
    if owner is None or not owner.startswith(FORKING):
        return False
    host, _, rest = owner[len(FORKING) :].partition(":")
    pid = rest.partition(":")[0]
    if host != socket.gethostname() or not (pid.isascii() and pid.isdigit()):
        return False
    if not 0 < int(pid) < 2**31:  # row text: not a pid os.kill takes (0 is a group)
        return False
    try:
        os.kill(int(pid), 0)  # signal 0: is there such a process (of any user)?
    except ProcessLookupError:
        return True
    except OSError:  # there is, another user's: not gone
        return False
    return False


def forking_refusal(run_id: str, owner: str | None) -> str | None:
    """Why run `run_id`, whose lease `owner` holds, cannot be resumed: its fork's copy has
    not finished (the copy was cut short, or is still going); None for any other owner."""
    if owner is None or not owner.startswith(FORKING):
        return None
    copier = owner[len(FORKING) :]
    refusal = f"run {run_id!r} is a fork whose copy has not finished, so it is never resumed"
    if copier_gone(owner):
        return (
            f"{refusal}; the process that copied it ({copier}) is gone: delete it "
            f"(helikon runs delete {run_id}) and fork again"
        )
    return (
        f"{refusal}; the process copying it ({copier}) is not known to be gone: resume "
        f"the fork once the copy is done, or, if that process died, delete it (helikon "
        f"runs delete {run_id} --force) and fork again"
    )


_CHARTS: dict[int, tuple[TransitionTable, str, str]] = {}
_KEPT_CHARTS = 32


def chart_of(table: TransitionTable) -> tuple[str, str]:
    """(digest, JSON) of a chart as a store keeps it, computed once per table: both walk
    the whole table (hundreds of microseconds), and every durable run needs them. Kept for
    the last `_KEPT_CHARTS` tables, by identity (a table is immutable)."""
    found = _CHARTS.get(id(table))
    if found is not None and found[0] is table:
        return found[1], found[2]
    if len(_CHARTS) >= _KEPT_CHARTS:
        del _CHARTS[next(iter(_CHARTS))]
    digest, data = table.digest, dumps(table.data())
    _CHARTS[id(table)] = (table, digest, data)
    return digest, data


def toolset_digest(specs: Sequence[ToolSpec]) -> str:
    """SHA-256 of the tools a run offers (names, descriptions, schemas), in order."""
    data = [to_data(spec) for spec in specs]
    text = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def status_of(phase: str, suspended: bool) -> RunStatus:
    if phase == "Done":
        return "completed"
    if phase == "Failed":
        return "failed"
    return "suspended" if suspended else "running"


class Journal:
    """The writes of one run to a store, under one lease (see the module docstring)."""

    def __init__(
        self,
        store: RunStore,
        run_id: str,
        lease: Lease | None,
        *,
        head_mac: str = "",
        calls: Mapping[tuple[int, str], CallRecord] | None = None,
        ttl: float = LEASE_SECONDS,
        create: tuple[Callable[[], RunHeader], str, str] | None = None,
    ) -> None:
        self.store = store
        self.run_id = run_id
        self.lease = lease
        self.head_mac = head_mac
        self.calls: dict[tuple[int, str], CallRecord] = dict(calls or {})
        self.ttl = ttl
        self._create = create  # (header, chart data, owner): made with the first record
        self._effects: list[EffectRecord] = []
        self._held: list[CallRecord] = []  # the batch's last result, to ride with a record
        self._finishing: list[CallRecord] = []  # results of this pass, written together
        self._starting: dict[tuple[int, str], CallRecord] = {}  # rows written with a record
        self._timer: asyncio.TimerHandle | None = None  # until the first renewal is due
        self._renewal: asyncio.Task[None] | None = None
        self._on_lost: Callable[[Exception], None] | None = None
        self.lost: Exception | None = None
        self.released = False
        self.resuming = False  # the next record is the first of a resumption (`resumed`)

    @classmethod
    def new(
        cls,
        store: RunStore,
        run_id: str,
        header: Callable[[], RunHeader],
        chart_data: str,
        *,
        ttl: float,
    ) -> Journal:
        """The journal of a run not in the store yet: it is added with its first record, in
        one transaction, so a stored run always holds the input it started from. `header`
        is asked for then (the run's tools are known by its first transition)."""
        create = (header, chart_data, owner_id())
        return cls(store, run_id, None, ttl=ttl, create=create)

    @classmethod
    def resumed(
        cls,
        store: RunStore,
        stored: StoredRun,
        lease: Lease,
        *,
        ttl: float,
    ) -> Journal:
        journal = cls(
            store,
            stored.header.run_id,
            lease,
            head_mac=stored.head_mac,
            calls={(c.seq, c.call_id): c for c in stored.calls},
            ttl=ttl,
        )
        journal.resuming = True
        return journal

    # ------------------------------------------------------------ the lease

    def keep_alive(self, on_lost: Callable[[Exception], None]) -> None:
        """Renew the lease every third of its length until `close`; `on_lost` is called
        (once) when a renewal is refused. A run not created yet starts renewing when its
        first record makes it. (A timer, not a task, until the first renewal is due: most
        runs end before it, and a task costs one to start and stop.)"""
        self._on_lost = on_lost
        if self._timer is None and self._renewal is None and self.lease is not None:
            loop = asyncio.get_running_loop()
            self._timer = loop.call_later(self.ttl / 3, self._start_renewing, on_lost)

    def _start_renewing(self, on_lost: Callable[[Exception], None]) -> None:
        self._timer = None
        self._renewal = asyncio.get_running_loop().create_task(self._renew(on_lost))

    async def _renew(self, on_lost: Callable[[Exception], None]) -> None:
        while True:
            try:
                assert self.lease is not None
                self.lease = await self.store.renew(self.run_id, self.lease, self.ttl)
            except Exception as exc:
                self.lost = exc
                on_lost(exc)
                return
            await asyncio.sleep(self.ttl / 3)

    async def close(self, status: RunStatus) -> None:
        """Write what is left, release the lease and stop renewing it."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._renewal is not None:
            self._renewal.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._renewal
            self._renewal = None
        if self.lost is not None or self.lease is None or self.released:
            return
        await self.flush()
        await self.store.release(self.run_id, self.lease, status)

    # ------------------------------------------------------------ writing

    def effect(self, after_seq: int, event: Any) -> None:
        """Keep an effect's event, as the listeners' port gives it (redacted when the run
        redacts), to write with the next record (deltas are not kept)."""
        if not isinstance(event, DELTAS):
            self._effects.append(EffectRecord(after_seq, event, iso(emitted(event))))

    async def flush(self) -> None:
        """Write what waits for the next record: a held result, and effects' events."""
        if self.lease is None:
            return
        held, self._held = self._held, []
        if held:
            await self.store.finish_call(self.run_id, self.lease, *held)
        if self._effects:
            effects, self._effects = self._effects, []
            await self.store.add_effects(self.run_id, self.lease, effects)

    async def step(
        self,
        seq: int,
        inp: Any,
        match: Match,
        outcome: TransitionOutcome,
        suspended: bool,
        starts: Sequence[ToolCall] = (),
        times: Times | None = None,
    ) -> None:
        """Commit one transition, as the listeners' port gives it (redacted when the run
        redacts), and the effects before it, a held result, and the rows of the calls in
        `starts`, which its effect starts at once, before its effect starts. `times` are
        (when it was applied, how long the effect before it took, each tool call's
        seconds, whether it resumes the run), as the run read them (`helikon.trace.times`);
        the first record after the journal's own resumption says so too."""
        if isinstance(self.lost, StoreError):  # the store failed: nothing more is written
            raise self.lost
        time = None
        if times is not None:
            at, took, timed, resumed = times
            time = StepTime.of(at, took, timed, resumed or self.resuming)
        self.resuming = False
        record = step_record(seq, inp, match, outcome, time)
        effects, self._effects = self._effects, []
        if self.lease is None:
            assert self._create is not None
            header, chart_data, owner = self._create
            self.lease, self.head_mac = await self.store.create(
                header(), chart_data, owner, self.ttl, record, effects
            )
            if self._on_lost is not None:
                self.keep_alive(self._on_lost)
            return
        calls, self._held = self._held, []
        self._starting = {}
        for call in starts:
            if (seq, call.call_id) not in self.calls:
                started = CallRecord(seq, call.call_id, call.name, arguments_hash(call.arguments))
                self._starting[seq, call.call_id] = started
                calls.append(started)
        status = status_of(outcome.next_state.phase, suspended)
        self.head_mac = await self.store.append(
            self.run_id, self.lease, record, self.head_mac, effects, status, calls
        )
        # The record of a run that ended released its lease (a store does so in the same
        # transaction): nothing comes after it, so `close` has nothing to write.
        self.released = status in ("completed", "failed")

    async def call_started(self, seq: int, call: ToolCall) -> None:
        """Write the row of a call that starts, unless the record that asked for it
        carried it (its arguments were hashed then: a call's are hashed once)."""
        key = (seq, call.call_id)
        if key in self.calls:
            return
        written = self._starting.pop(key, None)
        if written is not None:  # its row went with the record that asked for it
            self.calls[key] = written
            return
        assert self.lease is not None, "a call starts after the run's first record"
        record = CallRecord(seq, call.call_id, call.name, arguments_hash(call.arguments))
        self.calls[key] = record
        await self.store.start_call(self.run_id, self.lease, record)

    async def call_finished(
        self, seq: int, call: ToolCall, result: ToolResult, *, last: bool = False
    ) -> None:
        """Write a call's result, as the listeners' port exports it (with the others of this
        pass of the event loop), or, when it is the `last` of its batch, hold it for the
        next record (see the module docstring)."""
        started = self.calls.get((seq, call.call_id))
        if started is None or started.finished or self.lease is None:
            return
        record = CallRecord(seq, call.call_id, call.name, started.arguments_hash, result)
        self.calls[(seq, call.call_id)] = record
        if last:
            self._held.append(record)
            return
        self._finishing.append(record)
        if len(self._finishing) > 1:
            return  # the first result of this pass writes it
        try:
            await asyncio.sleep(0)  # the calls that finish in this pass join the write
        except asyncio.CancelledError:  # the batch stops: they ride with the next record
            self._held += self._finishing
            self._finishing = []
            raise
        batch, self._finishing = self._finishing, []
        if any(held.seq == seq for held in self._held):  # the batch is complete
            self._held[:0] = batch
            return
        await self.store.finish_call(self.run_id, self.lease, *batch)

    async def decide(self, seq: int, decisions: Sequence[ApprovalDecision]) -> None:
        """Spend the decisions a run resumes with, as the listeners' port exports them."""
        await self.store.decide(self.run_id, seq, list(decisions))
