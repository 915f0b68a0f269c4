"""Reading a stored run the way users ask for it: its pending approvals, its event stream
(to reconnect a UI) and its timeline (its steps among its events), and sessions,
conversation memory kept across runs.

These work on any store: they only read `StoredRun` values (`store.get`) and the session
methods every store has.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from typing import Any, Protocol

from helikon.core.approvals import ApprovalDecision, ApprovalRequest
from helikon.core.events import TERMINAL_EVENTS, AgentEvent
from helikon.core.items import Item
from helikon.core.state import NeedsApproval
from helikon.durable.records import EffectRecord, StepRecord, StoredRun

FOLLOW_POLL = 0.05
"""Seconds between looks at the store while following a run that is still going."""

Revision = tuple[Any, ...]
"""What `store.revision(run_id)` answers: the same while nothing a reader of the run sees
has changed, so a follower reads the whole run again only when it differs."""


def pending_of(stored: StoredRun) -> tuple[ApprovalRequest, ...]:
    """The requests a stored run waits on, stamped with its run id and suspension seq: the
    calls of its suspension no decision was spent on (`spent_of`)."""
    if not stored.records:
        return ()
    state = stored.records[-1].state_after
    if not isinstance(state, NeedsApproval):
        return ()
    seq = stored.records[-1].seq
    decided = {decision.call_id for decision in spent_of(stored)}
    return tuple(
        request.bound(stored.header.run_id, seq)
        for request in state.pending
        if request.call.call_id not in decided
    )


def spent_of(stored: StoredRun) -> tuple[ApprovalDecision, ...]:
    """The decisions spent at the suspension a stored run waits at, not applied yet: a
    resume spends its decisions, then commits the step they lead to, so a crash in between
    leaves them here; the next resume applies them (they are spent once, never asked again)."""
    state = stored.records[-1].state_after if stored.records else None
    if not isinstance(state, NeedsApproval):
        return ()
    head = stored.records[-1].seq
    waiting = {request.call.call_id for request in state.pending}
    return tuple(
        decision
        for seq, decision in stored.decisions
        if seq == head and decision.call_id in waiting
    )


def events_of(stored: StoredRun) -> list[AgentEvent]:
    """A stored run's own events in the order it streamed them (deltas are not stored)."""
    events: list[AgentEvent] = []
    for entry in timeline_of(stored):
        if isinstance(entry, StepRecord):
            events.extend(entry.events)
        else:
            events.append(entry.event)
    return events


def timeline_of(stored: StoredRun) -> list[StepRecord | EffectRecord]:
    """A stored run's records and its effects' events in the order it streamed them: each
    record (the step, then the events it emitted) followed by the events its effect
    produced. What shows a stored run step by step (`helikon runs show`, a Temporal run's
    follower): which phase each step entered, the result an effect fed back, and when."""
    by_seq: dict[int, list[EffectRecord]] = {}
    for effect in stored.effects:
        by_seq.setdefault(effect.after_seq, []).append(effect)
    timeline: list[StepRecord | EffectRecord] = list(by_seq.get(0, ()))
    for record in stored.records:
        timeline.append(record)
        timeline.extend(by_seq.get(record.seq, ()))
    return timeline


class EventStream:
    """A stored run's events after the first `after`, to iterate with `for` or `async for`.

    With `follow`, it waits for events still to come until the run's stream has ended (a
    terminal event), looking at the store every `FOLLOW_POLL` seconds: at the run's
    `revision` when the store gives one (a read that does not grow with the run), reading
    the run again only when that changed. The revision is read before the run, so a write
    that lands in between is read again, never missed. `async for` reads through `aget` and
    `arevision` when the store has them (a store whose reads are IO of their own).
    """

    def __init__(
        self,
        get: Callable[[str], StoredRun],
        run_id: str,
        after: int,
        follow: bool,
        *,
        aget: Callable[[str], Awaitable[StoredRun]] | None = None,
        revision: Callable[[str], Revision] | None = None,
        arevision: Callable[[str], Awaitable[Revision]] | None = None,
    ) -> None:
        self._get = get
        self._aget = aget
        self._revision = revision
        self._arevision = arevision
        self.run_id = run_id
        self.after = after
        self.follow = follow

    @staticmethod
    def _batch(stored: StoredRun, seen: int) -> tuple[list[AgentEvent], bool]:
        events = events_of(stored)
        ended = bool(events) and events[-1].type in TERMINAL_EVENTS
        return events[seen:], ended

    def __iter__(self) -> Iterator[AgentEvent]:
        seen = self.after
        while True:
            mark = self._mark()
            fresh, ended = self._batch(self._get(self.run_id), seen)
            yield from fresh
            seen += len(fresh)
            if ended or not self.follow:
                return
            time.sleep(FOLLOW_POLL)
            while mark is not None and self._mark() == mark:
                time.sleep(FOLLOW_POLL)

    async def __aiter__(self) -> AsyncIterator[AgentEvent]:
        seen = self.after
        while True:
            mark = await self._amark()
            if self._aget is None:  # a store whose reads block: off the event loop
                stored = await asyncio.to_thread(self._get, self.run_id)
            else:
                stored = await self._aget(self.run_id)
            fresh, ended = self._batch(stored, seen)
            for event in fresh:
                yield event
            seen += len(fresh)
            if ended or not self.follow:
                return
            await asyncio.sleep(FOLLOW_POLL)
            while mark is not None and await self._amark() == mark:
                await asyncio.sleep(FOLLOW_POLL)

    def _mark(self) -> Revision | None:
        return self._revision(self.run_id) if self._revision is not None else None

    async def _amark(self) -> Revision | None:
        if self._arevision is not None:
            return await self._arevision(self.run_id)
        if self._revision is not None:
            return await asyncio.to_thread(self._revision, self.run_id)
        return None


class SessionStore(Protocol):
    """A store's sessions: the part of `RunStore` (which extends it) a `Session` uses."""

    def session_items(self, session_id: str) -> tuple[Item, ...]: ...
    async def asession_items(self, session_id: str) -> tuple[Item, ...]: ...
    def add_session_items(self, session_id: str, items: Sequence[Item], run_id: str) -> None: ...
    async def aadd_session_items(
        self, session_id: str, items: Sequence[Item], run_id: str
    ) -> None: ...
    def clear_session(self, session_id: str) -> None: ...
    async def aclear_session(self, session_id: str) -> None: ...


class Session:
    """A conversation kept across runs: `agent.run(text, session=session)` starts from the
    session's items and, when the run ends, adds the items the run added (its input too)."""

    def __init__(self, store: SessionStore, session_id: str) -> None:
        self.store = store
        self.session_id = session_id

    def __repr__(self) -> str:
        return f"Session({self.session_id!r})"

    def items(self) -> tuple[Item, ...]:
        return self.store.session_items(self.session_id)

    async def aitems(self) -> tuple[Item, ...]:
        return await self.store.asession_items(self.session_id)

    def add(self, items: Sequence[Item], run_id: str = "") -> None:
        self.store.add_session_items(self.session_id, items, run_id)

    async def aadd(self, items: Sequence[Item], run_id: str = "") -> None:
        await self.store.aadd_session_items(self.session_id, items, run_id)

    def clear(self) -> None:
        self.store.clear_session(self.session_id)

    async def aclear(self) -> None:
        await self.store.aclear_session(self.session_id)
