"""Why a run failed (data) and the exceptions that carry it.

`AgentError` is a union of frozen values, one per way a run can fail; a `Failed` state and a
`RunFailed` event hold one. Exceptions are raised only at the edges, and each carries its
context::

    HelikonError
    ├── ChartDefinitionError      a chart that cannot be compiled (names state and input)
    ├── RunError                  a run ended in Failed; .error is the AgentError value
    ├── ModelError                a model call failed; .error is a ModelCallFailed value
    └── FatalToolError            raised by a tool to fail the whole run, not just its call

Every other exception helikon raises derives from `HelikonError` too; the whole tree, with
when each is raised and every `AgentError` value, is drawn on one page:
docs/reference/errors.md (tests/test_errors_page.py keeps it in step with the package).
"""

from __future__ import annotations

from dataclasses import field
from typing import Annotated, Literal

from pydantic import Field

from helikon.core.items import Usage
from helikon.core.values import value

ModelFailureReason = Literal[
    "rate_limited", "context_too_long", "refused", "unavailable", "bad_response", "exhausted"
]


@value
class MaxTurnsExceeded:
    """The run made all `max_turns` turns (model calls in CallingModel and custom model-calling
    phases) without a final answer."""

    max_turns: int
    kind: Literal["max_turns_exceeded"] = field(default="max_turns_exceeded", init=False)


@value
class BudgetExceeded:
    """The run's token budget was spent before it finished."""

    budget: int
    used: int
    kind: Literal["budget_exceeded"] = field(default="budget_exceeded", init=False)


@value
class ModelOutputTruncated:
    """The model stopped at its length limit without a complete answer or tool call."""

    partial_text: str = ""
    kind: Literal["model_output_truncated"] = field(default="model_output_truncated", init=False)


@value
class EmptyModelResponse:
    """The model answered with no text and no tool calls."""

    finish_reason: str = "stop"
    kind: Literal["empty_model_response"] = field(default="empty_model_response", init=False)


@value
class InvalidStructuredOutput:
    """The output failed validation twice: once, then after its one repair turn."""

    errors: tuple[str, ...]
    raw: str
    kind: Literal["invalid_structured_output"] = field(
        default="invalid_structured_output", init=False
    )


@value
class Cancelled:
    """The run was cancelled (`Run.cancel`, `RunResultStreaming.cancel`)."""

    reason: str = ""
    kind: Literal["cancelled"] = field(default="cancelled", init=False)


@value
class GuardrailTripped:
    """A guardrail stopped the run at `stage` ("input" or "output")."""

    guardrail: str
    stage: Literal["input", "output"]
    message: str = ""
    kind: Literal["guardrail_tripped"] = field(default="guardrail_tripped", init=False)


@value
class GuardrailFailed:
    """Guardrail `guardrail`'s check raised on the run's `stage` ("input" or "output"): it
    could not decide, so the run fails closed."""

    guardrail: str
    stage: Literal["input", "output"]
    message: str = ""
    kind: Literal["guardrail_failed"] = field(default="guardrail_failed", init=False)


@value
class ApprovalNotBound:
    """The approval answer for call `call_id` (of `tool`) does not bind to it: another call,
    other arguments, another run or suspension, or not a bool or `ApprovalDecision`. The run
    fails closed: the call is never approved by it, and it is never asked again."""

    call_id: str
    tool: str
    reason: str
    kind: Literal["approval_not_bound"] = field(default="approval_not_bound", init=False)


@value
class ApprovalHandlerFailed:
    """The approval handler raised when asked about call `call_id` (of `tool`)."""

    call_id: str
    tool: str
    message: str
    kind: Literal["approval_handler_failed"] = field(default="approval_handler_failed", init=False)


@value
class StoreFailed:
    """The run store refused or failed a write (`reason` is the store error's kind, e.g.
    LeaseLost when another driver took the run over): the run stops without writing more."""

    reason: str
    message: str
    kind: Literal["store_failed"] = field(default="store_failed", init=False)


@value
class MaxAgentDepthExceeded:
    """A handoff or agent-as-tool would nest deeper than `max_agent_depth`."""

    max_agent_depth: int
    agent: str
    kind: Literal["max_agent_depth_exceeded"] = field(
        default="max_agent_depth_exceeded", init=False
    )


@value
class ModelCallFailed:
    """A model call failed for good (after the driver's retries)."""

    reason: ModelFailureReason
    message: str = ""
    status_code: int | None = None
    kind: Literal["model_call_failed"] = field(default="model_call_failed", init=False)


@value
class ToolFailed:
    """A tool raised `FatalToolError`, which fails the run instead of returning to the model."""

    tool: str
    call_id: str
    message: str = ""
    kind: Literal["tool_failed"] = field(default="tool_failed", init=False)


@value
class ToolsUnavailable:
    """The run could not get its tools when it started: tool source `source` (an MCP server)
    could not list them, or two of the run's tools share a name. The run fails before its
    first model call."""

    source: str
    message: str
    kind: Literal["tools_unavailable"] = field(default="tools_unavailable", init=False)


@value
class TimedOut:
    """The run outlived `RunConfig.timeout` (`seconds`)."""

    seconds: float
    kind: Literal["timed_out"] = field(default="timed_out", init=False)


@value
class EffectFailed:
    """A chart's effect did not return a result: it raised, returned something that is not
    JSON, is not registered on the agent, or was in flight when the run stopped and may
    not run again (`interrupted`: it is not idempotent)."""

    effect: str
    message: str
    interrupted: bool = False
    kind: Literal["effect_failed"] = field(default="effect_failed", init=False)


@value
class UnexpectedInput:
    """The driver fed a phase an input it never waits for: a driver bug, failed closed."""

    phase: str
    input_kind: str
    kind: Literal["unexpected_input"] = field(default="unexpected_input", init=False)


AgentError = Annotated[
    MaxTurnsExceeded
    | BudgetExceeded
    | ModelOutputTruncated
    | EmptyModelResponse
    | InvalidStructuredOutput
    | Cancelled
    | GuardrailTripped
    | GuardrailFailed
    | ApprovalNotBound
    | ApprovalHandlerFailed
    | StoreFailed
    | MaxAgentDepthExceeded
    | ModelCallFailed
    | ToolFailed
    | ToolsUnavailable
    | TimedOut
    | EffectFailed
    | UnexpectedInput,
    Field(discriminator="kind"),
]


class HelikonError(Exception):
    """Base of every exception helikon raises."""


class ChartDefinitionError(HelikonError, ValueError):
    """A chart that cannot be compiled; the message names the state and the input."""

    def __init__(self, message: str, *, state: str | None = None, input_kind: str | None = None):
        super().__init__(message)
        self.state = state
        self.input_kind = input_kind


class NotInChart(HelikonError, ValueError):
    """`transition` was given a state whose phase, or an input whose kind, the chart lacks
    (a state from another chart, a hand-built input): a caller's mistake, named."""


class RunError(HelikonError):
    """A run ended in `Failed`; `error` is the `AgentError` value it failed with, `usage`
    what it spent before failing (failed calls and sub-agents included), when known."""

    def __init__(self, error: AgentError, usage: Usage | None = None):
        super().__init__(describe(error))
        self.error = error
        self.usage = usage


class ModelError(HelikonError):
    """A model call failed; `error` says why as a `ModelCallFailed` value.

    `usage` is what the failed call spent, as the model reports it (tokens a refusal
    already cost, and the request itself), or None when the model reports nothing; the
    driver then counts the last usage the call streamed. Either way it counts toward the
    run's usage.
    """

    def __init__(self, error: ModelCallFailed, *, usage: Usage | None = None):
        super().__init__(f"model call failed ({error.reason}): {error.message}")
        self.error = error
        self.usage = usage


class FatalToolError(HelikonError):
    """Raised by a tool to fail the run rather than report an error result to the model.

    The run fails with `error` when given, else with `ToolFailed(tool, call_id, message)`;
    the driver fills in `tool` and `call_id` when the tool did not.
    """

    def __init__(self, message: str = "", *, error: AgentError | None = None):
        super().__init__(message)
        self.error = error
        self.tool = ""
        self.call_id = ""


def describe(error: AgentError) -> str:
    """One readable line for an `AgentError` value."""
    fields = ", ".join(
        f"{name}={getattr(error, name)!r}" for name in error.__dataclass_fields__ if name != "kind"
    )
    return f"{type(error).__name__}({fields})"
