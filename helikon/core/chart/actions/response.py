"""The actions that open a run's turn and consume a model response.

A run's start (its first turn, or the budget failing it); a model response that asks for
tools (run them, wait for approval, or hand off), answers (complete, or open the constrained
turn that asks for the output type), is truncated, empty or names a call id twice; and the
constrained turn's structured output (complete, repair once, fail).
"""

from __future__ import annotations

from typing import Any

from helikon.core.chart.actions.batch import denied_events, settle, triage
from helikon.core.chart.actions.outcome import (
    Outcome,
    context_size,
    enter,
    failure,
    output_events,
    response_events,
    spoken,
    with_usage,
)
from helikon.core.chart.guards import allowed_handoff, calls_of, text_of
from helikon.core.context import TransitionCtx
from helikon.core.errors import (
    BudgetExceeded,
    EmptyModelResponse,
    InvalidStructuredOutput,
    ModelCallFailed,
    ModelOutputTruncated,
)
from helikon.core.events import (
    AgentEvent,
    ApprovalRequested,
    HandoffItem,
    MessageOutput,
    RepairStarted,
    RunCompleted,
    StructuredOutputFailed,
    ToolCallItem,
    TurnStarted,
)
from helikon.core.items import AssistantMessage, FinalOutput, ToolCall, ToolResult
from helikon.core.state import (
    TERMINATE,
    ApplyingHandoff,
    AwaitApproval,
    CallModel,
    Done,
    ExecuteTools,
    ExecutingTools,
    Handoff,
    NeedsApproval,
    RepairingOutput,
)

# ---------------------------------------------------------------- starting


def start_turn(state: Any, inp: Any, ctx: TransitionCtx, target: str) -> Outcome:
    """Append the user's input and open turn `state.turn` in phase `target`."""
    return enter(target, state.turn, state.usage, ctx, (TurnStarted(state.turn),), inp.items)


def fail_budget(state: Any, inp: Any, ctx: TransitionCtx, target: str) -> Outcome:
    """Fail with BudgetExceeded, keeping any tool results that just arrived."""
    usage = state.usage
    if inp.kind == "tool_results":
        results = settle(state, inp)
        events, appends = output_events(results), results
        usage = usage + inp.usage
    else:
        events, appends = (), getattr(inp, "items", ())
    error = BudgetExceeded(ctx.token_budget or 0, usage.total_tokens)
    return failure(error, usage, events, appends)


# ---------------------------------------------------------------- a model response


# ---------------------------------------------------------------- a model response


def fail_truncated(state: Any, inp: Any, ctx: TransitionCtx, target: str) -> Outcome:
    """Fail with ModelOutputTruncated, keeping whatever text arrived."""
    kept = spoken(inp.items)
    events = tuple(MessageOutput(item) for item in kept if type(item) is AssistantMessage)
    error = ModelOutputTruncated(text_of(inp.items))
    return failure(error, with_usage(state, inp), events, kept)


def fail_empty(state: Any, inp: Any, ctx: TransitionCtx, target: str) -> Outcome:
    """Fail with EmptyModelResponse."""
    error = EmptyModelResponse(inp.finish_reason)
    return failure(error, with_usage(state, inp), (), spoken(inp.items))


def fail_duplicate_calls(state: Any, inp: Any, ctx: TransitionCtx, target: str) -> Outcome:
    """Fail with ModelCallFailed (bad_response), naming the call id used twice: a result
    could not say which call it answers, nor an approval which call it binds."""
    seen: set[str] = set()
    twice = ""
    for call in calls_of(inp.items):
        if call.call_id in seen:
            twice = call.call_id
            break
        seen.add(call.call_id)
    error = ModelCallFailed(
        "bad_response", f"the response holds two tool calls with call id {twice!r}"
    )
    return failure(error, with_usage(state, inp), (), spoken(inp.items))


def apply_handoff(state: Any, inp: Any, ctx: TransitionCtx, target: str) -> Outcome:
    """Hand control to the first handoff call's agent; every other call is skipped."""
    calls = calls_of(inp.items)
    chosen = next(c for c in calls if c.name in ctx.handoffs and allowed_handoff(c, ctx))
    to_agent = ctx.handoffs[chosen.name]
    results = tuple(
        ToolResult(call.call_id, f"transferred to {to_agent}")
        if call is chosen
        else ToolResult(
            call.call_id, f"skipped: control transferred to {to_agent}", False, "skipped"
        )
        for call in calls
    )
    events = (
        *response_events(inp.items),
        *output_events(results),
        HandoffItem(ctx.agent, to_agent),
    )
    usage = with_usage(state, inp)
    next_state = ApplyingHandoff(to_agent, chosen.call_id, state.turn, usage)
    return Outcome(next_state, events, Handoff(to_agent, chosen.call_id), (*inp.items, *results))


def request_approval(state: Any, inp: Any, ctx: TransitionCtx, target: str) -> Outcome:
    """Wait for decisions on the calls that ask; the rest of the batch waits with them."""
    calls = calls_of(inp.items)
    allowed, asking, denied = triage(calls, ctx)
    events = (
        *response_events(inp.items),
        *denied_events(calls, denied, "policy"),
        *(ApprovalRequested.of(request) for request in asking),
    )
    usage = with_usage(state, inp)
    next_state = NeedsApproval(asking, allowed, state.turn, usage, calls, denied, context_size(inp))
    return Outcome(next_state, events, AwaitApproval(asking), inp.items)


def execute_tools(state: Any, inp: Any, ctx: TransitionCtx, target: str) -> Outcome:
    """Run the batch; calls the policy denies get a denial result instead."""
    calls: list[ToolCall] = []
    events: list[AgentEvent] = []
    for item in inp.items:  # one pass: this row is the loop's hottest
        if type(item) is ToolCall:
            calls.append(item)
            events.append(ToolCallItem(item))
        elif type(item) is AssistantMessage:
            events.append(MessageOutput(item))
    batch = tuple(calls)
    allowed: tuple[ToolCall, ...] = batch
    denied: tuple[ToolResult, ...] = ()
    if ctx.restricted:
        allowed, _, denied = triage(batch, ctx)
        events.extend(denied_events(batch, denied, "policy"))
    usage = inp.usage
    next_state = ExecutingTools(
        batch, state.turn, state.usage + usage, denied, usage.input_tokens + usage.output_tokens
    )
    return Outcome(next_state, tuple(events), ExecuteTools(allowed), inp.items)


def finalize(state: Any, inp: Any, ctx: TransitionCtx, target: str) -> Outcome:
    """Keep the answer and open the constrained turn that asks for the output type."""
    turn = state.turn + 1
    events = (*response_events(inp.items), TurnStarted(turn))
    return enter(target, turn, with_usage(state, inp), ctx, events, inp.items)


def complete(state: Any, inp: Any, ctx: TransitionCtx, target: str) -> Outcome:
    """Finish with the response's text."""
    usage = with_usage(state, inp)
    output = FinalOutput(text_of(inp.items), None, usage)
    events = (*response_events(inp.items), RunCompleted.of(output))
    return Outcome(Done(output), events, TERMINATE, inp.items)


# ---------------------------------------------------------------- structured output


def final_message(inp: Any) -> AssistantMessage:
    return AssistantMessage(text_of(inp.items))


def complete_structured(state: Any, inp: Any, ctx: TransitionCtx, target: str) -> Outcome:
    """Finish with the validated value."""
    assert ctx.output is not None  # the output_valid guard holds
    message = final_message(inp)
    value, _ = ctx.output.validate(message.content)
    output = FinalOutput(message.content, value, with_usage(state, inp))
    events = (MessageOutput(message), RunCompleted.of(output))
    return Outcome(Done(output), events, TERMINATE, (message,))


def repair(state: Any, inp: Any, ctx: TransitionCtx, target: str) -> Outcome:
    """The output failed validation: ask once more, quoting the errors."""
    message = final_message(inp)
    errors = output_errors(ctx, message.content)
    next_state = RepairingOutput(state.turn, with_usage(state, inp), 1, errors)
    events = (MessageOutput(message), RepairStarted(1, errors))
    return Outcome(next_state, events, CallModel(ctx.repair_request(errors)), (message,))


def fail_structured(state: Any, inp: Any, ctx: TransitionCtx, target: str) -> Outcome:
    """The repair failed too: fail with InvalidStructuredOutput."""
    message = final_message(inp)
    errors = output_errors(ctx, message.content)
    events = (MessageOutput(message), StructuredOutputFailed(errors, message.content))
    error = InvalidStructuredOutput(errors, message.content)
    return failure(error, with_usage(state, inp), events, (message,))


def output_errors(ctx: TransitionCtx, text: str) -> tuple[str, ...]:
    if ctx.output is None:
        return ("no output type is configured",)
    return ctx.output.validate(text)[1]
