"""The default chart's named guards: pure predicates over (state, input, ctx).

Each guard's docstring is its one-line meaning; the Markdown exporter prints it beside the
rows that use it. A guard only reads: it never builds state, events or appends.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from helikon.core.context import TransitionCtx
from helikon.core.items import ZERO_USAGE, AssistantMessage, Item, ToolCall

Guard = Callable[[Any, Any, TransitionCtx], bool]

# Rough size of text in tokens, for the compaction threshold; the model's own count of the
# previous call is exact, and only the tool results that follow it are estimated.
CHARS_PER_TOKEN = 4


def calls_of(items: tuple[Item, ...]) -> tuple[ToolCall, ...]:
    return tuple([item for item in items if type(item) is ToolCall])


def text_of(items: tuple[Item, ...]) -> str:
    return "".join([item.content for item in items if type(item) is AssistantMessage])


def budget_exhausted(state: Any, inp: Any, ctx: TransitionCtx) -> bool:
    """The run's token budget is spent (usage.total_tokens >= token_budget)."""
    if ctx.token_budget is None:
        return False
    spent = getattr(inp, "usage", ZERO_USAGE)  # tool results may carry sub-agent usage
    return bool(state.usage.total_tokens + spent.total_tokens >= ctx.token_budget)


def output_only(state: Any, inp: Any, ctx: TransitionCtx) -> bool:
    """An output type is set and the agent has no tools and no handoffs."""
    return ctx.output is not None and not ctx.tools and not ctx.handoffs


def truncated(state: Any, inp: Any, ctx: TransitionCtx) -> bool:
    """The model hit its length limit (finish_reason=length) with no complete tool call."""
    if inp.finish_reason != "length":
        return False
    return not any(is_complete_json(call.arguments) for call in calls_of(inp.items))


def empty(state: Any, inp: Any, ctx: TransitionCtx) -> bool:
    """The response has no text and no tool calls."""
    for item in inp.items:
        if type(item) is ToolCall or (type(item) is AssistantMessage and item.content.strip()):
            return False
    return True


def duplicate_call_ids(state: Any, inp: Any, ctx: TransitionCtx) -> bool:
    """Two tool calls of the response share a call id (each call needs its own result)."""
    seen: set[str] = set()
    for item in inp.items:
        if type(item) is ToolCall:
            if item.call_id in seen:
                return True
            seen.add(item.call_id)
    return False


def has_handoff(state: Any, inp: Any, ctx: TransitionCtx) -> bool:
    """Some tool call is a handoff (`transfer_to_<agent>`) the run's policy does not deny."""
    handoffs = ctx.handoffs
    if handoffs:
        for item in inp.items:
            if type(item) is ToolCall and item.name in handoffs and allowed_handoff(item, ctx):
                return True
    return False


def allowed_handoff(call: ToolCall, ctx: TransitionCtx) -> bool:
    """A handoff call passes its permission check like any call; a denied one is refused
    as a denied tool call would be, and never transfers control."""
    return not ctx.restricted or ctx.permission(call) != "deny"


def needs_approval(state: Any, inp: Any, ctx: TransitionCtx) -> bool:
    """Some tool call's permission (tool policy, run policy) says ask."""
    if not ctx.asks:
        return False
    for item in inp.items:
        if type(item) is ToolCall and ctx.permission(item) == "ask":
            return True
    return False


def has_tool_calls(state: Any, inp: Any, ctx: TransitionCtx) -> bool:
    """The response asks for at least one tool call."""
    for item in inp.items:
        if type(item) is ToolCall:
            return True
    return False


def has_output_type(state: Any, inp: Any, ctx: TransitionCtx) -> bool:
    """The agent has an output type, so its answer needs a constrained finalizing turn."""
    return ctx.output is not None


def all_decided(state: Any, inp: Any, ctx: TransitionCtx) -> bool:
    """Every pending call has a binding decision (call_id and argument hash match)."""
    return all(
        any(decision.answers(request) for decision in inp.decisions) for request in state.pending
    )


def turn_limit_reached(state: Any, inp: Any, ctx: TransitionCtx) -> bool:
    """The run has made all its turns: the next one's number reaches max_turns."""
    return opening_turn(state, inp, ctx) >= ctx.max_turns


def opening_turn(state: Any, inp: Any, ctx: TransitionCtx) -> int:
    """The number of the turn a row entering a turn phase now opens: `state.turn` on start
    (no turn is open yet) and from an effect phase (it carries the next turn's number), else
    `state.turn + 1` (the state's turn was made)."""
    turn: int = state.turn
    if inp.kind == "start" or state.phase in ctx.table.effects:
        return turn
    return turn + 1


def over_context_budget(state: Any, inp: Any, ctx: TransitionCtx) -> bool:
    """The context, with these tool results, reaches the compaction threshold."""
    if ctx.compaction_threshold is None:
        return False
    added = sum(len(result.content) for result in inp.results) // CHARS_PER_TOKEN
    return bool(state.context_tokens + added >= ctx.compaction_threshold)


def output_valid(state: Any, inp: Any, ctx: TransitionCtx) -> bool:
    """The response's text validates against the output type."""
    return ctx.output is not None and not ctx.output.validate(text_of(inp.items))[1]


def output_guarded(state: Any, inp: Any, ctx: TransitionCtx) -> bool:
    """The agent has output guardrails: its answer is checked before the run completes."""
    return bool(ctx.output_guardrails)


def input_guarded(state: Any, inp: Any, ctx: TransitionCtx) -> bool:
    """The agent has input guardrails: the run's start is checked before it goes on."""
    return bool(ctx.input_guardrails)


def passed(state: Any, inp: Any, ctx: TransitionCtx) -> bool:
    """Every guardrail passed (the verdict names no guardrail that tripped or failed)."""
    return inp.error is None


def succeeded(state: Any, inp: Any, ctx: TransitionCtx) -> bool:
    """The handoff target's run completed."""
    return inp.error is None and inp.output is not None


GUARDS: Mapping[str, Guard] = {
    guard.__name__: guard
    for guard in (
        budget_exhausted,
        output_only,
        truncated,
        empty,
        duplicate_call_ids,
        has_handoff,
        needs_approval,
        has_tool_calls,
        has_output_type,
        all_decided,
        turn_limit_reached,
        over_context_budget,
        output_valid,
        output_guarded,
        input_guarded,
        passed,
        succeeded,
    )
}


def is_complete_json(text: str) -> bool:
    """True when `text` parses as JSON: a streamed call's arguments arrived whole."""
    try:
        json.loads(text)
    except ValueError:
        return False
    return True
