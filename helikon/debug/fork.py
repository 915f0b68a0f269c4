"""Fork requests typed at the debugger's prompt: `text "ANSWER"`, `tool ID "RESULT" ...`,
`effect JSON`, `approve [ID ...]` or `reject [ID ...]`.

`fork_request(debugger, words, script)` turns the words after `fork` into the input that
replaces the one the debugger's next step would apply, and the turns the fork's model will
answer with. It only reads the debugger; `DebugShell.do_fork` makes the fork.

A text answer is due where the run waits for the model, tool results where it waits for
tools (calls not named keep their recorded results), decisions where it waits for approval
(`approve` approves the calls named and rejects the others; `reject` the reverse; naming
none means all of them). Later model calls are answered by the
`then` texts when given, else by the chart's scripted turns after those the run has used
(offline: `script`), else (`script` is None) by the agent's own model.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from helikon.core.items import ZERO_USAGE, AssistantMessage, ToolCall, ToolResult, Usage
from helikon.core.state import ApprovalDecisions, EffectResult, ModelResponse, ToolResults
from helikon.core.transition import next_action_of
from helikon.debug.debugger import Debugger, DebuggerError

USAGE = (
    'usage: fork text "ANSWER" | fork tool CALL_ID "RESULT" ... | fork approve [CALL_ID ...]'
    " | fork effect JSON | fork reject [CALL_ID ...], each optionally followed by"
    ' then "TEXT" ...'
)
_DECISIONS = ("approve", "reject")
_ONE_ARGUMENT = ("text", "effect")
_WAITS = {
    "call_model": "a model answer (`fork text`)",
    "execute_tools": "tool results (`fork tool`)",
    "await_approval": "approval decisions (`fork approve` / `fork reject`)",
    "handoff": "a handoff's result",
    "run_effect": "an effect's result (`fork effect`)",
}


@dataclass(frozen=True)
class ForkRequest:
    """What to fork with: the next step's new input, and the fork's model turns (None:
    the agent's own model)."""

    next_input: ModelResponse | ToolResults | EffectResult | ApprovalDecisions
    turns: list[Any] | None


def fork_request(
    debugger: Debugger, words: Sequence[str], script: Sequence[Any] | None
) -> ForkRequest:
    """The fork `words` ask for, at the debugger's current step.

    Raises:
        DebuggerError: the words do not parse, or the run does not wait for that input here.
    """
    kind, args, then = parse_fork(words)
    answer: ModelResponse | ToolResults | EffectResult | ApprovalDecisions
    if kind == "text":
        answer = text_answer(debugger, args[0])
    elif kind == "effect":
        answer = effect_answer(debugger, args[0])
    elif kind == "tool":
        answer = tool_answer(debugger, args)
    else:
        answer = decisions(debugger, approve=kind == "approve", named=args)
    if then is not None or script is None:
        return ForkRequest(answer, then)
    used = int(debugger.state.usage.requests) + (1 if kind == "text" else 0)
    return ForkRequest(answer, list(script[used:]))


def parse_fork(words: Sequence[str]) -> tuple[str, list[str], list[str] | None]:
    """`KIND ARGS... [then T...]` -> (kind, args, then); see the module docstring."""
    kind, rest = (words[0], list(words[1:])) if words else ("", [])
    step = 2 if kind == "tool" else 1
    size = (
        1
        if kind in _ONE_ARGUMENT
        else next((i for i in range(0, len(rest), step) if rest[i] == "then"), len(rest))
    )
    args, tail = rest[:size], rest[size:]
    good_tail = not tail or (tail[0] == "then" and len(tail) > 1)
    if not (_arity_fits(kind, args) and good_tail):
        raise DebuggerError(USAGE)
    return kind, args, tail[1:] if tail else None


def _arity_fits(kind: str, args: Sequence[str]) -> bool:
    if kind in _ONE_ARGUMENT:
        return len(args) == 1
    if kind == "tool":
        return len(args) >= 2 and len(args) % 2 == 0
    return kind in _DECISIONS


def text_answer(debugger: Debugger, text: str) -> ModelResponse:
    """A model response saying `text` (one model request), where the run waits for one."""
    waiting_for(debugger, "call_model", "a model answer")
    agent = debugger.run.agent.name
    return ModelResponse((AssistantMessage(text, agent),), Usage(requests=1))


def effect_answer(debugger: Debugger, text: str) -> EffectResult:
    """What the effect the run is about to run returned, `text` being its JSON value, where
    the run runs one.

    Raises:
        DebuggerError: the text is not JSON, or the run does not run an effect here.
    """
    action = waiting_for(debugger, "run_effect", "an effect's result")
    try:
        output = json.loads(text, parse_constant=_refuse_constant)
    except (ValueError, RecursionError):
        shown = text if len(text) <= 60 else text[:59] + "…"
        raise DebuggerError(f"an effect's result is a JSON value; got {shown!r}") from None
    return EffectResult(action.effect, output)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def calls_answer(debugger: Debugger, text: str) -> ModelResponse:
    """A model response calling tools, `text` being a JSON list of
    `{"call_id": ..., "name": ..., "arguments": ...}` (arguments: JSON text, or an object),
    where the run waits for the model.

    Raises:
        DebuggerError: the text is not such a list, or the run does not wait for the model.
    """
    waiting_for(debugger, "call_model", "a model answer")
    try:
        given = json.loads(text)
    except (ValueError, RecursionError):
        given = None
    calls: list[ToolCall] = []
    for call in given if isinstance(given, list) and given else [None]:
        fields = call if isinstance(call, dict) else {}
        call_id, name, arguments = (fields.get(key) for key in ("call_id", "name", "arguments"))
        if not isinstance(arguments, str) and isinstance(arguments, dict):
            arguments = json.dumps(arguments, separators=(",", ":"))
        if not all(isinstance(part, str) and part for part in (call_id, name)) or not (
            isinstance(arguments, str)
        ):
            raise DebuggerError(
                'tool calls are a JSON list of {"call_id": ..., "name": ..., '
                '"arguments": ...} objects, at least one'
            )
        calls.append(ToolCall(str(call_id), str(name), arguments))
    return ModelResponse(tuple(calls), Usage(requests=1))


def tool_answer(debugger: Debugger, pairs: Sequence[str]) -> ToolResults:
    """The pending calls' results, `pairs` (call id, content) replacing recorded ones."""
    action = waiting_for(debugger, "execute_tools", "tool results")
    due = debugger.next_input
    recorded = due if isinstance(due, ToolResults) else ToolResults(())
    given = dict(zip(pairs[::2], pairs[1::2], strict=True))
    results = tool_results(action.calls, given, recorded.results)
    return ToolResults(results, recorded.usage or ZERO_USAGE)


def decisions(debugger: Debugger, *, approve: bool, named: Sequence[str]) -> ApprovalDecisions:
    """Decisions for every pending approval: `approve` for the `named` calls (all of them
    when none is named), the opposite for the others."""
    action = waiting_for(debugger, "await_approval", "approval decisions")
    pending = {request.call.call_id: request for request in action.pending}
    unknown = [call_id for call_id in named if call_id not in pending]
    if unknown:
        raise DebuggerError(f"no pending call {unknown[0]!r}; pending: {', '.join(pending)}")
    chosen = set(named) or set(pending)
    return ApprovalDecisions(
        tuple(
            request.approve() if (call_id in chosen) == approve else request.reject()
            for call_id, request in pending.items()
        )
    )


def waiting_for(debugger: Debugger, kind: str, what: str) -> Any:
    """The action the run performs next, if it is of `kind`; else why not."""
    if debugger.run.finished:
        raise DebuggerError("the run is over here; `back` to a step that waits for the model")
    due = debugger.next_input
    if due is not None and due.kind == "start":
        raise DebuggerError("the first step applies the user's input; `step` once, then fork")
    action = next_action_of(debugger.state, debugger.run.ctx)
    if action.kind != kind:
        waits = _WAITS.get(action.kind, action.kind)
        raise DebuggerError(f"at step {debugger.position} the run waits for {waits}, not {what}")
    return action


def tool_results(
    calls: Sequence[Any], given: dict[str, str], recorded: Sequence[ToolResult]
) -> tuple[ToolResult, ...]:
    """A result for every call, in the calls' order: the one given, else the recorded one."""
    pending = {call.call_id: call for call in calls}
    unknown = [call_id for call_id in given if call_id not in pending]
    if unknown:
        raise DebuggerError(f"no pending call {unknown[0]!r}; pending: {', '.join(pending)}")
    kept = {result.call_id: result for result in recorded}
    results = []
    for call_id, call in pending.items():
        if call_id in given:
            results.append(ToolResult(call_id, given[call_id]))
        elif call_id in kept:
            results.append(kept[call_id])
        else:
            raise DebuggerError(f"no result recorded for {call_id} ({call.name}): give one")
    return tuple(results)
