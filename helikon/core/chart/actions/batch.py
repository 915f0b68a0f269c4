"""A tool batch's bookkeeping: one result per call, permissions and approval decisions.

`settle` closes a finished batch with one result per call in call order, `outstanding` an
unfinished one (on cancel or failure); `triage` splits a batch by permission, and `decide`
applies approval decisions, failing closed. Nothing here builds an outcome: the actions in
response.py, results.py and stops.py do, from these.
"""

from __future__ import annotations

from typing import Any

from helikon.core.approvals import ApprovalRequest
from helikon.core.context import TransitionCtx
from helikon.core.events import AgentEvent, PermissionDenied
from helikon.core.items import ToolCall, ToolResult

# ---------------------------------------------------------------- results


def settle(state: Any, inp: Any) -> tuple[ToolResult, ...]:
    """One result per call of the batch, in call order.

    Pre-settled results (denied, rejected) come from the state; a call the driver returned
    no result for gets an error result rather than being dropped; results for calls that
    are not in the batch are ignored.
    """
    calls: tuple[ToolCall, ...] = state.calls
    results: tuple[ToolResult, ...] = inp.results
    if not state.settled and len(results) == len(calls):
        for result, call in zip(results, calls, strict=True):
            if result.call_id != call.call_id:
                break
        else:
            return results
    by_id: dict[str, ToolResult] = {}
    for result in (*state.settled, *results):
        by_id.setdefault(result.call_id, result)
    return tuple(
        by_id.get(call.call_id)
        or ToolResult(call.call_id, "error: the tool returned no result", True, "errored")
        for call in calls
    )


def outstanding(
    state: Any, status: str, text: str, finished: tuple[ToolResult, ...] = ()
) -> tuple[ToolResult, ...]:
    """Results closing every call of an unfinished batch (on cancel or failure).

    Calls already settled, or `finished` before the stop, keep their real result (their
    side effects happened); the others get a `status` result saying `text`.
    """
    calls: tuple[ToolCall, ...] = getattr(state, "calls", ())
    if not calls:
        return ()
    settled = {result.call_id: result for result in (*finished, *state.settled)}
    return tuple(
        settled.get(call.call_id) or ToolResult(call.call_id, text, True, status)  # type: ignore[arg-type]
        for call in calls
    )


# ---------------------------------------------------------------- permissions


def triage(
    calls: tuple[ToolCall, ...], ctx: TransitionCtx
) -> tuple[tuple[ToolCall, ...], tuple[ApprovalRequest, ...], tuple[ToolResult, ...]]:
    """Split a batch by permission: (allowed, asking approval, denial results)."""
    allowed: list[ToolCall] = []
    asking: list[ApprovalRequest] = []
    denied: list[ToolResult] = []
    for call in calls:
        permission = ctx.permission(call)
        if permission == "allow":
            allowed.append(call)
        elif permission == "ask":
            asking.append(ApprovalRequest.for_call(call))
        else:
            denied.append(denial(call, "denied by policy", "denied"))
    return tuple(allowed), tuple(asking), tuple(denied)


def denial(call: ToolCall, reason: str, status: str) -> ToolResult:
    return ToolResult(call.call_id, f"{reason}: {call.name}", True, status)  # type: ignore[arg-type]


def denied_events(
    calls: tuple[ToolCall, ...], results: tuple[ToolResult, ...], reason: str
) -> tuple[AgentEvent, ...]:
    names = {call.call_id: call.name for call in calls}
    return tuple(PermissionDenied(r.call_id, names[r.call_id], reason) for r in results)


# ---------------------------------------------------------------- approval decisions


Decided = tuple[tuple[ApprovalRequest, ...], tuple[ToolCall, ...], tuple[ToolResult, ...]]


def decide(state: Any, inp: Any) -> Decided:
    """Apply binding decisions: (still pending, allowed so far, rejection results).

    A decision that does not bind (unknown call, other arguments) is ignored, so its call
    stays pending: approvals fail closed.
    """
    pending: list[ApprovalRequest] = []
    approved: list[ToolCall] = []
    rejected: list[ToolResult] = []
    for request in state.pending:
        decision = next((d for d in inp.decisions if d.answers(request)), None)
        if decision is None:
            pending.append(request)
        elif decision.approved:
            approved.append(request.call)
        else:
            reason = decision.reason or "rejected by the user"
            rejected.append(denial(request.call, reason, "rejected"))
    return tuple(pending), (*state.allowed, *approved), tuple(rejected)
