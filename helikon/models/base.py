"""The model protocol: what a driver sends a model, and the chunks a model streams back.

A model is anything with `stream(request) -> AsyncIterator[ModelChunk]`. Chunks are raw
deltas as the provider emits them; `ResponseAssembler` folds them into the complete
`ModelResponse` the loop consumes. Tool-call fragments carry their `call_id` on every chunk
(adapters map provider indices to ids), and a call's arguments are only parsed by the loop
once the response is complete.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import field
from typing import Literal, Protocol, runtime_checkable

from helikon.core.items import (
    ZERO_USAGE,
    AssistantMessage,
    Item,
    ModelSettings,
    Reasoning,
    ToolCall,
    Usage,
)
from helikon.core.state import ModelRequest, ModelResponse
from helikon.core.tool_spec import ToolSpec
from helikon.core.values import value


@value
class ModelInput:
    """Everything one model call needs.

    Args:
        instructions: the agent's system instructions.
        items: the conversation as the model should see it (after compaction, if any).
        tools: the tools offered; empty when `request.tools` is false.
        request: what the loop asks for (purpose, response format, repair errors, prompt).
        settings: sampling settings, passed through.
        calls_before: model calls the run made before this one (its records show them
            when it resumed in another process: a scripted model continues after them).
    """

    instructions: str
    items: Sequence[Item]
    tools: tuple[ToolSpec, ...] = ()
    request: ModelRequest = field(default_factory=lambda: ModelRequest("turn"))
    settings: ModelSettings = field(default_factory=ModelSettings)
    calls_before: int = 0


@value
class TextChunk:
    text: str
    kind: Literal["text"] = field(default="text", init=False)


@value
class ReasoningChunk:
    text: str
    kind: Literal["reasoning"] = field(default="reasoning", init=False)


@value
class ToolCallChunk:
    """A fragment of a tool call; `name` is set on (at least) the first fragment."""

    call_id: str
    arguments_delta: str = ""
    name: str | None = None
    kind: Literal["tool_call"] = field(default="tool_call", init=False)


@value
class UsageChunk:
    """The provider's usage report for this call; the last one of a call wins."""

    usage: Usage
    kind: Literal["usage"] = field(default="usage", init=False)


def reported_usage(input_tokens: object, output_tokens: object, total_tokens: object) -> Usage:
    """One call's usage from the counts a provider reported (a request of its own).

    OpenAI-compatible servers may send a count as null or leave it out: a missing count is
    0, and a missing total is the sum of the counts there are.
    """
    prompt, completion = _reported(input_tokens), _reported(output_tokens)
    total = _reported(total_tokens)
    if total is None:
        total = (prompt or 0) + (completion or 0)
    return Usage(prompt or 0, completion or 0, total, requests=1)


def _reported(count: object) -> int | None:
    return count if type(count) is int and count >= 0 else None


@value
class FinishChunk:
    reason: str
    kind: Literal["finish"] = field(default="finish", init=False)


ModelChunk = TextChunk | ReasoningChunk | ToolCallChunk | UsageChunk | FinishChunk


@runtime_checkable
class Model(Protocol):
    """Anything that streams a model's answer to a `ModelInput`."""

    def stream(self, request: ModelInput) -> AsyncIterator[ModelChunk]: ...


class ResponseAssembler:
    """Folds a call's chunks into one `ModelResponse`.

    Text and reasoning accumulate; tool calls are assembled per `call_id`, in the order
    their first fragment arrived; usage is the last report (never summed within a call).
    """

    def __init__(self) -> None:
        self._text: list[str] = []
        self._reasoning: list[str] = []
        self._names: dict[str, str] = {}
        self._arguments: dict[str, list[str]] = {}
        self._usage = ZERO_USAGE
        self._finish = "stop"

    def add(self, chunk: ModelChunk) -> None:
        if isinstance(chunk, TextChunk):
            self._text.append(chunk.text)
        elif isinstance(chunk, ReasoningChunk):
            self._reasoning.append(chunk.text)
        elif isinstance(chunk, ToolCallChunk):
            self._arguments.setdefault(chunk.call_id, []).append(chunk.arguments_delta)
            if chunk.name:
                self._names[chunk.call_id] = chunk.name
        elif isinstance(chunk, UsageChunk):
            self._usage = chunk.usage
        else:
            self._finish = chunk.reason

    @property
    def usage(self) -> Usage:
        """The last usage report so far (what a call that fails now has spent)."""
        return self._usage

    def response(self, agent: str | None = None) -> ModelResponse:
        items: list[Item] = []
        if self._reasoning:
            items.append(Reasoning("".join(self._reasoning)))
        if self._text:
            items.append(AssistantMessage("".join(self._text), agent))
        for call_id, parts in self._arguments.items():
            items.append(ToolCall(call_id, self._names.get(call_id, ""), "".join(parts)))
        return ModelResponse(tuple(items), self._usage, self._finish)
