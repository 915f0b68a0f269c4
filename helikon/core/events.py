"""The typed event stream of a run: one frozen value per variant, tagged by `type`.

Raw deltas (`TokenDelta`, `ReasoningDelta`, `ToolCallDelta`) stream as the provider emits them;
`MessageOutput`, `ToolCallItem` and `ToolOutputItem` carry the same content re-aggregated once
the turn settles. A run's stream ends with exactly one of `RunCompleted`, `RunFailed` or
`RunSuspended`. Every event also has `at` (`Stamped`): when a run streamed it, stamped by
the driver, never here, and no part of the event's value.
"""

from __future__ import annotations

from dataclasses import field
from typing import Annotated, Any, Literal

from pydantic import Field

from helikon.core.approvals import ApprovalRequest
from helikon.core.errors import AgentError
from helikon.core.items import AssistantMessage, FinalOutput, ToolCall, ToolResult, Usage
from helikon.core.values import value


class Stamped:
    """What every event has besides its fields: `at`, when a run streamed it.

    The driver stamps each event it streams, where it streams it (`stamp`): a transition's
    events with the time the step was applied, an effect's event as the effect emits it.
    The pure core never does (it reads no clock), so `at` is no field: equality, hashing,
    `repr` and the event's JSON leave it out, and a replay compares events as before. An
    event's time where it is written is its line's or row's (`EffectTrace.at`,
    `StepRecord.time`)."""

    __slots__ = ("_at",)

    _at: float

    @property
    def at(self) -> float | None:
        """When a run streamed this event: seconds since the epoch (UTC; `iso` in
        helikon.trace.times writes it as text). None for an event no run streamed (built,
        or read back from a trace or a store)."""
        try:
            return self._at
        except AttributeError:
            return None


def stamp(event: Any, at: float) -> None:
    """Stamp `event` with `at` (`Stamped.at`), once, as a run streams it (its only write:
    values are immutable otherwise, and `at` is not part of this one)."""
    object.__setattr__(event, "_at", at)


@value
class RunStarted(Stamped):
    """The run began: `agent` runs it, `run_id` names it."""

    agent: str
    run_id: str = ""
    type: Literal["run_started"] = field(default="run_started", init=False, repr=False)


@value
class TurnStarted(Stamped):
    """Model call `turn` (0-based) of the tool loop is about to be made."""

    turn: int
    type: Literal["turn_started"] = field(default="turn_started", init=False, repr=False)


@value
class TokenDelta(Stamped):
    """A fragment of the model's text, as the provider streamed it."""

    text: str
    type: Literal["token_delta"] = field(default="token_delta", init=False, repr=False)


@value
class ReasoningDelta(Stamped):
    """A fragment of the model's reasoning, as the provider streamed it."""

    text: str
    type: Literal["reasoning_delta"] = field(default="reasoning_delta", init=False, repr=False)


@value
class ToolCallDelta(Stamped):
    """A fragment of a streamed tool call; `call_id` is on every fragment."""

    call_id: str
    args_delta: str
    name: str | None = None
    type: Literal["tool_call_delta"] = field(default="tool_call_delta", init=False, repr=False)

    @property
    def arguments_delta(self) -> str:
        """Deprecated name of `args_delta` (kept for one release)."""
        return self.args_delta


DELTAS = (TokenDelta, ReasoningDelta, ToolCallDelta)
"""The fragments a streamed model answer arrives in; the message they build carries it whole,
so a run store never keeps them (nor does a trace whose run redacts)."""


@value
class MessageOutput(Stamped):
    """The model's text of one turn, re-aggregated once the turn finished."""

    item: AssistantMessage
    type: Literal["message_output"] = field(default="message_output", init=False, repr=False)


@value
class ToolCallItem(Stamped):
    """A complete tool call the model asked for (arguments assembled)."""

    item: ToolCall
    type: Literal["tool_call_item"] = field(default="tool_call_item", init=False, repr=False)


@value
class ToolOutputItem(Stamped):
    """The one result a tool call got: executed, errored, denied, rejected, skipped or cancelled."""

    item: ToolResult
    type: Literal["tool_output_item"] = field(default="tool_output_item", init=False, repr=False)


@value
class HandoffItem(Stamped):
    """Control passed between agents; serialized as `from` / `to`."""

    from_agent: Annotated[str, Field(alias="from")]
    to_agent: Annotated[str, Field(alias="to")]
    type: Literal["handoff_item"] = field(default="handoff_item", init=False, repr=False)


@value
class AgentUpdated(Stamped):
    """Agent `agent` now runs (a handoff target started)."""

    agent: str
    type: Literal["agent_updated"] = field(default="agent_updated", init=False, repr=False)


@value
class GuardrailTriggered(Stamped):
    """Guardrail `guardrail` tripped on the run's `kind` ("input" or "output"); `info` is
    what it said."""

    guardrail: str
    kind: Literal["input", "output"]
    info: str = ""
    type: Literal["guardrail_triggered"] = field(
        default="guardrail_triggered", init=False, repr=False
    )

    @property
    def stage(self) -> str:
        """Deprecated name of `kind` (kept for one release)."""
        return self.kind

    @property
    def message(self) -> str:
        """Deprecated name of `info` (kept for one release)."""
        return self.info


@value
class ApprovalRequested(Stamped):
    """Call `call_id` of `tool` with arguments `args` waits for a decision; a decision must
    quote `arguments_hash` (`request` rebuilds the `ApprovalRequest` to decide on)."""

    call_id: str
    tool: str
    args: str
    arguments_hash: str
    type: Literal["approval_requested"] = field(
        default="approval_requested", init=False, repr=False
    )

    @classmethod
    def of(cls, request: ApprovalRequest) -> ApprovalRequested:
        call = request.call
        return cls(call.call_id, call.name, call.arguments, request.arguments_hash)

    @property
    def request(self) -> ApprovalRequest:
        """The pending call as an `ApprovalRequest` (the field of earlier releases)."""
        return ApprovalRequest(ToolCall(self.call_id, self.tool, self.args), self.arguments_hash)


@value
class PermissionDenied(Stamped):
    """Call `call_id` of `tool` will not run: denied by policy or rejected by a human."""

    call_id: str
    tool: str
    reason: str = ""
    type: Literal["permission_denied"] = field(default="permission_denied", init=False, repr=False)


@value
class RepairStarted(Stamped):
    """The output failed validation; repair turn `attempt` asks again with `errors`."""

    attempt: int
    errors: tuple[str, ...] = ()
    type: Literal["repair_started"] = field(default="repair_started", init=False, repr=False)


@value
class StructuredOutputFailed(Stamped):
    """The repaired output failed validation too: the run fails. `schema_errors` are the
    validation errors, `final_text` the model's last answer."""

    schema_errors: tuple[str, ...]
    final_text: str
    type: Literal["structured_output_failed"] = field(
        default="structured_output_failed", init=False, repr=False
    )

    @property
    def errors(self) -> tuple[str, ...]:
        """Deprecated name of `schema_errors` (kept for one release)."""
        return self.schema_errors

    @property
    def raw(self) -> str:
        """Deprecated name of `final_text` (kept for one release)."""
        return self.final_text


@value
class RunCompleted(Stamped):
    """The run succeeded with `output` (text, typed value); `usage` is what it spent."""

    output: FinalOutput
    usage: Usage
    type: Literal["run_completed"] = field(default="run_completed", init=False, repr=False)

    @classmethod
    def of(cls, output: FinalOutput) -> RunCompleted:
        return cls(output, output.usage)


@value
class RunFailed(Stamped):
    """The run failed with `error`, an `AgentError` value."""

    error: AgentError
    type: Literal["run_failed"] = field(default="run_failed", init=False, repr=False)


@value
class RunSuspended(Stamped):
    """The run waits for approvals out of process; resume it with decisions for `pending`."""

    pending: tuple[ApprovalRequest, ...]
    type: Literal["run_suspended"] = field(default="run_suspended", init=False, repr=False)


TERMINAL_EVENTS = frozenset({"run_completed", "run_failed", "run_suspended"})
"""The event types a run's stream ends with: exactly one of them, once."""

AgentEvent = Annotated[
    RunStarted
    | TurnStarted
    | TokenDelta
    | ReasoningDelta
    | ToolCallDelta
    | MessageOutput
    | ToolCallItem
    | ToolOutputItem
    | HandoffItem
    | AgentUpdated
    | GuardrailTriggered
    | ApprovalRequested
    | PermissionDenied
    | RepairStarted
    | StructuredOutputFailed
    | RunCompleted
    | RunFailed
    | RunSuspended,
    Field(discriminator="type"),
]
