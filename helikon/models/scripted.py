"""`ScriptedModel`: a model that plays back turns written in advance, for tests and demos.

It streams like a real provider (text in several deltas, tool-call arguments in fragments,
a usage report, a finish reason), so everything downstream of the model is exercised.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field

from helikon.core.errors import ModelCallFailed, ModelError
from helikon.core.items import AssistantMessage, Item, Reasoning, ToolCall, Usage
from helikon.models.base import (
    FinishChunk,
    ModelChunk,
    ModelInput,
    ReasoningChunk,
    TextChunk,
    ToolCallChunk,
    UsageChunk,
)

ONE_REQUEST = Usage(requests=1)


@dataclass(frozen=True)
class ScriptedTurn:
    """One scripted answer: its items, the usage to report, and why the model stopped."""

    items: Sequence[Item]
    usage: Usage = ONE_REQUEST
    finish_reason: str | None = None


Answer = str | Sequence[Item] | ScriptedTurn
Turn = Answer | Callable[[ModelInput], Answer]


def as_turn(turn: Answer) -> ScriptedTurn:
    if isinstance(turn, ScriptedTurn):
        return turn
    if isinstance(turn, str):
        return ScriptedTurn((AssistantMessage(turn),))
    return ScriptedTurn(tuple(turn))


@dataclass
class ScriptedModel:
    """Plays `turns` in order, one per model call.

    Each turn is a `str` (a text answer), a list of items (`AssistantMessage`, `ToolCall`,
    `Reasoning`), a `ScriptedTurn`, or a callable that takes the `ModelInput` and returns one
    of these. `requests` records every `ModelInput` received. Running out of turns raises
    `ModelError` with reason "exhausted". A run resumed from a store in another process tells
    its model how many calls it made (`ModelInput.calls_before`): a fresh scripted model
    continues at that turn.
    """

    turns: Sequence[Turn]
    requests: list[ModelInput] = field(default_factory=list)
    skipped: int = 0

    async def stream(self, request: ModelInput) -> AsyncIterator[ModelChunk]:
        if not self.requests and request.calls_before > self.skipped:
            # A run resumed in a fresh process: its first calls were made before the crash,
            # by another copy of this model; continue after them.
            self.skipped = request.calls_before
        position = len(self.requests) + self.skipped
        self.requests.append(request)
        if position >= len(self.turns):
            raise ModelError(
                ModelCallFailed(
                    "exhausted",
                    f"ScriptedModel has no turn {position + 1}: it was given "
                    f"{len(self.turns)} turn(s)",
                )
            )
        entry = self.turns[position]
        turn = as_turn(entry(request) if callable(entry) else entry)
        for chunk in chunks_of(turn):
            yield chunk


def chunks_of(turn: ScriptedTurn) -> list[ModelChunk]:
    """The chunks a provider would stream for `turn`: text word by word, arguments halved."""
    chunks: list[ModelChunk] = []
    calls = False
    for item in turn.items:
        if isinstance(item, AssistantMessage):
            chunks.extend(TextChunk(word) for word in _words(item.content))
        elif isinstance(item, Reasoning):
            chunks.append(ReasoningChunk(item.content))
        elif isinstance(item, ToolCall):
            calls = True
            half = len(item.arguments) // 2
            chunks.append(ToolCallChunk(item.call_id, item.arguments[:half], item.name))
            chunks.append(ToolCallChunk(item.call_id, item.arguments[half:]))
    chunks.append(UsageChunk(turn.usage))
    chunks.append(FinishChunk(turn.finish_reason or ("tool_calls" if calls else "stop")))
    return chunks


def _words(text: str) -> list[str]:
    """Split text into deltas that concatenate back to it exactly."""
    parts = text.split(" ")
    return [part + " " for part in parts[:-1]] + [parts[-1]] if text else []
