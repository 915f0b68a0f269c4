"""Extract a recorded run (`Trace`) into `TraceView`, the plain form every trace renderer reads.

Theory of operation: `extract_trace` is the only code that reads trace lines; the HTML,
Mermaid and Markdown renderers read only the `TraceView` it returns. The view is a tree:

- a `RunSection` per run (the root, a handoff's target, an agent run as a tool), holding
  its `Turn`s; a run nested in another hangs from the entry that started it (its
  `HandoffView` or `ToolCallView`), found by the run id the driver gives it
  (`<parent>/<seq of the handoff transition>`, `<parent>/<call_id>`);
- a `Turn` per `TurnStarted`: the rows taken (`Step`s, whose phases make the turn's phase
  path) and its entries in stream order: model calls, messages, tool calls with their
  results, approvals, handoffs, guardrails, repairs, errors;
- the outcome of each run and the chart rows the root fired, for `TraceOverlay.from_rows`.

A row belongs to the turn in which its transition began, so the row that starts turn n+1
ends turn n's path, and turn n+1's path starts where it left off. Token deltas only mark a
model call as streamed: the text comes from `MessageOutput`, which re-aggregates it.

Pure: no IO, no jinja2, no graphviz. Everything follows the trace's order, so renderers
are byte-stable.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from helikon.approvals import ApprovalDecision
from helikon.chart.table import TransitionTable
from helikon.errors import AgentError, describe
from helikon.events import (
    AgentUpdated,
    ApprovalRequested,
    GuardrailTriggered,
    HandoffItem,
    MessageOutput,
    PermissionDenied,
    ReasoningDelta,
    RepairStarted,
    RunCompleted,
    RunFailed,
    RunStarted,
    RunSuspended,
    StructuredOutputFailed,
    TokenDelta,
    ToolCallDelta,
    ToolCallItem,
    ToolOutputItem,
    TurnStarted,
)
from helikon.export.ir import TraceOverlay
from helikon.items import (
    ZERO_USAGE,
    CompactionSummary,
    FinalOutput,
    Reasoning,
    ToolCall,
    ToolResult,
    ToolResultStatus,
    Usage,
    UserMessage,
)
from helikon.state import ApprovalDecisions, CallModel, Handoff, ModelResponse, Start
from helikon.trace import EffectTrace, Trace, TraceHeader, TransitionTrace

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


@dataclass(frozen=True, slots=True)
class ModelCall:
    """One settled model call. `purpose` is the request's: turn, finalize, repair, compact
    or a custom phase's name; `streamed` is true when deltas arrived as it ran."""

    purpose: str
    usage: Usage
    finish_reason: str
    streamed: bool = False
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
    for, its result (matched by `call_id`), the reason a policy or a human denied it, and the
    run of an agent called as a tool."""

    call_id: str
    name: str
    arguments: str
    pretty: str | None = None
    result: ToolOutcome | None = None
    denied: str | None = None
    approval: ApprovalView | None = None
    run: RunSection | None = None
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


def extract_trace(trace: Trace, table: TransitionTable | None = None) -> TraceView:
    """Turn a trace read back (`read_trace`) into a `TraceView`.

    Args:
        trace: the trace.
        table: the chart the run used, when it is not helikon's default chart; it is used
            only if its digest matches the one the trace's header names.
    """
    resolved, note = resolve_table(trace.header, table)
    index = _Index(trace, resolved)
    root = index.section(trace.header.run_id, 0, "root", trace.header.agent)
    detached = tuple(
        index.section(run_id, 0, "detached", "")
        for run_id in index.lines
        if run_id not in index.built
    )
    return TraceView(trace.header, root, resolved, note, detached)


def resolve_table(
    header: TraceHeader, table: TransitionTable | None = None
) -> tuple[TransitionTable | None, str]:
    """The chart the header names: `table` or the default chart, whichever has its digest.

    Returns:
        (the table, "") or (None, a sentence saying why there is no chart).
    """
    from helikon.chart.default import DEFAULT_TABLE

    for candidate in (table, DEFAULT_TABLE):
        if candidate is not None and candidate.digest == header.chart_digest:
            return candidate, ""
    wanted = f"{header.chart} ({header.chart_digest[:12]})"
    if table is None:
        return None, (
            f"The run used chart {wanted}, which is not helikon's default chart; "
            "pass its table to draw it."
        )
    return None, (
        f"The run used chart {wanted}; the table given, {table.name} "
        f"({table.digest[:12]}), is another chart, so it is not drawn."
    )


def pretty_json(text: str, width: int = 60) -> str | None:
    """`text` re-laid out when it is a JSON object or array: on one line when that fits in
    `width` characters, else indented; None when it is not JSON."""
    stripped = text.strip()
    if not stripped.startswith(("{", "[")):
        return None
    try:
        data = json.loads(stripped)
    except ValueError:
        return None
    flat = json.dumps(data, ensure_ascii=False)
    return flat if len(flat) <= width else json.dumps(data, indent=2, ensure_ascii=False)


def usage_text(usage: Usage) -> str:
    """`3 requests · 450 tokens (360 in, 90 out)`."""
    requests = f"{usage.requests} request" + ("" if usage.requests == 1 else "s")
    tokens = f"{usage.total_tokens} tokens"
    if usage.input_tokens or usage.output_tokens:
        tokens += f" ({usage.input_tokens} in, {usage.output_tokens} out)"
    return f"{requests} · {tokens}"


def error_view(error: AgentError) -> ErrorView:
    return ErrorView(type(error).__name__, describe(error))


# ---------------------------------------------------------------- extraction


class _Index:
    """What one pass over the lines learns (results, decisions and denials by call), and
    the builder of each run's section from it."""

    def __init__(self, trace: Trace, table: TransitionTable | None) -> None:
        self.table = table
        self.lines: dict[str, list[TransitionTrace | EffectTrace]] = {}
        self.results: dict[tuple[str, str], ToolResult] = {}
        self.decisions: dict[tuple[str, str], ApprovalDecision] = {}
        self.denials: dict[tuple[str, str], str] = {}
        self.requested: set[tuple[str, str]] = set()
        self.agents: dict[str, str] = {}
        self.built: set[str] = set()
        announced = ""  # AgentUpdated names the agent of the run that starts next
        for line in trace.lines:
            if line.run_id not in self.lines and announced:
                self.agents[line.run_id], announced = announced, ""
            self.lines.setdefault(line.run_id, []).append(line)
            if isinstance(line, TransitionTrace):
                self._learn(line)
            elif isinstance(line.event, AgentUpdated):
                announced = line.event.agent

    def _learn(self, line: TransitionTrace) -> None:
        run = line.run_id
        if isinstance(line.input, ApprovalDecisions):
            for decision in line.input.decisions:
                self.decisions.setdefault((run, decision.call_id), decision)
        for event in line.events:
            if isinstance(event, ToolOutputItem):
                self.results.setdefault((run, event.item.call_id), event.item)
            elif isinstance(event, PermissionDenied):
                self.denials.setdefault((run, event.call_id), event.reason or "denied")
            elif isinstance(event, ApprovalRequested):
                self.requested.add((run, event.request.call.call_id))

    def section(self, run_id: str, depth: int, via: Via, agent: str) -> RunSection:
        self.built.add(run_id)
        builder = _SectionBuilder(self, run_id, depth, agent or self.agents.get(run_id, ""))
        for line in self.lines.get(run_id, []):
            builder.add(line)
        return builder.finish(via)

    def child(self, run_id: str, depth: int, via: Via, agent: str) -> RunSection | None:
        if run_id not in self.lines or run_id in self.built:
            return None
        return self.section(run_id, depth, via, agent)

    def tool_call(self, run_id: str, call: ToolCall, depth: int) -> ToolCallView:
        result = self.results.get((run_id, call.call_id))
        outcome = None
        if result is not None:
            outcome = ToolOutcome(
                result.content, result.status, result.is_error, pretty_json(result.content)
            )
        return ToolCallView(
            call.call_id,
            call.name,
            call.arguments,
            pretty_json(call.arguments),
            outcome,
            self.denials.get((run_id, call.call_id)),
            self.approval(run_id, call) if (run_id, call.call_id) in self.requested else None,
            self.child(f"{run_id}/{call.call_id}", depth + 1, "tool", call.name),
        )

    def approval(self, run_id: str, call: ToolCall) -> ApprovalView:
        decision = self.decisions.get((run_id, call.call_id))
        return ApprovalView(
            call.call_id,
            call.name,
            call.arguments,
            pretty_json(call.arguments),
            decision.approved if decision else None,
            decision.reason if decision else "",
        )

    def fits_chart(self, steps: list[Step]) -> bool:
        table = self.table
        if table is None or not steps:
            return False
        for step in steps:
            if not 0 <= step.row < len(table.rows):
                return False
            row = table.rows[step.row]
            taken = (step.source, step.input_kind, step.target, step.action)
            if (row.source, row.input_kind, row.target, row.action) != taken:
                return False
        return True


@dataclass
class _TurnBuilder:
    number: int | None
    steps: list[Step] = field(default_factory=list)
    entries: list[Entry] = field(default_factory=list)

    def freeze(self) -> Turn:
        usage = ZERO_USAGE
        for entry in self.entries:
            if isinstance(entry, ModelCall):
                usage += entry.usage
        return Turn(self.number, tuple(self.steps), tuple(self.entries), usage)


class _SectionBuilder:
    """Walks one run's lines in order, filling its turns."""

    def __init__(self, index: _Index, run_id: str, depth: int, agent: str) -> None:
        self.index, self.run_id, self.depth, self.agent = index, run_id, depth, agent
        self.turns: list[_TurnBuilder] = []
        self.steps: list[Step] = []
        self.input: list[str] = []
        self.outcome = Outcome("unfinished")
        self.usage = ZERO_USAGE
        self.purpose = "turn"
        self.streamed = False
        self.calls: set[str] = set()
        self.line: TransitionTrace | None = None

    @property
    def turn(self) -> _TurnBuilder:
        if not self.turns:
            self.turns.append(_TurnBuilder(None))
        return self.turns[-1]

    def add(self, line: TransitionTrace | EffectTrace) -> None:
        if isinstance(line, EffectTrace):
            self.line = None
            self.event(line.event)
        else:
            self.line = line
            self.transition(line)

    def transition(self, line: TransitionTrace) -> None:
        row = line.row
        step = Step(
            line.seq, row.index, row.source, row.input_kind, row.target, row.action, row.checked
        )
        self.steps.append(step)
        self.turn.steps.append(step)
        self.usage = line.state_after.usage
        self.take_input(line.input)
        for item in line.appends:
            if isinstance(item, CompactionSummary):
                self.turn.entries.append(CompactionView(item.content))
        for event in line.events:
            self.event(event)
        if isinstance(line.next_action, CallModel):
            self.purpose = line.next_action.request.purpose

    def take_input(self, inp: Any) -> None:
        if isinstance(inp, Start):
            self.input += [item.content for item in inp.items if isinstance(item, UserMessage)]
        elif isinstance(inp, ModelResponse):
            call = ModelCall(self.purpose, inp.usage, inp.finish_reason, self.streamed)
            self.turn.entries.append(call)
            reasoning = [item.content for item in inp.items if isinstance(item, Reasoning)]
            self.turn.entries += [ReasoningText(text) for text in reasoning]
        self.streamed = False

    def event(self, event: Any) -> None:  # noqa: C901  (one branch per event kind)
        entries = self.turn.entries
        if isinstance(event, (TokenDelta, ToolCallDelta, ReasoningDelta)):
            self.streamed = True
        elif isinstance(event, TurnStarted):
            self.start_turn(event.turn)
        elif isinstance(event, RunStarted):
            self.agent = event.agent or self.agent
        elif isinstance(event, MessageOutput):
            entries.append(Message(event.item.content, event.item.agent or self.agent or None))
        elif isinstance(event, ToolCallItem):
            self.calls.add(event.item.call_id)
            if not self.is_handoff_call(event.item.call_id):
                entries.append(self.index.tool_call(self.run_id, event.item, self.depth))
        elif isinstance(event, HandoffItem):
            entries.append(self.handoff(event))
        elif isinstance(event, ApprovalRequested):
            # Shown on its call; a request for a call the stream never showed stands alone.
            if event.request.call.call_id not in self.calls:
                entries.append(self.index.approval(self.run_id, event.request.call))
        elif isinstance(event, GuardrailTriggered):
            entries.append(GuardrailView(event.guardrail, event.stage, event.message))
        elif isinstance(event, RepairStarted):
            entries.append(RepairView(event.attempt, event.errors))
        elif isinstance(event, StructuredOutputFailed):
            message = "; ".join(event.errors)
            entries.append(ErrorView("StructuredOutputFailed", message, event.raw))
        else:
            self.end(event)

    def end(self, event: Any) -> None:
        if isinstance(event, RunCompleted):
            self.outcome = _completed(event.output)
        elif isinstance(event, RunFailed):
            error = error_view(event.error)
            self.turn.entries.append(error)
            self.outcome = Outcome("failed", error=error)
        elif isinstance(event, RunSuspended):
            pending = tuple(self.index.approval(self.run_id, r.call) for r in event.pending)
            self.outcome = Outcome("suspended", pending=pending)

    def start_turn(self, number: int) -> None:
        # The start row opens turn 0 from a turn with no number yet: name it, don't split.
        current = self.turns[-1] if self.turns else None
        if current is not None and current.number is None and not current.entries:
            current.number = number
        else:
            self.turns.append(_TurnBuilder(number))

    def is_handoff_call(self, call_id: str) -> bool:
        line = self.line
        return (
            line is not None
            and isinstance(line.next_action, Handoff)
            and line.next_action.call_id == call_id
        )

    def handoff(self, event: HandoffItem) -> HandoffView:
        line = self.line
        if line is None or not isinstance(line.next_action, Handoff):
            return HandoffView(event.from_agent, event.to_agent)
        child_id = f"{self.run_id}/{line.seq}"
        run = self.index.child(child_id, self.depth + 1, "handoff", event.to_agent)
        return HandoffView(event.from_agent, event.to_agent, line.next_action.call_id, run)

    def finish(self, via: Via) -> RunSection:
        return RunSection(
            run_id=self.run_id,
            agent=self.agent or "?",
            depth=self.depth,
            via=via,
            input=tuple(self.input) if via != "handoff" else (),
            turns=tuple(turn.freeze() for turn in self.turns),
            outcome=self.outcome,
            usage=self.usage,
            rows=tuple(step.row for step in self.steps),
            on_chart=self.index.fits_chart(self.steps),
        )


def _completed(output: FinalOutput) -> Outcome:
    value = None
    if output.value is not None:
        value = json.dumps(output.value, indent=2, ensure_ascii=False)
    return Outcome("completed", output.text, value)
