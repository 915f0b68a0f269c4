"""The loop's values: phases (`LoopState`), inputs, actions and a transition's outcome.

A run is a sequence of `transition(state, input, ctx) -> TransitionOutcome` steps. The state
says which phase the loop is in and carries just enough to resume from it (see
`helikon.core.transition.next_action_of`); the conversation itself lives with the driver,
which applies each outcome's `conversation_appends`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from typing import Annotated, Any, Literal

from pydantic import Discriminator, Field, JsonValue, Tag

from helikon.core.approvals import ApprovalDecision, ApprovalRequest
from helikon.core.errors import AgentError
from helikon.core.events import AgentEvent
from helikon.core.items import ZERO_USAGE, FinalOutput, Item, ToolCall, ToolResult, Usage
from helikon.core.values import value

# ---------------------------------------------------------------- phases


@value
class CallingModel:
    """About to invoke the model for `turn` (0-based)."""

    turn: int = 0
    usage: Usage = ZERO_USAGE
    phase: Literal["CallingModel"] = field(default="CallingModel", init=False)


@value
class ExecutingTools:
    """The model asked for `calls`; the ones not already `settled` run concurrently.

    `settled` holds results decided without running (denied by policy, rejected by a human).
    `context_tokens` is the size of the model's context after the call that asked for them.
    """

    calls: tuple[ToolCall, ...]
    turn: int
    usage: Usage = ZERO_USAGE
    settled: tuple[ToolResult, ...] = ()
    context_tokens: int = 0
    phase: Literal["ExecutingTools"] = field(default="ExecutingTools", init=False)


@value
class NeedsApproval:
    """Some calls of the batch `calls` wait for a decision; the run waits with them.

    `allowed` will run (no approval needed, or approved); `settled` holds denial results.
    """

    pending: tuple[ApprovalRequest, ...]
    allowed: tuple[ToolCall, ...]
    turn: int
    usage: Usage = ZERO_USAGE
    calls: tuple[ToolCall, ...] = ()
    settled: tuple[ToolResult, ...] = ()
    context_tokens: int = 0
    phase: Literal["NeedsApproval"] = field(default="NeedsApproval", init=False)


@value
class ApplyingHandoff:
    """Control passes to agent `target`; the driver threads the transcript to it."""

    target: str
    call_id: str
    turn: int
    usage: Usage = ZERO_USAGE
    phase: Literal["ApplyingHandoff"] = field(default="ApplyingHandoff", init=False)


@value
class Finalizing:
    """One constrained turn asking the model for the configured output type."""

    turn: int
    usage: Usage = ZERO_USAGE
    phase: Literal["Finalizing"] = field(default="Finalizing", init=False)


@value
class RepairingOutput:
    """The one repair turn after a failed validation; `errors` go into its request."""

    turn: int
    usage: Usage = ZERO_USAGE
    attempt: int = 1
    errors: tuple[str, ...] = ()
    phase: Literal["RepairingOutput"] = field(default="RepairingOutput", init=False)


@value
class Compacting:
    """The conversation is over its token budget; the model is asked for a summary."""

    turn: int
    usage: Usage = ZERO_USAGE
    phase: Literal["Compacting"] = field(default="Compacting", init=False)


@value
class CheckingOutput:
    """The run's answer `output` waits for the output guardrails' verdict: passed, the run
    completes with it; tripped (or a check that raised), it fails. Entered only when the
    agent has output guardrails (docs/semantics.md, Guardrails)."""

    output: FinalOutput
    phase: Literal["CheckingOutput"] = field(default="CheckingOutput", init=False)

    @property
    def usage(self) -> Usage:
        return self.output.usage


@value
class CheckingInput:
    """The run's start waits for the input guardrails' verdict: `held` is the state its
    start row built and `action` the action it asked for (its events and appends already
    stand), `before` and `start` the state and input that row was chosen on. Passed, the run
    goes on in `held` with `action`; tripped (or a check that raised), it fails. Entered only
    when the agent has input guardrails and its chart checks them as rows
    (`ChartSpec.checks_input`; docs/semantics.md, Guardrails)."""

    held: HeldState
    action: NextAction
    before: HeldState
    start: Start
    phase: Literal["CheckingInput"] = field(default="CheckingInput", init=False)

    @property
    def usage(self) -> Usage:
        usage: Usage = getattr(self.held, "usage", ZERO_USAGE)
        return usage


@value
class Done:
    """Terminal success: `output` holds the final text, typed value and usage."""

    output: FinalOutput
    phase: Literal["Done"] = field(default="Done", init=False)

    @property
    def usage(self) -> Usage:
        return self.output.usage


@value
class Failed:
    """Terminal failure: `error` says why; `usage` is what the run spent."""

    error: AgentError
    usage: Usage = ZERO_USAGE
    phase: Literal["Failed"] = field(default="Failed", init=False)


@value
class CustomPhase:
    """A phase a custom chart adds (e.g. Planning): it calls the model with its own prompt."""

    phase: str
    turn: int
    usage: Usage = ZERO_USAGE


@value
class EffectPhase:
    """A custom phase running the chart's effect `effect` (a retrieval, a code step, an HTTP
    call) with `args`; its result comes back as an `EffectResult` input."""

    phase: str
    effect: str
    args: JsonValue
    turn: int
    usage: Usage = ZERO_USAGE


BUILTIN_PHASES = (
    "CallingModel",
    "ExecutingTools",
    "NeedsApproval",
    "ApplyingHandoff",
    "Finalizing",
    "RepairingOutput",
    "CheckingOutput",
    "CheckingInput",
    "Compacting",
    "Done",
    "Failed",
)
TERMINAL_PHASES = frozenset({"Done", "Failed"})


def _phase_tag(value: Any) -> str:
    data = value if isinstance(value, dict) else None
    phase = data.get("phase") if data is not None else getattr(value, "phase", None)
    if phase in BUILTIN_PHASES:
        return str(phase)
    effect = data.get("effect") if data is not None else getattr(value, "effect", None)
    return "custom" if effect is None else "effect"


HeldState = Annotated[
    Annotated[CallingModel, Tag("CallingModel")]
    | Annotated[ExecutingTools, Tag("ExecutingTools")]
    | Annotated[NeedsApproval, Tag("NeedsApproval")]
    | Annotated[ApplyingHandoff, Tag("ApplyingHandoff")]
    | Annotated[Finalizing, Tag("Finalizing")]
    | Annotated[RepairingOutput, Tag("RepairingOutput")]
    | Annotated[Compacting, Tag("Compacting")]
    | Annotated[CheckingOutput, Tag("CheckingOutput")]
    | Annotated[CustomPhase, Tag("custom")]
    | Annotated[EffectPhase, Tag("effect")],
    Discriminator(_phase_tag),
]
"""A state a run's start may go on in (`CheckingInput` holds one): any but the terminal
ones and `CheckingInput` itself."""

LoopState = Annotated[
    Annotated[CallingModel, Tag("CallingModel")]
    | Annotated[ExecutingTools, Tag("ExecutingTools")]
    | Annotated[NeedsApproval, Tag("NeedsApproval")]
    | Annotated[ApplyingHandoff, Tag("ApplyingHandoff")]
    | Annotated[Finalizing, Tag("Finalizing")]
    | Annotated[RepairingOutput, Tag("RepairingOutput")]
    | Annotated[Compacting, Tag("Compacting")]
    | Annotated[CheckingOutput, Tag("CheckingOutput")]
    | Annotated[CheckingInput, Tag("CheckingInput")]
    | Annotated[Done, Tag("Done")]
    | Annotated[Failed, Tag("Failed")]
    | Annotated[CustomPhase, Tag("custom")]
    | Annotated[EffectPhase, Tag("effect")],
    Discriminator(_phase_tag),
]

# ---------------------------------------------------------------- inputs


@value
class Start:
    """Begin the run; `items` (the user's input) are appended to the conversation."""

    items: tuple[Item, ...] = ()
    kind: Literal["start"] = field(default="start", init=False)


@value
class ModelResponse:
    """One finished model call: its items in order, its usage, why it stopped."""

    items: tuple[Item, ...]
    usage: Usage = ZERO_USAGE
    finish_reason: str = "stop"
    kind: Literal["model_response"] = field(default="model_response", init=False)


@value
class ToolResults:
    """The batch's results; `usage` is what the tools spent on models (agents as tools)."""

    results: tuple[ToolResult, ...]
    usage: Usage = ZERO_USAGE
    kind: Literal["tool_results"] = field(default="tool_results", init=False)


@value
class ApprovalDecisions:
    """Decisions for pending calls, each bound to a call id and argument hash."""

    decisions: tuple[ApprovalDecision, ...]
    kind: Literal["approval_decisions"] = field(default="approval_decisions", init=False)


@value
class HandoffResult:
    """How the handoff target's run ended: `output` on success, else `error`.

    `usage` is what the target spent; it counts toward this run's usage.
    """

    output: FinalOutput | None = None
    error: AgentError | None = None
    usage: Usage = ZERO_USAGE
    kind: Literal["handoff_result"] = field(default="handoff_result", init=False)


@value
class EffectResult:
    """What effect `effect` returned: `output`, a JSON value (an effect that raised, or was
    cut short, comes back as `Fail(EffectFailed)` instead)."""

    effect: str
    output: JsonValue = None
    kind: Literal["effect_result"] = field(default="effect_result", init=False)


@value
class GuardrailVerdict:
    """The guardrails' verdict a `CheckGuardrails` action asked for: `error` is the first
    guardrail that tripped (`GuardrailTripped`) or whose check raised (`GuardrailFailed`),
    None when every guardrail passed."""

    error: AgentError | None = None
    kind: Literal["guardrail_verdict"] = field(default="guardrail_verdict", init=False)


@value
class Cancel:
    """Stop the run: from any non-terminal phase it fails with `Cancelled(reason)`;
    `results` and `usage` are what finished before it stopped (see `Fail`)."""

    reason: str = ""
    results: tuple[ToolResult, ...] = ()
    usage: Usage = ZERO_USAGE
    kind: Literal["cancel"] = field(default="cancel", init=False)


@value
class Fail:
    """The driver failed the run: a model error after retries, a fatal tool, a guardrail.

    `results` (like `Cancel.results`) are the results of tool calls that finished before
    the run stopped: they are kept, and only the unfinished calls are closed as cancelled.
    `usage` is what was spent and not yet counted: the sub-agents (agents as tools) that
    finished in the stopped batch, or the failed model call's own usage. It counts toward
    the failed run's usage.
    """

    error: AgentError
    results: tuple[ToolResult, ...] = ()
    usage: Usage = ZERO_USAGE
    kind: Literal["fail"] = field(default="fail", init=False)


TransitionInput = Annotated[
    Start
    | ModelResponse
    | ToolResults
    | ApprovalDecisions
    | HandoffResult
    | EffectResult
    | GuardrailVerdict
    | Cancel
    | Fail,
    Field(discriminator="kind"),
]
INPUT_KINDS = (
    "start",
    "model_response",
    "tool_results",
    "approval_decisions",
    "handoff_result",
    "cancel",
    "fail",
)
"""The input kinds every chart's table has rows for (implicit ones where it declares none)."""
EFFECT_RESULT = "effect_result"
"""The input kind of an effect phase: only a chart with effect phases has rows for it, so
adding it left every other chart's table, and digest, as it was."""
GUARDRAIL_VERDICT = "guardrail_verdict"
"""The input kind of a guardrail check's phase (`CheckingOutput`, `CheckingInput`):
likewise, only a chart with rows on it has rows for it."""

# ---------------------------------------------------------------- actions


@value
class ModelRequest:
    """What the driver should ask the model, beyond the conversation itself.

    `purpose` is "turn", "finalize", "repair", "compact" or a custom phase's name. With
    `tools` false the request carries no tools; `response_format` is an OpenAI-style
    JSON-schema response format; `repair_errors` are the validation errors to fix.
    """

    purpose: str
    tools: bool = True
    response_format: Mapping[str, Any] | None = None
    prompt: str | None = None
    repair_errors: tuple[str, ...] = ()


@value
class CallModel:
    """Call the model with `request` (and the conversation the driver holds)."""

    request: ModelRequest
    kind: Literal["call_model"] = field(default="call_model", init=False)


@value
class ExecuteTools:
    """Run these calls concurrently and report their results in call order."""

    calls: tuple[ToolCall, ...]
    kind: Literal["execute_tools"] = field(default="execute_tools", init=False)


@value
class AwaitApproval:
    """Wait for decisions on `pending` (a handler, or suspension)."""

    pending: tuple[ApprovalRequest, ...]
    kind: Literal["await_approval"] = field(default="await_approval", init=False)


@value
class Handoff:
    """Run agent `target` on the conversation and report how it ended."""

    target: str
    call_id: str
    kind: Literal["handoff"] = field(default="handoff", init=False)


@value
class RunEffect:
    """Run the chart's effect `effect` with `args` and report its JSON result."""

    effect: str
    args: JsonValue = None
    kind: Literal["run_effect"] = field(default="run_effect", init=False)


@value
class CheckGuardrails:
    """Check `output`, the run's answer, with the agent's output guardrails and report
    their `GuardrailVerdict`; with no `output`, check the conversation so far with its
    input guardrails (`CheckingInput`)."""

    output: FinalOutput | None
    kind: Literal["check_guardrails"] = field(default="check_guardrails", init=False)


@value
class Terminate:
    """Nothing more to do: the run is over."""

    kind: Literal["terminate"] = field(default="terminate", init=False)


NextAction = Annotated[
    CallModel | ExecuteTools | AwaitApproval | Handoff | RunEffect | CheckGuardrails | Terminate,
    Field(discriminator="kind"),
]
TERMINATE = Terminate()


@value
class TransitionOutcome:
    """One step's result: where the loop is now, what it says, what to do, what to append."""

    next_state: LoopState
    events: tuple[AgentEvent, ...]
    next_action: NextAction
    conversation_appends: tuple[Item, ...] = ()
