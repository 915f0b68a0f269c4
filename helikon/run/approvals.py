"""Asking an in-process approval handler (`Agent(on_approval=...)`) about pending calls."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from helikon.core.approvals import ApprovalDecision, ApprovalRequest
from helikon.core.state import ApprovalDecisions
from helikon.run.config import RunContext
from helikon.run.spec import ApprovalHandler


async def ask_handler(
    handler: ApprovalHandler,
    pending: Sequence[ApprovalRequest],
    context: RunContext[Any],
    wait: Callable[[Awaitable[Any]], Awaitable[Any]],
) -> ApprovalDecisions:
    """The handler's decision for each pending call, in order; `wait` awaits an async answer
    so that the run's cancel and deadline can stop it."""
    decisions = []
    for request in pending:
        answer = handler(request, context)
        if isinstance(answer, Awaitable):
            answer = await wait(answer)
        if isinstance(answer, ApprovalDecision):
            decisions.append(answer)
        else:
            decisions.append(request.approve() if answer else request.reject())
    return ApprovalDecisions(tuple(decisions))
