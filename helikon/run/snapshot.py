"""`RunSnapshot`: a run at a transition boundary, enough to continue it later.

A snapshot names the agent and the digest of the compiled chart it ran on; resuming with
another agent or a changed chart is refused, as is an approval decision that does not bind
to a pending call. Snapshots round-trip through JSON (`helikon.core.codec`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from helikon.core.approvals import ApprovalDecision, arguments_hash
from helikon.core.errors import HelikonError
from helikon.core.items import Item
from helikon.core.state import LoopState, NeedsApproval, TransitionInput
from helikon.core.values import value

SNAPSHOT_VERSION: Literal[1] = 1


class SnapshotMismatch(HelikonError, ValueError):
    """The snapshot cannot be resumed here: another agent, chart or format version."""


class ApprovalMismatch(HelikonError, ValueError):
    """A decision does not bind to a pending call: unknown call, or other arguments."""


@value
class RunSnapshot:
    """The run's state, full conversation, and the input already observed but not applied."""

    run_id: str
    agent: str
    chart: str
    seq: int
    depth: int
    state: LoopState
    conversation: tuple[Item, ...]
    next_input: TransitionInput | None = None
    version: Literal[1] = SNAPSHOT_VERSION

    def check(self, agent: str, chart: str) -> None:
        """Refuse to resume on another agent or chart."""
        if self.agent != agent:
            raise SnapshotMismatch(
                f"snapshot of run {self.run_id} was taken from agent {self.agent!r}, not {agent!r}"
            )
        if self.chart != chart:
            raise SnapshotMismatch(
                f"snapshot of run {self.run_id} was taken on chart {self.chart[:12]}, but the "
                f"agent now runs chart {chart[:12]}: the loop changed, so it cannot resume"
            )

    def check_state(self, phases: set[str]) -> None:
        """Refuse a state the chart cannot be in, or an approval batch that is inconsistent."""
        state: Any = self.state
        if state.phase not in phases:
            raise SnapshotMismatch(
                f"snapshot of run {self.run_id} is in phase {state.phase!r}, "
                "which the agent's chart does not have"
            )
        if isinstance(state, NeedsApproval):
            batch = {call.call_id: call for call in state.calls}
            for request in state.pending:
                call = request.call
                if batch.get(call.call_id) != call or request.arguments_hash != arguments_hash(
                    call.arguments
                ):
                    raise SnapshotMismatch(
                        f"snapshot of run {self.run_id} is corrupt: pending call "
                        f"{call.call_id!r} ({call.name}) does not match the batch the model "
                        "asked for, or its argument hash; refusing to resume"
                    )

    def check_decisions(self, decisions: Sequence[ApprovalDecision]) -> None:
        """Refuse any decision that is not for a pending call with exactly its arguments."""
        state: Any = self.state
        if not isinstance(state, NeedsApproval):
            raise ApprovalMismatch(f"run {self.run_id} is not waiting for approval")
        pending = {request.call.call_id: request for request in state.pending}
        for decision in decisions:
            request = pending.get(decision.call_id)
            if request is None:
                raise ApprovalMismatch(
                    f"no call {decision.call_id!r} is waiting for approval in run "
                    f"{self.run_id}; pending: {', '.join(pending) or '(none)'}"
                )
            if not decision.binds(request):
                raise ApprovalMismatch(
                    f"decision for call {decision.call_id!r} ({request.call.name}) quotes "
                    f"arguments hash {decision.arguments_hash[:12]}, but the pending call's "
                    f"arguments hash to {request.arguments_hash[:12]}: refused"
                )
