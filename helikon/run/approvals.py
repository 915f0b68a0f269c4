"""Asking an in-process approval handler (`Agent(on_approval=...)`) about pending calls.

A handler answers `True`, `False` or an `ApprovalDecision` (or an awaitable of one). Anything
else fails the run closed: a decision that does not bind to the request it answers (another
call, other arguments, another run or suspension) is `ApprovalNotBound`, so is an answer that
is not a bool (`"no"` is not a rejection, and never an approval); a handler that raises is
`ApprovalHandlerFailed`. The run never asks again in a loop and never approves by default.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from helikon.core.approvals import ApprovalDecision, ApprovalRequest
from helikon.core.errors import ApprovalHandlerFailed, ApprovalNotBound
from helikon.core.state import ApprovalDecisions, Fail
from helikon.run.config import RunContext
from helikon.run.spec import ApprovalHandler


async def ask_handler(
    handler: ApprovalHandler,
    pending: Sequence[ApprovalRequest],
    context: RunContext[Any],
    wait: Callable[[Awaitable[Any]], Awaitable[Any]],
) -> ApprovalDecisions | Fail:
    """The handler's decision for each pending call, in order, or the `Fail` that ends the
    run when an answer does not bind or the handler raises. `wait` awaits an async answer so
    that the run's cancel and deadline can stop it."""
    decisions = []
    for request in pending:
        call = request.call
        try:
            answer = handler(request, context)
            if isinstance(answer, Awaitable):
                answer = await wait(answer)
        except Exception as exc:
            message = f"{type(exc).__name__}: {exc}"
            return Fail(ApprovalHandlerFailed(call.call_id, call.name, message))
        decision = decision_for(request, answer)
        if isinstance(decision, ApprovalNotBound):
            return Fail(decision)
        decisions.append(decision)
    return ApprovalDecisions(tuple(decisions))


def decision_for(request: ApprovalRequest, answer: Any) -> ApprovalDecision | ApprovalNotBound:
    """A handler's answer as the decision for `request`, or why it is not one."""
    call = request.call
    if type(answer) is bool:
        return request.approve() if answer else request.reject()
    if not isinstance(answer, ApprovalDecision):
        kind = type(answer).__name__
        reason = f"the handler answered {answer!r} ({kind}), not a bool or an ApprovalDecision"
        return ApprovalNotBound(call.call_id, call.name, reason)
    if answer.binds(request):
        return answer
    return ApprovalNotBound(call.call_id, call.name, mismatch(answer, request))


def mismatch(decision: ApprovalDecision, request: ApprovalRequest) -> str:
    """Why `decision` does not bind to `request`, in a sentence."""
    if decision.call_id != request.call.call_id:
        return f"the decision is for call {decision.call_id!r}"
    if decision.arguments_hash != request.arguments_hash:
        return (
            f"the decision quotes arguments hash {decision.arguments_hash[:12]}, but the "
            f"call's arguments hash to {request.arguments_hash[:12]}"
        )
    return (
        f"the decision is for run {decision.run_id!r} at suspension {decision.seq}, not run "
        f"{request.run_id!r} at suspension {request.seq}"
    )
