"""Resuming a run from a run store: the checks made before anything runs, and the fold of
its records into the state, conversation and seq a `Run` continues from.

Fail closed: another agent, a changed chart, a changed tool set or an unknown record format
is refused naming what differs; a finished run is refused; the state's batch is derived
again from the chart and the tools' policy (as for a snapshot); decisions must bind to the
suspension the run waits at. The store has checked every signature already.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from helikon.core.approvals import ApprovalDecision
from helikon.core.context import TransitionCtx
from helikon.core.errors import ModelCallFailed
from helikon.core.items import Item
from helikon.core.state import (
    TERMINAL_PHASES,
    ApprovalDecisions,
    Fail,
    LoopState,
    ModelResponse,
    NeedsApproval,
)
from helikon.durable.records import FORMAT_VERSION, StoredRun
from helikon.durable.views import pending_of, spent_of
from helikon.run.snapshot import ApprovalMismatch, RunSnapshot, SnapshotMismatch, check_derivable


@dataclass(frozen=True)
class Claim:
    """What a run resumed from a store claims when it first steps: the stored run as it was
    read (a run moved on since is refused then), whether to take the lease from a live
    owner, and the decisions to spend."""

    stored: StoredRun
    force: bool
    decisions: tuple[ApprovalDecision, ...]


@dataclass(frozen=True)
class Folded:
    """A stored run at its head: what `Run` continues from."""

    state: LoopState
    conversation: tuple[Item, ...]
    seq: int
    model_calls: int
    decided: tuple[ApprovalDecision, ...]


def check_identity(stored: StoredRun, agent: str, chart: str, toolset: str) -> None:
    """Refuse to resume on another agent, chart, tool set or record format."""
    header = stored.header
    run = header.run_id
    if header.format_version != FORMAT_VERSION:
        raise SnapshotMismatch(
            f"run {run!r} was stored in record format {header.format_version}; this helikon "
            f"reads format {FORMAT_VERSION}"
        )
    if header.agent != agent:
        raise SnapshotMismatch(f"run {run!r} is a run of agent {header.agent!r}, not {agent!r}")
    if header.chart_digest != chart:
        raise SnapshotMismatch(
            f"run {run!r} ran on chart {header.chart_digest[:12]}, but the agent now runs chart "
            f"{chart[:12]}: the loop changed, so it cannot resume (old {header.chart_digest}, "
            f"new {chart})"
        )
    if header.toolset_digest != toolset:
        raise SnapshotMismatch(
            f"run {run!r} ran with tool set {header.toolset_digest[:12]}, but the agent now "
            f"offers tool set {toolset[:12]}: its tools changed, so it cannot resume"
        )


def fold(stored: StoredRun, ctx: TransitionCtx, decisions: Sequence[ApprovalDecision]) -> Folded:
    """The run at its head, checked; `decided` are the decisions to apply (already spent
    ones of this suspension, then the new ones).

    Raises:
        SnapshotMismatch: the run ended, never started, or holds a state the policy could
            not have produced.
        ApprovalMismatch: a decision does not bind to this suspension.
    """
    run = stored.header.run_id
    if not stored.records:
        raise SnapshotMismatch(f"run {run!r} has no step recorded: there is nothing to resume")
    head = stored.records[-1]
    state = head.state_after
    if state.phase not in {phase.name for phase in ctx.table.phases}:
        raise SnapshotMismatch(f"run {run!r} is in phase {state.phase!r}, which the chart lacks")
    if state.phase in TERMINAL_PHASES:
        raise SnapshotMismatch(
            f"run {run!r} already ended ({state.phase}) at step {head.seq}: there is nothing "
            "to resume"
        )
    conversation = tuple(item for record in stored.records for item in record.appends)
    as_snapshot = RunSnapshot(run, stored.header.agent, "", head.seq, 0, state, conversation)
    # The store's chain is keyed and checked; a batch approved in it may run on.
    check_derivable(as_snapshot, ctx, signed=True, approved=approved_in_batch(stored))
    spent = spent_of(stored)  # a resume that spent them stopped before its next step
    if decisions:
        if not isinstance(state, NeedsApproval):
            raise ApprovalMismatch(
                f"run {run!r} is in {state.phase}, not waiting for approval; decisions "
                "cannot be applied"
            )
        as_snapshot.check_decisions(decisions)
        pending = {request.call.call_id for request in pending_of(stored)}
        twice = {d.call_id for d in spent} & {d.call_id for d in decisions}
        if twice or not {d.call_id for d in decisions} <= pending:
            raise ApprovalMismatch(
                f"call {sorted(twice)[0]!r} of run {run!r} was already decided at suspension "
                f"{head.seq}: a decision is spent once (resume without one for it to go on "
                "with the recorded decision)"
                if twice
                else f"a decision names a call run {run!r} is not waiting on"
            )
    return Folded(state, conversation, head.seq, model_calls(stored), (*spent, *decisions))


def approved_in_batch(stored: StoredRun) -> frozenset[tuple[str, str]]:
    """The (call id, arguments hash) pairs approved for the head's batch: by the decisions
    its records took as input since the model response that asked for the batch (a run
    killed after an approved call began resumes it by the in-flight rule, never asks again;
    a call id reused by a later turn is not approved by an earlier turn's decision)."""
    approved: set[tuple[str, str]] = set()
    for record in reversed(stored.records):
        if isinstance(record.input, ModelResponse):
            break
        if isinstance(record.input, ApprovalDecisions):
            approved.update(
                (decision.call_id, decision.arguments_hash)
                for decision in record.input.decisions
                if decision.approved
            )
    return frozenset(approved)


def model_calls(stored: StoredRun) -> int:
    """How many model calls the run made, as its records show (a scripted model resumed in
    a fresh process continues after them)."""
    count = 0
    for record in stored.records:
        inp = record.input
        if isinstance(inp, ModelResponse) or (
            isinstance(inp, Fail) and isinstance(inp.error, ModelCallFailed)
        ):
            count += 1
    return count


def moved_on(read: StoredRun, now: StoredRun) -> str | None:
    """How the run changed between the read a resume folded (`read`) and the one after it
    claimed the lease (`now`), or None: a record appended, or decisions spent (by another
    resume, which stopped before the record they lead to; the head does not move for
    them, and a resume that folded without them would miss them)."""
    if now.head_mac != read.head_mac:
        return f"moved on (to step {now.info.seq})"
    if now.decisions != read.decisions:
        return f"had decisions spent at step {now.info.seq} by another resume"
    return None
