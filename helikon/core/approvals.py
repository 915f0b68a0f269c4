"""Approvals bound to the exact call: its `call_id` plus a hash of its arguments.

A decision carries the hash of the arguments it approves; one for other arguments, or for a
call that is not pending, is refused. The hash is over the argument text as the model wrote
it, so a tool never runs with arguments a human did not see.
"""

from __future__ import annotations

import hashlib

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
    """A call waiting for a decision, with the hash a decision must quote."""

    call: ToolCall
    arguments_hash: str

    @classmethod
    def for_call(cls, call: ToolCall) -> ApprovalRequest:
        return cls(call, arguments_hash(call.arguments))

    def approve(self, reason: str = "") -> ApprovalDecision:
        return ApprovalDecision(self.call.call_id, self.arguments_hash, True, reason)

    def reject(self, reason: str = "") -> ApprovalDecision:
        return ApprovalDecision(self.call.call_id, self.arguments_hash, False, reason)


@value
class ApprovalDecision:
    """A human's or a policy's answer for one pending call."""

    call_id: str
    arguments_hash: str
    approved: bool
    reason: str = ""

    def binds(self, request: ApprovalRequest) -> bool:
        """True when this decision is for exactly that call with exactly those arguments."""
        return (
            self.call_id == request.call.call_id and self.arguments_hash == request.arguments_hash
        )
