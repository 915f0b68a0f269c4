"""Approvals bound to the exact call: its `call_id` plus a hash of its arguments.

A decision carries the hash of the arguments it approves; one for other arguments, or for a
call that is not pending, is refused. The hash is over the argument text as the model wrote
it, so a tool never runs with arguments a human did not see.
"""

from __future__ import annotations

import hashlib
from typing import Annotated

from pydantic import Strict

from helikon.core.items import ToolCall
from helikon.core.values import value


def arguments_hash(arguments: str) -> str:
    """SHA-256 of the call's argument text, hex, as approvals quote it.

    The text is hashed as its UTF-8 bytes. A lone surrogate (a JSON wire can deliver
    `"\\ud800"`, which decodes to one) has no UTF-8 form; it is hashed as the three bytes
    `surrogatepass` gives it, which no other text encodes to, so the hash stays lossless
    and the hash of ordinary text is unchanged.
    """
    return hashlib.sha256(arguments.encode("utf-8", "surrogatepass")).hexdigest()


@value
class ApprovalRequest:
    """A call waiting for a decision, with the hash a decision must quote.

    Inside the pure core a request names the call only. When a run suspends or asks its
    handler, the driver stamps each request with the run's id and the suspension's sequence
    number (`bound`), so the decisions it makes (`approve`, `reject`) bind to that run and
    that suspension only.
    """

    call: ToolCall
    arguments_hash: str
    run_id: str = ""
    seq: int = 0

    @classmethod
    def for_call(cls, call: ToolCall) -> ApprovalRequest:
        return cls(call, arguments_hash(call.arguments))

    def bound(self, run_id: str, seq: int) -> ApprovalRequest:
        """This request as suspension `seq` of run `run_id` asks it."""
        return ApprovalRequest(self.call, self.arguments_hash, run_id, seq)

    def approve(self, reason: str = "") -> ApprovalDecision:
        return ApprovalDecision(
            self.call.call_id, self.arguments_hash, True, reason, self.run_id, self.seq
        )

    def reject(self, reason: str = "") -> ApprovalDecision:
        return ApprovalDecision(
            self.call.call_id, self.arguments_hash, False, reason, self.run_id, self.seq
        )


@value
class ApprovalDecision:
    """A human's or a policy's answer for one pending call.

    `approved` is a bool, strictly: `"false"`, `0` or `None` is refused (a `TypeError` when
    built in code, a validation error when read from JSON), never taken as an answer.
    """

    call_id: str
    arguments_hash: str
    approved: Annotated[bool, Strict()]
    reason: str = ""
    run_id: str = ""
    seq: int = 0

    def __post_init__(self) -> None:
        if type(self.approved) is not bool:
            raise TypeError(
                f"ApprovalDecision.approved must be True or False, got {self.approved!r}"
            )

    def answers(self, request: ApprovalRequest) -> bool:
        """True when this decision is for that call with exactly its arguments (what the
        pure core checks; the run and suspension are the driver's to check)."""
        return (
            self.call_id == request.call.call_id and self.arguments_hash == request.arguments_hash
        )

    def binds(self, request: ApprovalRequest) -> bool:
        """True when this decision is for exactly that call, with exactly those arguments,
        in the run and suspension the request was stamped with."""
        return self.answers(request) and self.run_id == request.run_id and self.seq == request.seq
