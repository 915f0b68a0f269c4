"""The actions that consume what comes back into a turn.

Approval decisions (run the batch once all are decided, else keep waiting), tool results
(open the next turn, or compact first), the turn limit reached on any of them, and a
compaction summary (appended, and the next turn opened).
"""

from __future__ import annotations

from typing import Any

from helikon.core.chart.actions.batch import decide, denied_events, settle
from helikon.core.chart.actions.outcome import Outcome, enter, failure, output_events, with_usage
from helikon.core.chart.actions.phases import kept_items, note_of
from helikon.core.chart.guards import text_of
from helikon.core.context import TransitionCtx
from helikon.core.errors import MaxTurnsExceeded
from helikon.core.events import AgentEvent, ToolOutputItem, TurnStarted
from helikon.core.items import ZERO_USAGE, CompactionSummary
from helikon.core.state import AwaitApproval, ExecuteTools, ExecutingTools, NeedsApproval

# ---------------------------------------------------------------- approvals


def run_approved(state: Any, inp: Any, ctx: TransitionCtx, target: str) -> Outcome:
    """All decided: run the allowed and approved calls; rejected ones get a denial result."""
    _, allowed, rejected = decide(state, inp)
    settled = (*state.settled, *rejected)
    events = denied_events(state.calls, rejected, "rejected")
    next_state = ExecutingTools(state.calls, state.turn, state.usage, settled, state.context_tokens)
    # Run each call exactly as it was approved (the request's copy), in batch order.
    runs = {call.call_id: call for call in allowed}
    runnable = tuple(runs[call.call_id] for call in state.calls if call.call_id in runs)
    return Outcome(next_state, events, ExecuteTools(runnable), ())


def record_decisions(state: Any, inp: Any, ctx: TransitionCtx, target: str) -> Outcome:
    """Some calls are still undecided: keep waiting on them, remember the rest."""
    pending, allowed, rejected = decide(state, inp)
    next_state = NeedsApproval(
        pending,
        allowed,
        state.turn,
        state.usage,
        state.calls,
        (*state.settled, *rejected),
        state.context_tokens,
    )
    events = denied_events(state.calls, rejected, "rejected")
    return Outcome(next_state, events, AwaitApproval(pending), ())


# ---------------------------------------------------------------- tool results


# ---------------------------------------------------------------- tool results


def fail_max_turns(state: Any, inp: Any, ctx: TransitionCtx, target: str) -> Outcome:
    """The turn limit is reached: keep what the input brought (tool outputs, a reply's text,
    an effect's result), then fail."""
    error = MaxTurnsExceeded(ctx.max_turns)
    if inp.kind == "tool_results":
        results = settle(state, inp)
        return failure(error, state.usage + inp.usage, output_events(results), results)
    if inp.kind == "effect_result":
        return failure(error, state.usage, (), (note_of(inp),))
    events, kept = kept_items(inp)
    return failure(error, state.usage + getattr(inp, "usage", ZERO_USAGE), events, kept)


def compact(state: Any, inp: Any, ctx: TransitionCtx, target: str) -> Outcome:
    """Keep the results, then ask the model to summarise the conversation."""
    results = settle(state, inp)
    usage = state.usage + inp.usage
    return enter(target, state.turn, usage, ctx, output_events(results), results)


def next_turn(state: Any, inp: Any, ctx: TransitionCtx, target: str) -> Outcome:
    """Keep the results and open the next turn."""
    results = settle(state, inp)
    turn = state.turn + 1
    events: list[AgentEvent] = [ToolOutputItem(result) for result in results]
    events.append(TurnStarted(turn))
    usage = state.usage if inp.usage is ZERO_USAGE else state.usage + inp.usage
    return enter(target, turn, usage, ctx, tuple(events), results)


def apply_summary(state: Any, inp: Any, ctx: TransitionCtx, target: str) -> Outcome:
    """Append the summary (older items stay in the log) and open the next turn.

    An empty summary is not appended: it would hide the whole conversation from the model,
    so the model keeps seeing it in full instead.
    """
    turn = state.turn + 1
    text = text_of(inp.items)
    appends = (CompactionSummary(text),) if text.strip() else ()
    return enter(target, turn, with_usage(state, inp), ctx, (TurnStarted(turn),), appends)
