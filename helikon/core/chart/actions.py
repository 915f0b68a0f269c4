"""The default chart's named actions: pure builders of a transition's outcome.

An action receives (state, input, ctx, target), where `target` is the phase the chart's row
names, and returns the `TransitionOutcome`: the next state (in phase `target`), the events in
order, the next action and the items to append. Actions never mutate their arguments.

Every tool call the model asked for leaves here with exactly one result, whichever way the
batch ends (executed, denied, rejected, skipped or cancelled).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import JsonValue

from helikon.core.approvals import ApprovalRequest
from helikon.core.chart.guards import allowed_handoff, calls_of, opening_turn, text_of
from helikon.core.context import TransitionCtx
from helikon.core.errors import (
    AgentError,
    BudgetExceeded,
    Cancelled,
    EffectFailed,
    EmptyModelResponse,
    InvalidStructuredOutput,
    MaxTurnsExceeded,
    ModelCallFailed,
    ModelOutputTruncated,
    UnexpectedInput,
)
from helikon.core.events import (
    AgentEvent,
    ApprovalRequested,
    HandoffItem,
    MessageOutput,
    PermissionDenied,
    RepairStarted,
    RunCompleted,
    RunFailed,
    StructuredOutputFailed,
    ToolCallItem,
    ToolOutputItem,
    TurnStarted,
)
from helikon.core.items import (
    ZERO_USAGE,
    AssistantMessage,
    CompactionSummary,
    FinalOutput,
    Item,
    Reasoning,
    SystemMessage,
    ToolCall,
    ToolResult,
    Usage,
    UserMessage,
)
from helikon.core.state import (
    TERMINATE,
    ApplyingHandoff,
    AwaitApproval,
    CallingModel,
    CallModel,
    Compacting,
    CustomPhase,
    Done,
    EffectPhase,
    ExecuteTools,
    ExecutingTools,
    Failed,
    Finalizing,
    Handoff,
    NeedsApproval,
    RepairingOutput,
    RunEffect,
    TransitionOutcome,
)

Action = Callable[[Any, Any, TransitionCtx, str], TransitionOutcome]
Outcome = TransitionOutcome

# ---------------------------------------------------------------- shared pieces


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


def settle(state: Any, inp: Any) -> tuple[ToolResult, ...]:
    """One result per call of the batch, in call order.

    Pre-settled results (denied, rejected) come from the state; a call the driver returned
    no result for gets an error result rather than being dropped; results for calls that
    are not in the batch are ignored.
    """
    calls: tuple[ToolCall, ...] = state.calls
    results: tuple[ToolResult, ...] = inp.results
    if not state.settled and len(results) == len(calls):
        for result, call in zip(results, calls, strict=True):
            if result.call_id != call.call_id:
                break
        else:
            return results
    by_id: dict[str, ToolResult] = {}
    for result in (*state.settled, *results):
        by_id.setdefault(result.call_id, result)
    return tuple(
        by_id.get(call.call_id)
        or ToolResult(call.call_id, "error: the tool returned no result", True, "errored")
        for call in calls
    )


def outstanding(
    state: Any, status: str, text: str, finished: tuple[ToolResult, ...] = ()
) -> tuple[ToolResult, ...]:
    """Results closing every call of an unfinished batch (on cancel or failure).

    Calls already settled, or `finished` before the stop, keep their real result (their
    side effects happened); the others get a `status` result saying `text`.
    """
    calls: tuple[ToolCall, ...] = getattr(state, "calls", ())
    if not calls:
        return ()
    settled = {result.call_id: result for result in (*finished, *state.settled)}
    return tuple(
        settled.get(call.call_id) or ToolResult(call.call_id, text, True, status)  # type: ignore[arg-type]
        for call in calls
    )


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


def triage(
    calls: tuple[ToolCall, ...], ctx: TransitionCtx
) -> tuple[tuple[ToolCall, ...], tuple[ApprovalRequest, ...], tuple[ToolResult, ...]]:
    """Split a batch by permission: (allowed, asking approval, denial results)."""
    allowed: list[ToolCall] = []
    asking: list[ApprovalRequest] = []
    denied: list[ToolResult] = []
    for call in calls:
        permission = ctx.permission(call)
        if permission == "allow":
            allowed.append(call)
        elif permission == "ask":
            asking.append(ApprovalRequest.for_call(call))
        else:
            denied.append(denial(call, "denied by policy", "denied"))
    return tuple(allowed), tuple(asking), tuple(denied)


def denial(call: ToolCall, reason: str, status: str) -> ToolResult:
    return ToolResult(call.call_id, f"{reason}: {call.name}", True, status)  # type: ignore[arg-type]


def denied_events(
    calls: tuple[ToolCall, ...], results: tuple[ToolResult, ...], reason: str
) -> tuple[AgentEvent, ...]:
    names = {call.call_id: call.name for call in calls}
    return tuple(PermissionDenied(r.call_id, names[r.call_id], reason) for r in results)


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


# ---------------------------------------------------------------- custom phases


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


# ---------------------------------------------------------------- approvals


Decided = tuple[tuple[ApprovalRequest, ...], tuple[ToolCall, ...], tuple[ToolResult, ...]]


def decide(state: Any, inp: Any) -> Decided:
    """Apply binding decisions: (still pending, allowed so far, rejection results).

    A decision that does not bind (unknown call, other arguments) is ignored, so its call
    stays pending: approvals fail closed.
    """
    pending: list[ApprovalRequest] = []
    approved: list[ToolCall] = []
    rejected: list[ToolResult] = []
    for request in state.pending:
        decision = next((d for d in inp.decisions if d.answers(request)), None)
        if decision is None:
            pending.append(request)
        elif decision.approved:
            approved.append(request.call)
        else:
            reason = decision.reason or "rejected by the user"
            rejected.append(denial(request.call, reason, "rejected"))
    return tuple(pending), (*state.allowed, *approved), tuple(rejected)


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


# ---------------------------------------------------------------- handoffs


def complete_handoff(state: Any, inp: Any, ctx: TransitionCtx, target: str) -> Outcome:
    """The target finished: so does this run, with its output and both agents' usage."""
    usage = state.usage + inp.usage
    output = FinalOutput(inp.output.text, inp.output.value, usage)
    return Outcome(Done(output), (RunCompleted.of(output),), TERMINATE, ())


def fail_handoff(state: Any, inp: Any, ctx: TransitionCtx, target: str) -> Outcome:
    """The target failed: so does this run, with the target's error."""
    error = inp.error if inp.error is not None else UnexpectedInput(state.phase, inp.kind)
    return failure(error, state.usage + inp.usage)


# ---------------------------------------------------------------- from any phase


def cancel_run(state: Any, inp: Any, ctx: TransitionCtx, target: str) -> Outcome:
    """Fail with Cancelled, counting its usage; unfinished tool calls get a "cancelled" result."""
    closed = outstanding(state, "cancelled", "cancelled: the run was cancelled", inp.results)
    return failure(Cancelled(inp.reason), with_usage(state, inp), (), closed)


def fail_run(state: Any, inp: Any, ctx: TransitionCtx, target: str) -> Outcome:
    """Fail with the driver's error, counting what it carries (finished sub-agents, the
    failed model call); unfinished tool calls get a "cancelled" result."""
    closed = outstanding(state, "cancelled", "cancelled: the run failed", inp.results)
    return failure(inp.error, with_usage(state, inp), (), closed)


def absorb(state: Any, inp: Any, ctx: TransitionCtx, target: str) -> Outcome:
    """A terminal phase absorbs every input: same state, no events, Terminate."""
    return Outcome(state, (), TERMINATE, ())


def reject_input(state: Any, inp: Any, ctx: TransitionCtx, target: str) -> Outcome:
    """An input this phase never waits for: fail closed with UnexpectedInput."""
    closed = outstanding(state, "cancelled", "cancelled: the run failed")
    return failure(UnexpectedInput(state.phase, inp.kind), state.usage, (), closed)


ACTIONS: Mapping[str, Action] = {
    action.__name__: action
    for action in (
        start_turn,
        fail_budget,
        fail_truncated,
        fail_empty,
        fail_duplicate_calls,
        apply_handoff,
        request_approval,
        execute_tools,
        finalize,
        complete,
        run_approved,
        record_decisions,
        fail_max_turns,
        compact,
        next_turn,
        apply_summary,
        complete_structured,
        repair,
        fail_structured,
        complete_handoff,
        fail_handoff,
        cancel_run,
        fail_run,
        enter_phase,
        keep_reply,
        enter_effect,
        keep_effect_result,
    )
}
IMPLICIT_ACTIONS: Mapping[str, Action] = {"absorb": absorb, "reject_input": reject_input}
