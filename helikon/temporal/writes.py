"""Writing a Temporal run's records to the run store: first write wins by (run_id, seq).

On Temporal the workflow owns the run; an activity may run twice (a retry, a worker that
died after writing), so every write is idempotent: steps at or below the stored head are
checked equal to what is stored and skipped, and events already stored after a step are not
stored again. A step travels as its input and the row it took (`Step`); its full record is
rebuilt here by applying the same pure `transition` to the stored head's state.

The store's lease is held by the workflow's name (`owner_of`) with a lease that
does not run out, so a local driver never resumes a run a workflow owns; it is released when
the run ends, or when its workflow ends without it (`Writes.released`: a nested run that
ends at its suspension). Writes of one run never race: the workflow sends its steps with one
activity at a time.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from helikon.core.codec import dumps
from helikon.core.context import TransitionCtx
from helikon.core.state import TERMINAL_PHASES
from helikon.core.tool_spec import ListedTool
from helikon.core.transition import initial_state, matched_transition
from helikon.core.values import value
from helikon.durable.records import (
    EffectRecord,
    RunHeader,
    RunNotFound,
    StepRecord,
    StoredRun,
    StoreError,
    step_record,
)
from helikon.durable.store import RunStore
from helikon.run.journal import status_of
from helikon.temporal.messages import Step, Writes
from helikon.temporal.registry import AgentFacts

LEASE_TTL = 1e8
"""Seconds: a workflow's lease on its run outlives any run (it is released at the end)."""


class RunDiverged(StoreError):
    """The store holds another record at a seq this workflow writes: not this workflow's run
    (a local run of the same id), or a workflow whose code changed without versioning."""


def owner_of(run_id: str) -> str:
    return f"temporal:{run_id}"


FactsFor = Callable[[Sequence[ListedTool], str], AgentFacts]
"""The facts of the run's agent given the tools the run listed from its sources, and the
digest of the chart a stored run was recorded on ("" for a new run)."""


@value
class Written:
    """A run as its activity needs it after a write: its header and every record, those
    stored before and those just written (what `store.load` would read back, without
    reading the whole run again)."""

    header: RunHeader
    records: tuple[StepRecord, ...]


async def write(store: RunStore, writes: Writes, facts_for: FactsFor) -> Written | None:
    """Write `writes` (see the module docstring), each step's record rebuilt with the
    context of the run's facts (`facts_for` the tools it listed: those `writes` creates it
    with, else those its header holds), which also give a new run its header and chart;
    the run after them, or None when there was nothing to write.

    Raises:
        RunDiverged: a step at a seq already stored differs from the one written, or
            `transition` takes another row than the workflow did.
        StoreError: the store failed (the activity retries).
    """
    if not writes.steps and not writes.effects:
        return None
    run_id = writes.run_id
    try:
        stored: StoredRun | None = await store.load(run_id)
    except RunNotFound:
        stored = None
    steps = list(writes.steps)
    effects = list(writes.effects)
    if stored is None:
        if not writes.create or not steps:
            raise StoreError(
                f"run {run_id!r} is not in the store {store.url} and these writes do not "
                "create it: was the store emptied under a running workflow?"
            )
        facts = facts_for(writes.tools, "")
        ctx = facts.ctx
        first = rebuilt(run_id, initial_state(ctx), steps.pop(0), ctx)
        before = [e for e in effects if e.after_seq < first.seq]
        effects = [e for e in effects if e.after_seq >= first.seq]
        table = ctx.table
        header = RunHeader(
            run_id,
            facts.agent.name,
            table.name,
            table.digest,
            facts.toolset,
            writes.parent_run_id,
            tools=facts.listed,
        )
        chart = dumps(table.data())
        await store.create(header, chart, owner_of(run_id), LEASE_TTL, first, before)
        stored = await store.load(run_id)
    else:
        facts = facts_for(stored.header.tools, stored.header.chart_digest)  # a kept version
        ctx = facts.ctx
    _check_ours(stored, facts)
    steps, effects = _new_only(stored, steps, effects)
    state = stored.records[-1].state_after
    ends = state.phase in TERMINAL_PHASES or writes.released
    held = ends and stored.info.lease_owner is not None
    if not steps and not effects and not held:  # held: it ended at its first step
        return Written(stored.header, stored.records)
    records = list(stored.records)
    lease = await store.claim(run_id, owner_of(run_id), LEASE_TTL, force=True)
    head_mac = stored.head_mac
    for step in steps:
        record = rebuilt(run_id, state, step, ctx)
        records.append(record)
        state = record.state_after
        before = [e for e in effects if e.after_seq < record.seq]
        effects = [e for e in effects if e.after_seq >= record.seq]
        status = status_of(record.state_after.phase, writes.suspended)
        head_mac = await store.append(run_id, lease, record, head_mac, before, status)
    if effects:
        await store.add_effects(run_id, lease, effects)
    if state.phase in TERMINAL_PHASES or writes.released:
        await store.release(run_id, lease, status_of(state.phase, writes.suspended))
    return Written(stored.header, tuple(records))


def rebuilt(run_id: str, state: Any, step: Step, ctx: TransitionCtx) -> StepRecord:
    """The full record of `step` from the state before it: `transition` applied again (it
    is pure), checked to take the row the workflow took.

    Raises:
        RunDiverged: another row.
    """
    if step.record is not None:
        return step.record
    match, outcome = matched_transition(state, step.input, ctx)
    if match.row.index != step.row:
        raise RunDiverged(
            f"run {run_id!r}: step {step.seq} took row {step.row} in the workflow but row "
            f"{match.row.index} here: the workflow and this worker run different charts"
        )
    return step_record(step.seq, step.input, match, outcome, step.time)


def _check_ours(stored: StoredRun, facts: AgentFacts) -> None:
    """Refuse a stored run of another agent or chart, or one a local driver holds."""
    header, run_id = stored.header, stored.header.run_id
    if header.agent != facts.agent.name or header.chart_digest != facts.digest:
        raise RunDiverged(
            f"run {run_id!r} in the store is a run of agent {header.agent!r} on chart "
            f"{header.chart_digest[:12]}, not of {facts.agent.name!r} on {facts.digest[:12]}: "
            "another run has this id"
        )
    owner = stored.info.lease_owner
    if owner is not None and owner != owner_of(run_id):
        raise RunDiverged(f"run {run_id!r} is held by {owner}, not by its workflow")


def _new_only(
    stored: StoredRun, steps: Sequence[Step], effects: Sequence[EffectRecord]
) -> tuple[list[Step], list[EffectRecord]]:
    """The steps above the stored head, after checking the others equal what is stored,
    and the effects not stored yet (by how many the store holds after each step)."""
    by_seq = {record.seq: record for record in stored.records}
    head = stored.records[-1].seq if stored.records else 0
    fresh: list[Step] = []
    for step in steps:
        if step.seq <= head:
            known = by_seq.get(step.seq)
            if known is None or known.input != step.input or known.row != step.row:
                raise RunDiverged(
                    f"run {stored.header.run_id!r} holds another record at step {step.seq} "
                    "than the workflow writes: it is not this workflow's run, or the "
                    "workflow's code changed without versioning"
                )
            continue
        fresh.append(step)
    have = Counter(effect.after_seq for effect in stored.effects)
    kept: list[EffectRecord] = []
    for effect in effects:
        if have[effect.after_seq] > 0:
            have[effect.after_seq] -= 1
            continue
        kept.append(effect)
    return fresh, kept
