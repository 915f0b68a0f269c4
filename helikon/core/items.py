"""Conversation items and token usage: the values a run's conversation is made of.

Every value here is a frozen, slotted dataclass. pydantic validates them at the boundaries
(JSON, dicts from providers or stores) through the adapters in `helikon.core.codec`; inside the
pure core they are built directly, which keeps `transition` allocation-light.
"""

from __future__ import annotations

import math
from dataclasses import field
from typing import Annotated, Any, Literal

from pydantic import Field

from helikon.core.values import value

ToolResultStatus = Literal["executed", "errored", "denied", "rejected", "skipped", "cancelled"]


@value
class Usage:
    """Tokens and requests spent; `a + b` adds field by field."""

    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    requests: int = 0

    def __post_init__(self) -> None:
        # Counts come from providers, some of which send null or worse; the loop adds and
        # compares them, so a count that is not a non-negative integer is 0. OR-ing the
        # four is the cheap check on the path every Usage takes: it is >= 0 exactly when
        # none is negative, and raises TypeError when one is None, a float or a string.
        try:
            if (self.input_tokens | self.output_tokens | self.total_tokens | self.requests) >= 0:
                return
        except TypeError:
            pass
        for name in _COUNTS:
            object.__setattr__(self, name, _count(getattr(self, name)))

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.total_tokens + other.total_tokens,
            self.requests + other.requests,
        )


def _count(raw: object) -> int:
    """`raw` as a token or request count: a non-negative integer, else 0."""
    if type(raw) is int:
        return max(raw, 0)
    if type(raw) is float and math.isfinite(raw):
        return max(int(raw), 0)
    return 0  # None, NaN, infinities, strings, booleans...


_COUNTS = ("input_tokens", "output_tokens", "total_tokens", "requests")
ZERO_USAGE = Usage()


@value
class UserMessage:
    """What the user said."""

    content: str
    type: Literal["user_message"] = field(default="user_message", init=False, repr=False)


@value
class SystemMessage:
    """An instruction in the conversation, from the system rather than the user."""

    content: str
    type: Literal["system_message"] = field(default="system_message", init=False, repr=False)


@value
class AssistantMessage:
    """Text the model produced; `agent` names the agent that spoke, when known."""

    content: str
    agent: str | None = None
    type: Literal["assistant_message"] = field(default="assistant_message", init=False, repr=False)


@value
class Reasoning:
    """The model's reasoning text, when the provider returns it."""

    content: str
    type: Literal["reasoning"] = field(default="reasoning", init=False, repr=False)


@value
class ToolCall:
    """A call the model asked for; `arguments` is the JSON text exactly as the model wrote it."""

    call_id: str
    name: str
    arguments: str
    type: Literal["tool_call"] = field(default="tool_call", init=False, repr=False)


@value
class ToolResult:
    """The one result every tool call gets; `status` says how the call ended."""

    call_id: str
    content: str
    is_error: bool = False
    status: ToolResultStatus = "executed"
    type: Literal["tool_result"] = field(default="tool_result", init=False, repr=False)


@value
class CompactionSummary:
    """A model-written summary standing in for every item before it.

    The items it summarises stay in the run's log; only the model's view is shortened: the
    model sees the instructions, then the conversation from the latest summary on.
    """

    content: str
    type: Literal["compaction_summary"] = field(
        default="compaction_summary", init=False, repr=False
    )


Item = Annotated[
    UserMessage
    | SystemMessage
    | AssistantMessage
    | Reasoning
    | ToolCall
    | ToolResult
    | CompactionSummary,
    Field(discriminator="type"),
]


@value
class ModelSettings:
    """Sampling settings passed through to the model unchanged."""

    temperature: float | None = None
    top_p: float | None = None
    max_output_tokens: int | None = None
    parallel_tool_calls: bool | None = None


@value
class FinalOutput:
    """What a finished run produced: the final text, the validated typed value, total usage.

    `value` is the output type's validated value in JSON form (what `output_type` dumps to);
    `RunResultStreaming.collect_typed(T)` turns it back into a `T`.
    """

    text: str | None
    value: Any = None
    usage: Usage = ZERO_USAGE
