"""What crosses Temporal's wire: the workflow's input and result, each activity's input and
answer, and the approval update's argument, as `@value`s.

Payloads are plain JSON data (`to_payload`, `from_payload`, through `helikon.core.codec`), so
Temporal's default data converter carries them and any client can start a run without a
helikon converter. What a payload says is hostile until checked: `from_payload` validates it
as the type it must be and names what was wrong.

Why payloads stay small: the workflow never holds the conversation. Each step's record rides
on the next activity's input (`Writes`); the model activity writes them to the run store and
reads the conversation back from it, so a model call's input is the appends since the last
call, not the whole conversation (bench/temporal.py measures both). One payload may still
be large (a tool's result, a model's answer): from `CLAIM_THRESHOLD` bytes it crosses the
wire as a reference into the run store (helikon.temporal.payloads).
"""

from __future__ import annotations

from typing import Any

from pydantic import JsonValue, ValidationError

from helikon.core.approvals import ApprovalRequest
from helikon.core.codec import from_data, to_data
from helikon.core.errors import AgentError, EffectFailed, HelikonError, ToolsUnavailable
from helikon.core.items import ZERO_USAGE, FinalOutput, Item, ToolCall, ToolResult, Usage
from helikon.core.state import EffectResult, LoopState, ModelRequest, TransitionInput
from helikon.core.tool_spec import ListedTool
from helikon.core.values import value
from helikon.durable.records import EffectRecord, StepRecord
from helikon.trace.times import StepTime

WORKFLOW = "HelikonWorkflow"
"""The workflow type's name, as clients start it."""

OUTCOME_MEMO = "helikon_outcome"
"""The memo key of a cancelled run's `RunOutcome`: its workflow ends Canceled, which carries
no result, so the outcome is kept here for `helikon.temporal.outcome` (and the UI)."""


class PayloadError(HelikonError, ValueError):
    """A payload is not the value it must be; the message names which and why."""


@value
class RunRequest:
    """The workflow's input: which run, of which agent on which chart, from where.

    `chart` is the digest the caller expects; the worker's agent must run that chart.
    A new run (`seq` 0) starts from `input` (or, with `from_parent`, from its parent's
    conversation as the store holds it: a handoff). A continued run (`seq` > 0, after
    continue-as-new) reads its state from the store: only ids and the seq are carried.
    `token_budget` is what a nested run may still spend of its root's budget; `deadline`
    is the root's `RunConfig.timeout` as an epoch second (0: none), so nesting and
    continue-as-new keep one deadline, and `timeout` those seconds (None: the agent's own), so
    a nested run the deadline stops fails `TimedOut` with its root's timeout, as in process.
    `task_queue` names the worker registry the agent is looked up in (default: the workflow's
    task queue; a replay runs on another). `config_of` names the agent whose `RunConfig` the
    run takes: a nested run's root ("": the run's own agent's; a nested run started before
    `CHILD_CONFIG`, helikon.temporal.calls, took its own).

    Workers of two releases may share a task queue (a rolling deploy), so a request written
    by one is read by the other: a field added later has a default that keeps the earlier
    behaviour when it is absent (no `timeout`: the agent's own, as before it was added), and
    a worker reads a field it does not know as absent (tests/test_temporal_requests.py).
    """

    run_id: str
    agent: str
    chart: str = ""
    input: tuple[Item, ...] = ()
    seq: int = 0
    depth: int = 0
    parent_run_id: str | None = None
    from_parent: bool = False
    token_budget: int | None = None
    deadline: float = 0.0
    task_queue: str = ""
    timeout: float | None = None
    config_of: str = ""


@value
class RunOutcome:
    """The workflow's result: the run's last state (Done or Failed), its seq and usage."""

    run_id: str
    state: LoopState
    seq: int

    @property
    def output(self) -> FinalOutput | None:
        return getattr(self.state, "output", None)

    @property
    def usage(self) -> Usage:
        usage: Usage = self.state.usage
        return usage


@value
class Step:
    """One transition the workflow applied, as it travels: its seq, its input and the row
    it took. The writing activity applies the same pure `transition` again to rebuild the
    full record (guards checked, state after, action, events, appends) and checks it took
    the same row, so the payload carries the input once rather than four times. `record`
    is the full record when the outcome is not `transition`'s own (an output guardrail
    tripped). `time` is when the workflow applied it (`workflow.now()`); the workflow
    times no effect (`took` is None), and a history recorded before steps had times
    replays with None."""

    seq: int
    input: TransitionInput
    row: int
    record: StepRecord | None = None
    time: StepTime | None = None


@value
class Writes:
    """Steps (and effects' events) the workflow made since its last write, to be written
    to the run store first-write-wins by (run_id, seq). `agent`, `token_budget` and
    `config_of` (the agent whose `RunConfig` the run takes, as `RunRequest` says) name the
    transition context the steps are rebuilt with. The run's first write (`create`) makes
    it in the store, with the header and chart the writer derives from its own agent (and
    `parent_run_id`), so the chart never rides in the history; `tools` are the tools the
    run listed from its agent's tool sources, given with `create` only (the header records
    them, and later writes read them from there). `released`: the workflow ends with these
    writes though the run has not ended (a nested run at its suspension), so the run's lease
    is released with them, as a local run's suspension releases it."""

    run_id: str
    agent: str
    token_budget: int | None = None
    steps: tuple[Step, ...] = ()
    effects: tuple[EffectRecord, ...] = ()
    create: bool = False
    parent_run_id: str | None = None
    suspended: bool = False
    tools: tuple[ListedTool, ...] = ()
    config_of: str = ""
    released: bool = False


@value
class ListTools:
    """List the tools of the tool sources (MCP servers) of `agent`, as a run of it starts."""

    agent: str


@value
class ToolsListed:
    """The tools a run takes from its agent's tool sources, as its store records them; or
    why it cannot have them (a source that cannot list, a name two tools share)."""

    tools: tuple[ListedTool, ...] = ()
    error: ToolsUnavailable | None = None


@value
class ModelCall:
    """One model call: the writes before it, the request, and how many calls came before
    (a scripted model answers by it). The conversation is read from the store."""

    agent: str
    writes: Writes
    request: ModelRequest
    calls_before: int = 0


@value
class ModelAnswer:
    """A model call's outcome: the next input (a `ModelResponse`, or a `Fail`), and the
    seconds the call ran (`took`, the activity's monotonic clock; None in histories
    recorded before answers had it)."""

    input: TransitionInput
    took: float | None = None


@value
class ToolRun:
    """One tool call of the batch entered at `seq`."""

    agent: str
    run_id: str
    seq: int
    call: ToolCall
    writes: Writes | None = None


@value
class ToolAnswer:
    """A tool call's result, or the error that fails the run (a `FatalToolError`), and the
    seconds the call ran (`took`, as `ModelAnswer.took`)."""

    result: ToolResult | None = None
    fatal: AgentError | None = None
    usage: Usage = ZERO_USAGE
    took: float | None = None


@value
class EffectRun:
    """The effect a chart's effect phase runs, asked for at `seq` (the `RunEffect` action)."""

    agent: str
    run_id: str
    seq: int
    effect: str
    writes: Writes
    args: JsonValue = None


@value
class EffectAnswer:
    """What the effect returned, or why the run fails (`EffectFailed`), and the seconds
    it ran (`took`, as `ModelAnswer.took`)."""

    result: EffectResult | None = None
    error: EffectFailed | None = None
    took: float | None = None


@value
class GuardrailCheck:
    """Check the run's input (`output` None: the user's messages, read from the store) or
    its final `output` with the agent's guardrails."""

    agent: str
    writes: Writes
    output: FinalOutput | None = None


@value
class GuardrailAnswer:
    """The guardrail error that stops the run (tripped or failed), or none."""

    error: AgentError | None = None


@value
class ApprovalAsk:
    """Ask the `on_approval` handler of `agent` about the pending calls of a suspension (each
    stamped with the run and the suspension's seq), after the writes before it."""

    agent: str
    writes: Writes
    pending: tuple[ApprovalRequest, ...]


@value
class ApprovalAnswer:
    """The handler's answer as the next input: the `ApprovalDecisions`, or the `Fail` that
    ends the run (an answer that does not bind, a handler that raised)."""

    input: TransitionInput


@value
class Head:
    """A stored run at its head, for a continued workflow: state, seq and model calls, and
    the tools it listed from its agent's tool sources when it started."""

    state: LoopState
    seq: int
    model_calls: int
    chart_digest: str
    tools: tuple[ListedTool, ...] = ()


@value
class Conversation:
    """A stored run's conversation (a handoff target starts from its parent's)."""

    items: tuple[Item, ...]


@value
class Status:
    """What the `current()` query answers: phase, seq, pending approvals, usage."""

    run_id: str
    phase: str
    seq: int
    pending: tuple[ApprovalRequest, ...]
    usage: Usage


def to_payload(message: Any) -> Any:
    """`message` as JSON data for Temporal's default converter."""
    return to_data(message)


def from_payload(kind: Any, data: Any, what: str) -> Any:
    """`data` checked as `kind`; `what` names it in the error.

    Raises:
        PayloadError: the data is not a valid `kind`.
    """
    try:
        return from_data(kind, data)
    except ValidationError as exc:
        raise PayloadError(
            f"{what} is not a valid {getattr(kind, '__name__', kind)}: {exc}"
        ) from None
