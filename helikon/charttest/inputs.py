"""The inputs a path starts each step from, and what the driver makes of them.

Every step begins from a plain input of its kind (`first_input`), which the witnesses then
change: a short text answer reporting some usage, one probe result per call, every pending
call approved, the synthetic target done. A stop (`Cancel`, `Fail`) is what the driver feeds
when the test stops the action in flight: a cancel, or the action's own failure (the model
call fails, the probe tool raises `FatalToolError`, the approval handler raises, the run's
deadline passes during a handoff).

`delivered` is what the driver feeds for a planned model response (it goes through the
driver's own stream assembler), and `undeliverable` says why the driver cannot feed a
planned input at all (None when it can).
"""

from __future__ import annotations

from typing import Any

from helikon.charttest.setup import (
    CHILD_TEXT,
    CHILD_USAGE,
    GUARDRAIL_MESSAGE,
    PROBE_ASK_TOOL,
    PROBE_EFFECT_OUTPUT,
    PROBE_GUARDRAIL,
    PROBE_OUTPUT,
    PROBE_TARGET,
    PROBE_TOOL,
)
from helikon.core.context import TransitionCtx
from helikon.core.errors import (
    ApprovalHandlerFailed,
    Cancelled,
    EffectFailed,
    GuardrailTripped,
    ModelCallFailed,
    TimedOut,
    ToolFailed,
)
from helikon.core.items import (
    ZERO_USAGE,
    AssistantMessage,
    FinalOutput,
    ToolCall,
    ToolResult,
    Usage,
    UserMessage,
)
from helikon.core.state import (
    TERMINAL_PHASES,
    TERMINATE,
    ApplyingHandoff,
    ApprovalDecisions,
    AwaitApproval,
    CallingModel,
    CallModel,
    Cancel,
    CheckGuardrails,
    CheckingInput,
    CheckingOutput,
    Compacting,
    CustomPhase,
    Done,
    EffectResult,
    ExecuteTools,
    ExecutingTools,
    Fail,
    Failed,
    Finalizing,
    GuardrailVerdict,
    Handoff,
    HandoffResult,
    ModelResponse,
    NeedsApproval,
    RepairingOutput,
    RunEffect,
    Start,
    ToolResults,
)
from helikon.core.transition import next_action_of
from helikon.models.base import ResponseAssembler
from helikon.models.scripted import ScriptedTurn, chunks_of
from helikon.run.chart_effects import as_json

RESPONSE_USAGE = Usage(10, 5, 15, 1)
"""What a planned model response reports: some tokens, so budgets and contexts can fill."""
CANCEL_REASON = "helikon test: cancelled here"
MODEL_FAILURE = ModelCallFailed("unavailable", "helikon test: the model call fails here")
FATAL_MESSAGE = "helikon test: the tool fails the run here"
HANDLER_FAILURE = "helikon test: the approval handler fails here"
EFFECT_FAILURE = "helikon test: the effect fails here"
ONE_REQUEST = Usage(requests=1)
PROBES = frozenset({PROBE_TOOL, PROBE_ASK_TOOL})
AWAITED: dict[type, str] = {
    CallModel: "model_response",
    ExecuteTools: "tool_results",
    AwaitApproval: "approval_decisions",
    Handoff: "handoff_result",
    RunEffect: "effect_result",
    CheckGuardrails: "guardrail_verdict",
}


def first_input(kind: str, state: Any, ctx: TransitionCtx, text: str) -> Any:
    """The plain input of `kind` a step starts from, before any witness changes it."""
    if kind == "start":
        return Start((UserMessage(text),))
    if kind == "model_response":
        return ModelResponse((AssistantMessage("ok", ctx.agent),), RESPONSE_USAGE, "stop")
    if kind == "tool_results":
        calls = runnable(state, ctx)
        return ToolResults(tuple(ToolResult(call.call_id, PROBE_OUTPUT) for call in calls))
    if kind == "approval_decisions":
        pending = getattr(state, "pending", ())
        return ApprovalDecisions(tuple(request.approve() for request in pending))
    if kind == "handoff_result":
        return HandoffResult(FinalOutput(CHILD_TEXT, None, CHILD_USAGE), None, CHILD_USAGE)
    if kind == "effect_result":
        return EffectResult(getattr(state, "effect", ""), PROBE_EFFECT_OUTPUT)
    if kind == "guardrail_verdict":
        return GuardrailVerdict()
    if kind == "cancel":
        return Cancel(CANCEL_REASON)
    return stop_failure(state, ctx)


def runnable(state: Any, ctx: TransitionCtx) -> tuple[ToolCall, ...]:
    """The calls the driver runs in `state` (none outside ExecutingTools)."""
    if state.phase in TERMINAL_PHASES:
        return ()
    action = next_action_of(state, ctx)
    return action.calls if isinstance(action, ExecuteTools) else ()


def stop_failure(state: Any, ctx: TransitionCtx) -> Fail:
    """The `Fail` the driver feeds when the test makes the effect of `state` fail."""
    action = None if state.phase in TERMINAL_PHASES else next_action_of(state, ctx)
    if isinstance(action, ExecuteTools) and action.calls:
        call = action.calls[0]
        return Fail(ToolFailed(call.name, call.call_id, FATAL_MESSAGE))
    if isinstance(action, AwaitApproval) and action.pending:
        call = action.pending[0].call
        message = f"RuntimeError: {HANDLER_FAILURE}"
        return Fail(ApprovalHandlerFailed(call.call_id, call.name, message))
    if isinstance(action, Handoff):
        return Fail(TimedOut(0.0), (), CHILD_USAGE)
    if isinstance(action, CheckGuardrails):  # the probe guardrail waits for the deadline
        return Fail(TimedOut(0.0))
    if isinstance(action, RunEffect):
        return Fail(EffectFailed(action.effect, f"raised RuntimeError: {EFFECT_FAILURE}"))
    return Fail(MODEL_FAILURE, (), ONE_REQUEST)


def delivered(response: ModelResponse, agent: str) -> ModelResponse:
    """The response the driver assembles when the scripted model plays `response`."""
    assembler = ResponseAssembler()
    turn = ScriptedTurn(response.items, response.usage, response.finish_reason)
    for chunk in chunks_of(turn):
        assembler.add(chunk)
    return assembler.response(agent)


def undeliverable(state: Any, inp: Any, ctx: TransitionCtx, first: bool) -> str | None:
    """Why the driver cannot feed `inp` in `state` (None when it can)."""
    kind = inp.kind
    if kind == "start":
        return None if first else "the driver feeds Start only as a run's first input"
    if state.phase in TERMINAL_PHASES:
        return f"the driver feeds no input once the run is {state.phase}"
    action = next_action_of(state, ctx)
    if kind in ("cancel", "fail"):
        return _unstoppable(state, inp, action)
    awaited = AWAITED[type(action)]
    if kind != awaited:
        return f"the driver feeds {state.phase} a {awaited} input, never a {kind} input"
    if isinstance(inp, ModelResponse):
        return _unstreamable(inp, ctx)
    if isinstance(inp, ToolResults) and isinstance(action, ExecuteTools):
        return _unrunnable(inp, action)
    if isinstance(inp, ApprovalDecisions) and isinstance(action, AwaitApproval):
        return _unbound(inp, action)
    if isinstance(inp, EffectResult) and isinstance(action, RunEffect):
        return _unreturned(inp, action)
    return _unscripted(state, inp)


def _unstoppable(state: Any, inp: Any, action: Any) -> str | None:
    if isinstance(action, Handoff) and state.target != PROBE_TARGET:
        return f"the test stops a handoff only to its own target, not to {state.target!r}"
    fails_tools = inp.kind == "fail" and isinstance(action, ExecuteTools)
    if fails_tools and not (action.calls and all(c.name in PROBES for c in action.calls)):
        return "the test fails a tool batch only through its probe tools"
    return None


def _unstreamable(inp: ModelResponse, ctx: TransitionCtx) -> str | None:
    if delivered(inp, ctx.agent) == inp:
        return None
    ids = [item.call_id for item in inp.items if type(item) is ToolCall]
    if len(ids) != len(set(ids)):
        return (
            "the driver's stream assembler merges fragments by call id, so a response it "
            "builds never holds two calls with one id"
        )
    return "the driver's stream assembler would make another response of this one"


def _unrunnable(inp: ToolResults, action: ExecuteTools) -> str | None:
    calls = action.calls
    if any(call.name not in PROBES for call in calls):
        return "the test plans tool results only for its probe tools"
    planned = [(result.call_id, result.is_error, result.status) for result in inp.results]
    if planned != [(call.call_id, False, "executed") for call in calls] or inp.usage != ZERO_USAGE:
        return "the driver returns one executed result per call, in order, spending nothing"
    return None


def _unbound(inp: ApprovalDecisions, action: AwaitApproval) -> str | None:
    pending = action.pending
    answered = [d.call_id for d in inp.decisions if any(d.answers(r) for r in pending)]
    if len(answered) != len(inp.decisions) or len(set(answered)) != len(answered):
        return "the driver refuses a decision for a call that is not pending, or two for one call"
    if not inp.decisions:
        return "the driver resumes a run only with at least one decision"
    return None


def _unreturned(inp: EffectResult, action: RunEffect) -> str | None:
    if inp.effect != action.effect:
        return f"the driver reports effect {action.effect!r}'s result, not {inp.effect!r}'s"
    checked = as_json(inp.effect, inp.output)
    if isinstance(checked, EffectFailed) or checked[0] != inp.output:
        return "an effect's result reaches the chart as JSON, and this output is not JSON"
    return None


def _unscripted(state: Any, inp: Any) -> str | None:
    if isinstance(inp, GuardrailVerdict):
        return _unjudged(inp)
    if not isinstance(inp, HandoffResult):
        return f"the test does not script {inp.kind} inputs"
    if state.target != PROBE_TARGET:
        return f"the test scripts only its own handoff target, not {state.target!r}"
    if (inp.output is None) == (inp.error is None):
        return "a handoff target's run ends with an output or an error, not both or neither"
    if inp.error is not None and not isinstance(inp.error, ModelCallFailed):
        return "the test fails its handoff target only by a failed model call"
    if inp.output is not None and not (inp.output.text or "").strip():
        return "the handoff target's answer must be some text"
    return None


def stray_input(kind: str) -> Any:
    """An input of `kind` for a phase's implicit row (one it never waits for, or absorbs)."""
    strays: dict[str, Any] = {
        "start": Start((UserMessage("again"),)),
        "model_response": ModelResponse((AssistantMessage("late"),)),
        "tool_results": ToolResults(()),
        "approval_decisions": ApprovalDecisions(()),
        "handoff_result": HandoffResult(FinalOutput("late"), None),
        "effect_result": EffectResult("late", None),
        "guardrail_verdict": GuardrailVerdict(),
        "cancel": Cancel("late"),
        "fail": Fail(MODEL_FAILURE),
    }
    return strays[kind]


def phase_state(phase: str) -> Any:
    """A state of `phase` built by hand, for an implicit row's table test when no path
    reached the phase (an implicit row checks no guard: any state of its phase selects it)."""
    built: dict[str, Any] = {
        "CallingModel": CallingModel(),
        "ExecutingTools": ExecutingTools((), 0),
        "NeedsApproval": NeedsApproval((), (), 0),
        "ApplyingHandoff": ApplyingHandoff(PROBE_TARGET, "call_0", 0),
        "Finalizing": Finalizing(0),
        "RepairingOutput": RepairingOutput(0),
        "Compacting": Compacting(0),
        "CheckingOutput": CheckingOutput(FinalOutput("")),
        "CheckingInput": CheckingInput(CallingModel(), TERMINATE, CallingModel(), Start()),
        "Done": Done(FinalOutput("")),
        "Failed": Failed(Cancelled("")),
    }
    return built.get(phase) or CustomPhase(phase, 0)


TRIPPED = GuardrailTripped(PROBE_GUARDRAIL, "output", GUARDRAIL_MESSAGE)
"""The verdict of the probe guardrail when a path has it trip."""
TRIPPED_INPUT = GuardrailTripped(PROBE_GUARDRAIL, "input", GUARDRAIL_MESSAGE)
"""The same, checking the run's input (in CheckingInput)."""


def tripped(state: Any) -> GuardrailTripped:
    """The verdict of the probe guardrail tripping in `state`'s check."""
    return TRIPPED_INPUT if state.phase == "CheckingInput" else TRIPPED


def _unjudged(inp: GuardrailVerdict) -> str | None:
    if inp.error is None or inp.error in (TRIPPED, TRIPPED_INPUT):
        return None
    return "the test's guardrail passes, or trips with its own message"
