"""`fork_stored`: fork a stored run at a seq into a new stored run that shares its prefix
(`helikon runs fork RUN_ID --at SEQ [--edit ...]`).

Theory of operation: the fork is a new run of the store whose header names its parent and
fork point (`forked_from`, `forked_at`) and whose records 1..SEQ are the original's, signed
again under its own id; the runs nested in the prefix (handoff targets, agents as tools,
named `<run>/<seq>...`) are copied with it, renamed. Nothing is performed: the prefix's side
effects are in its records, so no tool before the fork point runs again. The fork then
waits (status `suspended`) until it is resumed with the agent of a chart given on the
command line (`helikon runs resume FORK --chart CHART`, `agent.resume(fork, store=store)`).

The effect after SEQ is the fork's future. Without an edit, a resume performs it: the model
is called again, and of the tool calls the original made there only those that had not
finished run (a finished call's result is kept, as for a run resumed after a crash). With an
edit (`edit=`: a model answer, tool results, an effect's result or approval decisions
replacing the input the original's step SEQ+1 applied), that step is computed again by
`transition` on the agent given, which must be the run's (the replay up to SEQ checks it),
and written as the fork's record SEQ+1: a resume then goes on from it.

The copy takes several transactions, under a lease whose owner begins with `FORKING` and
which never expires, let go only when the whole copy is written (nested runs first). A crash
midway leaves a fork holding part of the prefix, whose resume would perform effects the
original performed: `Run.from_stored` refuses a run so leased, even with `force`, and
`runs recover` never takes it (its lease does not expire); it is deleted, not resumed. The
lease's owner is the copying process's `owner_id` (host and pid): once that process is gone
from this host (`copier_gone`), `helikon runs delete` takes the fork without `--force`.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from helikon.core.state import (
    TERMINAL_PHASES,
    ApprovalDecisions,
    EffectResult,
    ModelResponse,
    ToolResults,
)
from helikon.core.transition import matched_transition
from helikon.debug.debugger import Debugger, DebuggerError
from helikon.debug.fork import waiting_for
from helikon.durable import RunStore, StepRecord, StoredRun, stored_trace
from helikon.durable.as_trace import after_seq, chart_of
from helikon.durable.records import CallRecord, EffectRecord, RunHeader, step_record
from helikon.run.config import RunContext
from helikon.run.journal import FORKING, FORKING_SECONDS, owner_id, status_of
from helikon.run.spec import AgentSpec

Edit = ModelResponse | ToolResults | EffectResult | ApprovalDecisions
EditAt = Edit | Callable[[Debugger], Edit]
"""An edit, or a function of the replay at the fork point that makes one (and may refuse
with `DebuggerError`): `helikon.debug.fork`'s `text_answer`, `tool_answer`, `effect_answer`,
`decisions`."""
_WAITS = {
    ModelResponse: "call_model",
    ToolResults: "execute_tools",
    EffectResult: "run_effect",
    ApprovalDecisions: "await_approval",
}


async def fork_stored(
    store: RunStore,
    run_id: str,
    at: int,
    *,
    edit: EditAt | None = None,
    agent: AgentSpec | None = None,
    context: RunContext[Any] | None = None,
    fork_id: str | None = None,
) -> str:
    """Fork the stored run `run_id` after its record `at` (see the module docstring).

    Args:
        store: the store holding the run; the fork is written there.
        run_id: a top-level run of the store.
        at: the last seq the fork shares (1 .. the run's last seq).
        edit: the input replacing the one the original's step `at + 1` applied, or a
            function of the replay at `at` that makes it (`EditAt`).
        agent: with `edit`, the run's agent (its chart, tools and limits; its model is not
            called), to compute that step again.
        context: the agent's run context (`deps()`), if its tools need one.
        fork_id: the new run's id (default: `<run_id>-fork<at>-<random>`).

    Returns:
        The fork's run id.

    Raises:
        DebuggerError: `at` is not a seq of the run, the run ended there, an edit without
            an agent, or one the run does not wait for after `at`.
        RunNotFound, StoreCorrupt, RunExists: from the store.
    """
    original = store.get(run_id)
    seqs = [record.seq for record in original.records]
    if at not in seqs:
        last = seqs[-1] if seqs else 0
        raise DebuggerError(f"cannot fork run {run_id!r} at seq {at}: its seqs are 1..{last}")
    if original.header.parent_run_id is not None:
        raise DebuggerError(f"run {run_id!r} is nested in another: fork the top-level run")
    prefix = original.records[: seqs.index(at) + 1]
    if prefix[-1].state_after.phase in TERMINAL_PHASES:
        raise DebuggerError(
            f"run {run_id!r} ended at seq {at}: there is nothing after it to fork into; "
            "fork at an earlier seq"
        )
    new_id = fork_id or f"{run_id}-fork{at}-{uuid.uuid4().hex[:8]}"
    chart_of(original)  # the chart the fork is signed with must be the run's
    extra = None if edit is None else await _edited_step(store, run_id, at, edit, agent, context)
    records = (*prefix, *(() if extra is None else (extra,)))
    calls = tuple(
        call
        for call in original.calls
        if call.seq < at or (call.seq == at and call.finished and extra is None)
    )
    await _copy(store, original, new_id, None, records, calls, at, forked=(run_id, at))
    return new_id


async def _edited_step(
    store: RunStore,
    run_id: str,
    at: int,
    edit_at: EditAt,
    agent: AgentSpec | None,
    context: RunContext[Any] | None,
) -> StepRecord:
    """Step `at + 1` of the run with `edit` as its input, on `agent`, as a record."""
    if agent is None:
        raise DebuggerError("an edited fork computes its next step: give the run's agent")
    debugger = Debugger.replay(stored_trace(store, run_id), agent, context=context)
    while debugger.position < at:
        step = await debugger.step()
        if step is None or step.divergence is not None:
            why = "" if step is None else f": {step.divergence}"
            raise DebuggerError(f"the replay of run {run_id!r} stopped before seq {at}{why}")
    edit = edit_at(debugger) if callable(edit_at) else edit_at
    waiting_for(debugger, _WAITS[type(edit)], "the edit's kind of input")
    state, ctx = debugger.state, debugger.run.ctx
    match, outcome = matched_transition(state, edit, ctx)  # each guard evaluated once
    return step_record(debugger.run.seq + 1, edit, match, outcome)


async def _copy(
    store: RunStore,
    original: StoredRun,
    new_id: str,
    parent: str | None,
    records: tuple[StepRecord, ...],
    calls: tuple[CallRecord, ...],
    upto: int | None,
    *,
    forked: tuple[str, int],
) -> None:
    """Write `records`, the calls, the effects produced before `upto` (None: all) and the
    runs nested before it as run `new_id`, a copy of `original`; a copy of the whole run
    (`upto` None: a nested run) keeps its status, a fork waits, suspended. No lease is left.
    """
    old_id = original.header.run_id
    header = RunHeader(
        new_id,
        original.header.agent,
        original.header.chart,
        original.header.chart_digest,
        original.header.toolset_digest,
        parent_run_id=parent,
        session_items=original.header.session_items,  # a fork adds nothing to the session
        format_version=original.header.format_version,
        forked_from=forked[0],
        forked_at=forked[1],
    )
    effects: dict[int, list[EffectRecord]] = {}
    for effect in original.effects:
        if upto is None or effect.after_seq < upto:
            effects.setdefault(effect.after_seq, []).append(effect)
    first, *rest = records
    chart = original.chart_data or ""
    lease, mac = await store.create(
        header, chart, FORKING + owner_id(), FORKING_SECONDS, first, effects.pop(0, [])
    )
    previous = first.seq
    for record in rest:
        mac = await store.append(new_id, lease, record, mac, effects.pop(previous, []), "running")
        previous = record.seq
    left = [effect for seq in sorted(effects) for effect in effects[seq]]
    if left:
        await store.add_effects(new_id, lease, left)
    for call in calls:
        await store.start_call(new_id, lease, call)
        if call.finished:
            await store.finish_call(new_id, lease, call)
    nested = [
        info
        for info in store.runs(include_nested=True)
        if info.parent_run_id == old_id
        and after_seq(old_id, info.run_id) >= 0
        and (upto is None or after_seq(old_id, info.run_id) < upto)
    ]  # a run nested at the fork point's effect, or later, is the fork's future
    for info in sorted(nested, key=lambda info: (info.created_at, info.run_id)):
        child = store.get(info.run_id)
        child_id = new_id + info.run_id[len(old_id) :]
        forked_at = child.records[-1].seq
        await _copy(
            store,
            child,
            child_id,
            new_id,
            child.records,
            child.calls,
            None,
            forked=(info.run_id, forked_at),
        )
    status = (
        original.info.status if upto is None else status_of(records[-1].state_after.phase, True)
    )
    await store.release(new_id, lease, status)  # the copy is whole: from now on it is a run
