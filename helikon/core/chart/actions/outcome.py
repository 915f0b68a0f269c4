"""The pieces every default action builds its outcome from.

Entering a model-calling phase (its state and its request), failing (a Failed state, RunFailed
last, Terminate), the events a model response yields, what of a response is kept when its
tool calls will not run, and the usage a response adds.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from helikon.core.context import TransitionCtx
from helikon.core.errors import AgentError
from helikon.core.events import AgentEvent, MessageOutput, RunFailed, ToolCallItem, ToolOutputItem
from helikon.core.items import AssistantMessage, Item, Reasoning, ToolCall, ToolResult, Usage
from helikon.core.state import (
    TERMINATE,
    CallingModel,
    Compacting,
    CustomPhase,
    Failed,
    Finalizing,
    TransitionOutcome,
)

Outcome = TransitionOutcome


MODEL_PHASES: Mapping[str, Callable[[int, Usage], Any]] = {
    "CallingModel": CallingModel,
    "Finalizing": Finalizing,
    "Compacting": Compacting,
}


def model_phase(target: str, turn: int, usage: Usage) -> Any:
    """The state of a model-calling phase named `target`."""
    build = MODEL_PHASES.get(target)
    return build(turn, usage) if build is not None else CustomPhase(target, turn, usage)


def enter(
    target: str,
    turn: int,
    usage: Usage,
    ctx: TransitionCtx,
    events: tuple[AgentEvent, ...],
    appends: tuple[Item, ...],
) -> Outcome:
    """Enter model-calling phase `target` and ask for its request."""
    return Outcome(model_phase(target, turn, usage), events, ctx.call_for(target), appends)


def response_events(items: tuple[Item, ...]) -> tuple[AgentEvent, ...]:
    """MessageOutput for each message and ToolCallItem for each call, in response order."""
    events: list[AgentEvent] = []
    for item in items:
        if type(item) is ToolCall:
            events.append(ToolCallItem(item))
        elif type(item) is AssistantMessage:
            events.append(MessageOutput(item))
    return tuple(events)


def spoken(items: tuple[Item, ...]) -> tuple[Item, ...]:
    """The response items worth keeping when its tool calls will not run."""
    return tuple(item for item in items if type(item) in (AssistantMessage, Reasoning))


def output_events(results: tuple[ToolResult, ...]) -> tuple[AgentEvent, ...]:
    return tuple([ToolOutputItem(result) for result in results])


def failure(
    error: AgentError,
    usage: Usage,
    events: tuple[AgentEvent, ...] = (),
    appends: tuple[Item, ...] = (),
) -> Outcome:
    return Outcome(Failed(error, usage), (*events, RunFailed(error)), TERMINATE, appends)


def with_usage(state: Any, inp: Any) -> Usage:
    usage: Usage = state.usage + inp.usage
    return usage


def context_size(inp: Any) -> int:
    """Tokens in the model's context after this call: its input plus its output."""
    return int(inp.usage.input_tokens + inp.usage.output_tokens)
