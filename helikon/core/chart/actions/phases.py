"""The actions of a chart's custom phases: model-calling phases and effect phases.

A custom model-calling phase is a model call with its prompt and no tools (`enter_phase`
opens it, `keep_reply` keeps its text); an effect phase runs a named effect on the input's
last message (`enter_effect`) and gives the model its result as a system message
(`keep_effect_result`). Not turns: an effect phase carries the turn it opens next.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import JsonValue

from helikon.core.chart.actions.outcome import Outcome, enter, failure, spoken, with_usage
from helikon.core.chart.guards import opening_turn, text_of
from helikon.core.context import TransitionCtx
from helikon.core.errors import EffectFailed
from helikon.core.events import AgentEvent, MessageOutput, TurnStarted
from helikon.core.items import ZERO_USAGE, AssistantMessage, Item, SystemMessage, UserMessage
from helikon.core.state import CustomPhase, EffectPhase, RunEffect


def enter_phase(state: Any, inp: Any, ctx: TransitionCtx, target: str) -> Outcome:
    """Append the input's items (the user's request, a model's reply) and open the next turn
    in custom phase `target`: a model call with its prompt and no tools."""
    turn = opening_turn(state, inp, ctx)
    usage = state.usage + getattr(inp, "usage", ZERO_USAGE)
    events, items = kept_items(inp)
    next_state = CustomPhase(target, turn, usage)
    return Outcome(next_state, (*events, TurnStarted(turn)), ctx.call_for(target), items)


def kept_items(inp: Any) -> tuple[tuple[AgentEvent, ...], tuple[Item, ...]]:
    """The input's items worth keeping, with their events: a model reply's text and
    reasoning (its tool calls will not run), any other input's items as they are."""
    if inp.kind != "model_response":
        return (), getattr(inp, "items", ())
    kept = spoken(inp.items)
    return tuple(MessageOutput(item) for item in kept if type(item) is AssistantMessage), kept


def keep_reply(state: Any, inp: Any, ctx: TransitionCtx, target: str) -> Outcome:
    """Keep a custom phase's reply as one assistant message (its text only: its tool calls
    never run) and open the next turn in model-calling phase `target`."""
    turn = opening_turn(state, inp, ctx)
    reply = AssistantMessage(text_of(inp.items))
    events = (MessageOutput(reply), TurnStarted(turn))
    return enter(target, turn, with_usage(state, inp), ctx, events, (reply,))


def enter_effect(state: Any, inp: Any, ctx: TransitionCtx, target: str) -> Outcome:
    """Append the input's items and run effect phase `target`'s effect, its arguments
    `{"text": the input's last message}` (the user's request, a model's reply). Not a turn:
    the phase carries the number of the turn it opens next."""
    usage = state.usage + getattr(inp, "usage", ZERO_USAGE)
    items: tuple[Item, ...] = getattr(inp, "items", ())
    effect = ctx.table.effects.get(target)
    if effect is None:
        error = EffectFailed(target, f"phase {target!r} runs no effect: name one in effects")
        return failure(error, usage, (), items)
    args: JsonValue = {"text": last_message(items)}
    next_state = EffectPhase(target, effect, args, opening_turn(state, inp, ctx), usage)
    return Outcome(next_state, (), RunEffect(effect, args), items)


def keep_effect_result(state: Any, inp: Any, ctx: TransitionCtx, target: str) -> Outcome:
    """Give the model the effect's output (JSON, as a system message naming the effect) and
    open turn `state.turn` (the one the effect phase carries) in model-calling phase `target`."""
    return enter(target, state.turn, state.usage, ctx, (TurnStarted(state.turn),), (note_of(inp),))


def note_of(inp: Any) -> SystemMessage:
    """An effect's result as the model sees it: `Result of <effect>: <JSON, keys sorted>`."""
    output = json.dumps(inp.output, ensure_ascii=False, sort_keys=True)
    return SystemMessage(f"Result of {inp.effect}: {output}")


def last_message(items: tuple[Item, ...]) -> str:
    """The text of the last user or assistant message among `items` ("" if none)."""
    for item in reversed(items):
        if isinstance(item, (UserMessage, AssistantMessage)):
            return item.content
    return ""
