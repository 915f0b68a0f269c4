"""What a run store holds, as values: a run's header, one record per transition, one row per
tool call, its lease; and the errors a store raises.

Theory of operation: a run's history is an append-only log. A `StepRecord` is one transition
as it happened (its seq, the input, the row it took with every guard checked, the state after,
the next action, the events it emitted and the items it appended): never the previous state
and never the conversation, so a record's size does not grow with the run. The state at any
boundary is the last record's `state_after`; the conversation is the fold of the records'
`appends`. A record's `time` says when it was applied and how long the effect before it
took (None in runs stored before records had times: the field is additive, and a reader
that does not know it ignores it). Tool calls get a `CallRecord` as they start and their
result as they finish (first write wins), so a batch resumed after a crash knows which
calls finished.
"""

from __future__ import annotations

from dataclasses import field
from typing import Literal

from helikon.core.approvals import ApprovalDecision
from helikon.core.errors import HelikonError
from helikon.core.events import AgentEvent
from helikon.core.items import Item, ToolResult
from helikon.core.state import LoopState, NextAction, TransitionInput, TransitionOutcome
from helikon.core.tool_spec import ListedTool
from helikon.core.transition import Match
from helikon.core.values import value
from helikon.trace.times import StepTime

FORMAT_VERSION = 1
"""The format of the records a store writes (not the store's schema version)."""

RunStatus = Literal["running", "suspended", "completed", "failed"]


@value
class RunHeader:
    """A run's identity, fixed when it is created: resuming checks every field of it.

    `tools` are the tools the run took from its tool sources (MCP servers) as it started:
    a resumed run offers those again, whatever the server lists now."""

    run_id: str
    agent: str
    chart: str
    chart_digest: str
    toolset_digest: str
    parent_run_id: str | None = None
    session_id: str | None = None
    session_items: int = 0
    format_version: int = FORMAT_VERSION
    forked_from: str | None = None
    forked_at: int | None = None
    tools: tuple[ListedTool, ...] = ()


@value
class StepRecord:
    """One transition of a run, as written before its effect starts."""

    seq: int
    input: TransitionInput
    row: int
    checked: tuple[tuple[str, bool], ...]
    state_after: LoopState
    next_action: NextAction
    events: tuple[AgentEvent, ...]
    appends: tuple[Item, ...]
    time: StepTime | None = None


def step_record(
    seq: int,
    inp: TransitionInput,
    match: Match,
    outcome: TransitionOutcome,
    time: StepTime | None = None,
) -> StepRecord:
    """The record of transition `seq`: `inp` took `match`'s row and gave `outcome`, at
    `time`."""
    return StepRecord(
        seq,
        inp,
        match.row.index,
        match.checked,
        outcome.next_state,
        outcome.next_action,
        outcome.events,
        outcome.conversation_appends,
        time,
    )


@value
class EffectRecord:
    """An event an effect produced after transition `after_seq` (deltas are not kept), at
    `at` (UTC, ISO 8601; None in runs stored before events had times)."""

    after_seq: int
    event: AgentEvent
    at: str | None = None


@value
class CallRecord:
    """A tool call of the batch entered at `seq`: started, and its result once it finished.

    `arguments_hash` is the hash of the arguments as the model wrote them, so a call whose
    stored arguments were redacted is never run again with other arguments.
    """

    seq: int
    call_id: str
    tool: str
    arguments_hash: str
    result: ToolResult | None = None

    @property
    def finished(self) -> bool:
        return self.result is not None


@value
class Lease:
    """Who drives a run: `owner`, at `epoch` (bumped on every claim), until `expires_at`
    (seconds since the epoch, the store's clock)."""

    owner: str
    epoch: int
    expires_at: float


@value
class RunInfo:
    """One line of `store.runs()`: what a run is and where it stands."""

    run_id: str
    agent: str
    phase: str
    seq: int
    status: RunStatus
    turns: int
    updated_at: float
    created_at: float
    parent_run_id: str | None = None
    lease_owner: str | None = None
    lease_expires_at: float | None = None
    forked_from: str | None = None
    forked_at: int | None = None


@value
class StoredRun:
    """Everything a store holds for one run, checked: what resuming, exporting and the
    debugger read."""

    header: RunHeader
    info: RunInfo
    records: tuple[StepRecord, ...]
    effects: tuple[EffectRecord, ...]
    calls: tuple[CallRecord, ...]
    decisions: tuple[tuple[int, ApprovalDecision], ...] = field(default=())
    chart_data: str | None = None
    head_mac: str = ""


class StoreError(HelikonError):
    """A run store refused or failed an operation; the message says which and why."""


class RunNotFound(StoreError, KeyError):
    """No run of that id is in the store."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "run not found"


class RunExists(StoreError, ValueError):
    """A run of that id is already in the store (`run_id=` names a new run)."""


class RunLeased(StoreError):
    """Another driver holds the run's lease: `owner` until `expires_at`."""

    def __init__(self, message: str, *, owner: str, expires_at: float) -> None:
        super().__init__(message)
        self.owner = owner
        self.expires_at = expires_at


class DecisionSpent(StoreError):
    """An approval decision for that call and suspension was already spent."""


class LeaseLost(StoreError):
    """This driver's lease was taken over (its epoch is stale): it must stop writing."""


class StoreCorrupt(StoreError, ValueError):
    """What the store holds does not check out (an edited record, a forged row, a broken
    chain of signatures, a schema from a newer helikon): refusing to use it."""
