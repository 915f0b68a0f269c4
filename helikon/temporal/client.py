"""Starting runs on Temporal, deciding their approvals, and reading their events.

`start_run` starts `HelikonWorkflow` with the run id as the workflow id; the run's events
are read from the run store the workers write (`events`), as `helikon runs show` reads them:
the same `AgentEvent`s a local run streams, without the token deltas a store never keeps.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from temporalio.client import Client, WorkflowFailureError, WorkflowHandle
from temporalio.exceptions import CancelledError

from helikon.core.approvals import ApprovalDecision
from helikon.core.events import TERMINAL_EVENTS, AgentEvent, AgentUpdated, stamp
from helikon.core.items import Item
from helikon.durable.records import RunNotFound, StepRecord, StoredRun
from helikon.durable.store import RunStore
from helikon.durable.views import timeline_of
from helikon.run.prepare import as_items
from helikon.run.spec import AgentSpec
from helikon.temporal import messages as m
from helikon.temporal.registry import AgentRegistry
from helikon.trace.times import parse_iso


def chart_of(agent: AgentSpec) -> str:
    """The digest of the chart `agent` runs (what a worker checks a run against).

    Raises:
        RedactionUnsupported: `agent`, or one it reaches, sets `RunConfig.redact`.
    """
    return AgentRegistry([agent]).facts(agent.name).digest


async def start_run(
    client: Client,
    agent: AgentSpec | str,
    input: str | Sequence[Item],
    *,
    task_queue: str,
    run_id: str | None = None,
) -> WorkflowHandle[Any, Any]:
    """Start a run of `agent` (an agent, whose chart the worker must run; or a name) on
    `task_queue`; its handle (`handle.id` is the run id).

    Raises:
        RedactionUnsupported: `agent`, or one it reaches, sets `RunConfig.redact`, which
            the Temporal runtime does not apply; nothing is started.
    """
    name = agent if isinstance(agent, str) else agent.name
    chart = "" if isinstance(agent, str) else chart_of(agent)
    run_id = run_id or uuid.uuid4().hex
    request = m.RunRequest(run_id, name, chart, as_items(input), task_queue=task_queue)
    return await client.start_workflow(
        m.WORKFLOW, m.to_payload(request), id=run_id, task_queue=task_queue
    )


async def outcome(handle: WorkflowHandle[Any, Any]) -> m.RunOutcome:
    """How the run ended (waits for it): Done or Failed, as a local run ends.

    A cancelled run ends `Failed(Cancelled)` and its workflow Canceled, which carries no
    result: its outcome is read from the workflow's memo (`OUTCOME_MEMO`).

    Raises:
        WorkflowFailureError: the workflow failed (a refused run), or was cancelled with no
            outcome kept (before its run ended, e.g. by a worker without this rule).
        PayloadError: the result, or the kept outcome, is not a `RunOutcome`.
    """
    try:
        data = await handle.result()
        where = "the workflow's result"
    except WorkflowFailureError as exc:
        if not isinstance(exc.cause, CancelledError):
            raise
        memo = await (await handle.describe()).memo()
        if m.OUTCOME_MEMO not in memo:
            raise
        data, where = memo[m.OUTCOME_MEMO], "the cancelled workflow's memo"
    result: m.RunOutcome = m.from_payload(m.RunOutcome, data, where)
    return result


async def decide(
    handle: WorkflowHandle[Any, Any], decisions: Sequence[ApprovalDecision]
) -> m.Status:
    """Decide the run's pending approvals by update; refused (`WorkflowUpdateFailedError`)
    unless every decision binds to a pending call of the suspension it waits at."""
    data = await handle.execute_update("decide", [m.to_payload(d) for d in decisions])
    status: m.Status = m.from_payload(m.Status, data, "decide's answer")
    return status


async def current(handle: WorkflowHandle[Any, Any]) -> m.Status:
    """Where the run is now (the `current` query)."""
    status: m.Status = m.from_payload(m.Status, await handle.query("current"), "current()")
    return status


async def events(
    store: RunStore,
    run_id: str,
    after: int = 0,
    *,
    wait: float = 30.0,
    poll: float = 0.05,
    steps: Callable[[StepRecord], None] | None = None,
) -> AsyncIterator[AgentEvent]:
    """The run's events from the store after the first `after`, following it until the next
    terminal event (a suspension too: decide it, then follow again after the events seen);
    waits up to `wait` seconds for the run to appear in the store. While it waits it reads
    the run's `store.revision` every `poll` seconds, and the whole run only once that changed.

    Each event carries the time its row says it was emitted (`AgentEvent.at`: the
    workflow's `workflow.now()`), as a local run's stream carries when it streamed it; a
    row stored without a time gives None.

    A handoff target's events follow the `AgentUpdated` that starts it, all but its
    terminal one, as a local run streams them (they are stored in the target's own run;
    `after` counts the run's own events only). `steps`, when given, is told each record
    (the run's and its handoff targets') before its events, as a local run's trace sink is
    told each transition: what names a custom phase and shows an effect's result.

    Raises:
        RunNotFound: the run, or a handoff target's, did not appear in time.
    """
    deadline = time.monotonic() + wait
    told: set[int] = set()  # the records `steps` was told of
    while True:
        mark, stored = await _read(store, run_id, deadline, poll)
        for entry, target in _fresh(stored, after, told):
            if isinstance(entry, StepRecord):
                if steps is not None:
                    steps(entry)
                continue
            after += 1
            yield entry
            if entry.type in TERMINAL_EVENTS:
                return
            if target is not None:
                async for nested in events(store, target, wait=wait, poll=poll, steps=steps):
                    if nested.type not in TERMINAL_EVENTS:
                        yield nested
        await asyncio.sleep(poll)
        while await store.arevision(run_id) == mark:  # the run is read again once it changed
            await asyncio.sleep(poll)


async def _read(
    store: RunStore, run_id: str, deadline: float, poll: float
) -> tuple[Any, StoredRun]:
    """The run's revision, then the run, once it is in the store (until `deadline`)."""
    while True:
        try:  # the revision first: a write landing before the read is read again, not missed
            return await store.arevision(run_id), await store.load(run_id)
        except RunNotFound:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(poll)


def _fresh(
    stored: StoredRun, after: int, told: set[int]
) -> list[tuple[AgentEvent | StepRecord, str | None]]:
    """The run's timeline (`_own_timeline`) after its first `after` events: the events,
    and the records not `told` yet (which are added to it)."""
    fresh: list[tuple[AgentEvent | StepRecord, str | None]] = []
    seen = 0
    for entry, target in _own_timeline(stored):
        if isinstance(entry, StepRecord):
            if seen >= after and entry.seq not in told:
                told.add(entry.seq)
                fresh.append((entry, None))
            continue
        seen += 1
        if seen > after:
            fresh.append((entry, target))
    return fresh


def _own_timeline(stored: StoredRun) -> list[tuple[AgentEvent | StepRecord, str | None]]:
    """A stored run's records and events in stream order (`timeline_of`), each
    `AgentUpdated` with the id of the handoff target's run it starts (`{run_id}/{seq}`)."""
    run_id = stored.header.run_id
    handoffs = [
        f"{run_id}/{effect.after_seq}"
        for effect in stored.effects
        if isinstance(effect.event, AgentUpdated)
    ]
    ordered: list[tuple[AgentEvent | StepRecord, str | None]] = []
    for entry in timeline_of(stored):
        if isinstance(entry, StepRecord):
            at = _seconds(entry.time.at if entry.time is not None else None)
            ordered.append((entry, None))
            ordered += [(_stamped(event, at), None) for event in entry.events]
            continue
        event = _stamped(entry.event, _seconds(entry.at))
        target = handoffs.pop(0) if isinstance(event, AgentUpdated) and handoffs else None
        ordered.append((event, target))
    return ordered


def _seconds(at: str | None) -> float | None:
    return None if at is None else parse_iso(at)


def _stamped(event: AgentEvent, at: float | None) -> AgentEvent:
    """`event` read from its row, stamped with the row's time (`AgentEvent.at`)."""
    if at is not None:
        stamp(event, at)
    return event
