"""`TraceView`: a recorded run as the trace renderers see it, the plain form between
`extract_trace` (helikon.export.trace_ir) and the HTML, Mermaid and Markdown renderers.

A tree of frozen values: a `RunSection` per run, holding its `Turn`s, each holding the rows
it took (`Step`s) and its entries in stream order (`ModelCall`, `Message`, `ReasoningText`,
`ToolCallView` with its `ApprovalView` and `ToolOutcome`, `HandoffView`, `GuardrailView`,
`RepairView`, `ErrorView`, `CompactionView`, `EffectView`). Runs nested in a run hang from
the entry that started them. Renderers can be tested from views built by hand.

Times come from the trace as it recorded them: a step's `at` and `took` (the effect that
produced its input), a model call's, a tool call's and an effect's `took`, and the pause
before a resumption (`Step.resumption`); traces without times show none.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from helikon.core.items import ZERO_USAGE, ToolResultStatus, Usage
from helikon.core.table import TransitionTable
from helikon.export.ir import TraceOverlay
from helikon.trace import TraceHeader
from helikon.trace.times import duration_text

Status = Literal["completed", "failed", "suspended", "unfinished"]
Via = Literal["root", "handoff", "tool", "detached"]


@dataclass(frozen=True, slots=True)
class Step:
    """One transition of a run: the row it took (its index in the chart) and the guards
    checked on the way, with their values."""

    seq: int
    row: int
    source: str
    input_kind: str
    target: str
    action: str
    checked: tuple[tuple[str, bool], ...] = ()
    at: str | None = None
    took: float | None = None
    resumed: bool | None = None
    paused: float | None = None

    @property
    def resumption(self) -> str | None:
        """`resumed after 2 h 5 min` for the first step of a stored run's resumption (the
        pause as the times show it), else None."""
        if not self.resumed:
            return None
        return "resumed" if self.paused is None else f"resumed after {duration_text(self.paused)}"


@dataclass(frozen=True, slots=True)
class ModelCall:
    """One finished model call. `purpose` is the request's: turn, finalize, repair, compact
    or a custom phase's name; `streamed` is true when deltas arrived as it ran."""

    purpose: str
    usage: Usage
    finish_reason: str
    streamed: bool = False
    took: float | None = None
    kind: Literal["model_call"] = "model_call"


@dataclass(frozen=True, slots=True)
class Message:
    text: str
    agent: str | None = None
    kind: Literal["message"] = "message"


@dataclass(frozen=True, slots=True)
class ReasoningText:
    text: str
    kind: Literal["reasoning"] = "reasoning"


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    """A call's one result; `pretty` is its content re-indented when it is JSON."""

    content: str
    status: ToolResultStatus = "executed"
    is_error: bool = False
    pretty: str | None = None


@dataclass(frozen=True, slots=True)
class ApprovalView:
    """A call that waited for a decision; `approved` is None while undecided."""

    call_id: str
    tool: str
    arguments: str
    pretty: str | None = None
    approved: bool | None = None
    reason: str = ""
    kind: Literal["approval"] = "approval"

    @property
    def status(self) -> Literal["approved", "rejected", "waiting"]:
        if self.approved is None:
            return "waiting"
        return "approved" if self.approved else "rejected"


@dataclass(frozen=True, slots=True)
class ToolCallView:
    """A tool call with its arguments (`pretty` when they are JSON), the approval it waited
    for, its result (matched by `call_id`) and how long it ran (`took`, seconds, when the
    trace says), the reason a policy or a human denied it, and the run of an agent called
    as a tool."""

    call_id: str
    name: str
    arguments: str
    pretty: str | None = None
    result: ToolOutcome | None = None
    denied: str | None = None
    approval: ApprovalView | None = None
    run: RunSection | None = None
    took: float | None = None
    kind: Literal["tool_call"] = "tool_call"

    @property
    def failed(self) -> bool:
        return self.result is not None and self.result.is_error


@dataclass(frozen=True, slots=True)
class HandoffView:
    from_agent: str
    to_agent: str
    call_id: str = ""
    run: RunSection | None = None
    kind: Literal["handoff"] = "handoff"


@dataclass(frozen=True, slots=True)
class GuardrailView:
    name: str
    stage: str
    message: str = ""
    kind: Literal["guardrail"] = "guardrail"


@dataclass(frozen=True, slots=True)
class RepairView:
    attempt: int
    errors: tuple[str, ...] = ()
    kind: Literal["repair"] = "repair"


@dataclass(frozen=True, slots=True)
class ErrorView:
    """A failure to show in red: `title` its kind (`MaxTurnsExceeded`), `message` one line,
    `detail` anything long (the raw output that failed validation)."""

    title: str
    message: str
    detail: str = ""
    kind: Literal["error"] = "error"


@dataclass(frozen=True, slots=True)
class CompactionView:
    text: str
    kind: Literal["compaction"] = "compaction"


@dataclass(frozen=True, slots=True)
class EffectView:
    """An effect a chart's effect phase ran: `phase` ran `effect` with `arguments` and it
    returned `output` (both JSON text, as the trace holds them: redacted when the run
    redacts); `pretty` is the output re-laid out."""

    phase: str
    effect: str
    arguments: str
    output: str
    pretty: str | None = None
    took: float | None = None
    kind: Literal["effect"] = "effect"


Entry = (
    ModelCall
    | Message
    | ReasoningText
    | ToolCallView
    | ApprovalView
    | HandoffView
    | GuardrailView
    | RepairView
    | ErrorView
    | CompactionView
    | EffectView
)


@dataclass(frozen=True, slots=True)
class Turn:
    """One turn of a run; `number` is None for steps before the first `TurnStarted`
    (a run that failed at its start). `usage` sums the turn's model calls."""

    number: int | None
    steps: tuple[Step, ...]
    entries: tuple[Entry, ...]
    usage: Usage = ZERO_USAGE

    @property
    def phases(self) -> tuple[str, ...]:
        """The phase path: where the turn began, then each row's target."""
        if not self.steps:
            return ()
        return (self.steps[0].source, *(step.target for step in self.steps))

    @property
    def label(self) -> str:
        return "start" if self.number is None else f"turn {self.number}"

    @property
    def at(self) -> str | None:
        """When the turn's first step was applied, when the trace says."""
        return self.steps[0].at if self.steps else None

    @property
    def took(self) -> float | None:
        """How long the turn's effects ran (model calls, tools, effects), when timed."""
        timed = [step.took for step in self.steps if step.took is not None]
        return sum(timed) if timed else None


@dataclass(frozen=True, slots=True)
class Outcome:
    """How a run ended. `value` is a typed output as indented JSON; `pending` the calls a
    suspended run waits on."""

    status: Status
    text: str | None = None
    value: str | None = None
    error: ErrorView | None = None
    pending: tuple[ApprovalView, ...] = ()


@dataclass(frozen=True, slots=True)
class RunSection:
    """One run: its agent, how it was started (`via`), its input, turns and outcome.

    `usage` is the run's own total (a parent's includes its children's); `rows` the chart
    rows it fired in order; `on_chart` whether they agree with the resolved chart.
    """

    run_id: str
    agent: str
    depth: int
    via: Via
    input: tuple[str, ...]
    turns: tuple[Turn, ...]
    outcome: Outcome
    usage: Usage
    rows: tuple[int, ...]
    on_chart: bool = False

    @property
    def path(self) -> tuple[str, ...]:
        """Every phase the run went through, in order, a phase kept by a row shown once."""
        phases: list[str] = []
        for turn in self.turns:
            for phase in turn.phases:
                if not phases or phases[-1] != phase:
                    phases.append(phase)
        return tuple(phases)

    def walk(self) -> list[RunSection]:
        """This run and every run nested in it, depth first in stream order."""
        found = [self]
        for turn in self.turns:
            for entry in turn.entries:
                run = getattr(entry, "run", None)
                if run is not None:
                    found += run.walk()
        return found


@dataclass(frozen=True, slots=True)
class TraceView:
    """A trace as renderers see it; see the module docstring.

    `table` is the chart the trace was recorded on, when it could be resolved; otherwise
    None and `chart_note` says why. `detached` holds runs no entry of the root leads to
    (a trace cut short).
    """

    header: TraceHeader
    root: RunSection
    table: TransitionTable | None = None
    chart_note: str = ""
    detached: tuple[RunSection, ...] = ()

    @property
    def runs(self) -> list[RunSection]:
        return [run for top in (self.root, *self.detached) for run in top.walk()]

    @property
    def outcome(self) -> Outcome:
        return self.root.outcome

    @property
    def usage(self) -> Usage:
        return self.root.usage

    def overlay(self, run: RunSection | None = None) -> TraceOverlay | None:
        """The path `run` (the root by default) took, to draw over the chart; None when
        the chart is unknown or the run was not recorded on it."""
        run = run or self.root
        if self.table is None or not run.on_chart:
            return None
        return TraceOverlay.from_rows(self.table, run.rows)


def usage_text(usage: Usage) -> str:
    """`3 requests · 450 tokens (360 in, 90 out)`."""
    requests = f"{usage.requests} request" + ("" if usage.requests == 1 else "s")
    tokens = f"{usage.total_tokens} tokens"
    if usage.input_tokens or usage.output_tokens:
        tokens += f" ({usage.input_tokens} in, {usage.output_tokens} out)"
    return f"{requests} · {tokens}"
