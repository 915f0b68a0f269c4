"""Extract a recorded run (`Trace`) into `TraceView`, the plain form every trace renderer reads.

Theory of operation: `extract_trace` is the only code that reads trace lines; the HTML,
Mermaid and Markdown renderers read only the `TraceView` it returns (helikon.export.
trace_view). The view is a tree:

- a `RunSection` per run (the root, a handoff's target, an agent run as a tool), holding
  its `Turn`s; a run nested in another hangs from the entry that started it (its
  `HandoffView` or `ToolCallView`), found by the run id the driver gives it
  (`<parent>/<seq of the handoff transition>`, `<parent>/<seq of the batch>:<call_id>`);
- a `Turn` per `TurnStarted`: the rows taken (`Step`s, whose phases make the turn's phase
  path) and its entries in stream order: model calls, messages, tool calls with their
  results, approvals, handoffs, guardrails, repairs, effects with their results, errors;
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
from typing import Any

from helikon.core.approvals import ApprovalDecision
from helikon.core.errors import AgentError, describe
from helikon.core.events import (
    DELTAS,
    ApprovalRequested,
    GuardrailTriggered,
    HandoffItem,
    MessageOutput,
    PermissionDenied,
    RepairStarted,
    RunCompleted,
    RunFailed,
    RunStarted,
    RunSuspended,
    StructuredOutputFailed,
    ToolCallItem,
    ToolOutputItem,
    TurnStarted,
)
from helikon.core.items import (
    ZERO_USAGE,
    CompactionSummary,
    FinalOutput,
    Reasoning,
    ToolCall,
    ToolResult,
    UserMessage,
)
from helikon.core.state import (
    ApprovalDecisions,
    CallModel,
    EffectResult,
    Handoff,
    ModelResponse,
    Start,
)
from helikon.core.table import TransitionTable
from helikon.export.trace_view import (
    ApprovalView,
    CompactionView,
    EffectView,
    Entry,
    ErrorView,
    GuardrailView,
    HandoffView,
    Message,
    ModelCall,
    Outcome,
    ReasoningText,
    RepairView,
    RunSection,
    Step,
    ToolCallView,
    ToolOutcome,
    TraceView,
    Turn,
    Via,
)
from helikon.trace import EffectTrace, RunTrace, Trace, TransitionTrace
from helikon.trace.times import gap


def extract_trace(trace: Trace, table: TransitionTable | None = None) -> TraceView:
    """Turn a trace read back (`read_trace`) into a `TraceView`.

    Args:
        trace: the trace.
        table: the chart the run used; it is used only if its digest matches the one the
            trace's header names. Without it, the chart the trace recorded is drawn.
    """
    resolved, note = resolve_table(trace, table)
    index = _Index(trace, resolved)
    root = index.section(trace.header.run_id, 0, "root", trace.header.agent)
    detached = tuple(
        index.section(run_id, 0, "detached", "")
        for run_id in index.lines
        if run_id not in index.built
    )
    return TraceView(trace.header, root, resolved, note, detached)


def resolve_table(
    trace: Trace, table: TransitionTable | None = None
) -> tuple[TransitionTable | None, str]:
    """The chart the trace's run used: `table` when its digest matches the header's, else
    the chart the trace recorded (rebuilt from data: nothing is imported).

    Returns:
        (the table, "") or (the table, a sentence saying why `table` was not used).
    """
    header = trace.header
    if table is not None and table.digest == header.chart_digest:
        return table, ""
    recorded = trace.table()
    if table is None:
        return recorded, ""
    return recorded, (
        f"The run used chart {header.chart} ({header.chart_digest[:12]}); the table given, "
        f"{table.name} ({table.digest[:12]}), is another chart, so the trace's own record "
        "of its chart is drawn."
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


def error_view(error: AgentError) -> ErrorView:
    return ErrorView(type(error).__name__, describe(error))


def effect_view(state: Any, result: EffectResult, took: float | None = None) -> EffectView:
    """The effect `state` (an effect phase) ran, with the result it fed back, and how long it
    ran (`took`, seconds) when the trace says."""
    arguments = _json_text(getattr(state, "args", None))
    output = _json_text(result.output)
    return EffectView(state.phase, result.effect, arguments, output, pretty_json(output), took)


def _json_text(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False, sort_keys=True)


# ---------------------------------------------------------------- extraction


class _Index:
    """What one pass over the lines learns (results, decisions and denials by call), and
    the builder of each run's section from it."""

    def __init__(self, trace: Trace, table: TransitionTable | None) -> None:
        self.table = table
        self.lines: dict[str, list[TransitionTrace | EffectTrace]] = {}
        self.results: dict[tuple[str, str], ToolResult] = {}
        self.took: dict[tuple[str, str], float] = {}  # each timed call's seconds
        self.decisions: dict[tuple[str, str], ApprovalDecision] = {}
        self.denials: dict[tuple[str, str], str] = {}
        self.requested: set[tuple[str, str]] = set()
        self.agents: dict[str, str] = {}
        self.built: set[str] = set()
        for line in trace.lines:
            if isinstance(line, RunTrace):  # a nested run opens: its agent's name
                self.agents[line.run_id] = line.agent
                continue
            self.lines.setdefault(line.run_id, []).append(line)
            if isinstance(line, TransitionTrace):
                self._learn(line)

    def _learn(self, line: TransitionTrace) -> None:
        run = line.run_id
        if line.time is not None:
            for call in line.time.calls:
                self.took.setdefault((run, call.call_id), call.took)
        if isinstance(line.input, ApprovalDecisions):
            for decision in line.input.decisions:
                self.decisions.setdefault((run, decision.call_id), decision)
        for event in line.events:
            if isinstance(event, ToolOutputItem):
                self.results.setdefault((run, event.item.call_id), event.item)
            elif isinstance(event, PermissionDenied):
                self.denials.setdefault((run, event.call_id), event.reason or "denied")
            elif isinstance(event, ApprovalRequested):
                self.requested.add((run, event.call_id))

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

    def tool_call(self, run_id: str, call: ToolCall, depth: int, seq: int = 0) -> ToolCallView:
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
            self.child(self.tool_run(run_id, call.call_id, seq), depth + 1, "tool", call.name),
            self.took.get((run_id, call.call_id)),
        )

    def tool_run(self, run_id: str, call_id: str, seq: int) -> str:
        """The run of an agent called as a tool: `<run>/<seq>:<call_id>`, the seq being the
        step that ran the batch (at or after the step that asked for the call)."""
        prefix, suffix = f"{run_id}/", f":{call_id}"
        found: list[tuple[int, str]] = []
        for candidate in self.lines:
            if candidate.startswith(prefix) and candidate.endswith(suffix):
                step = candidate[len(prefix) : -len(suffix)]
                if step.isdigit() and int(step) >= seq:
                    found.append((int(step), candidate))
        return min(found)[1] if found else f"{run_id}/{call_id}"

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
        time = line.time
        took = None if time is None else time.took
        paused = None
        if time is not None and time.resumed and self.steps:  # the pause before a resumption
            paused = gap(self.steps[-1].at, time.at)
        step = Step(
            line.seq,
            row.index,
            row.source,
            row.input_kind,
            row.target,
            row.action,
            row.checked,
            None if time is None else time.at,
            took,
            None if time is None else time.resumed,
            paused,
        )
        self.steps.append(step)
        self.turn.steps.append(step)
        self.usage = line.state_after.usage
        self.take_input(line.input, took)
        if isinstance(line.input, EffectResult):
            self.turn.entries.append(effect_view(line.state_before, line.input, took))
        for item in line.appends:
            if isinstance(item, CompactionSummary):
                self.turn.entries.append(CompactionView(item.content))
        for event in line.events:
            self.event(event)
        if isinstance(line.next_action, CallModel):
            self.purpose = line.next_action.request.purpose

    def take_input(self, inp: Any, took: float | None = None) -> None:
        if isinstance(inp, Start):
            self.input += [item.content for item in inp.items if isinstance(item, UserMessage)]
        elif isinstance(inp, ModelResponse):
            call = ModelCall(self.purpose, inp.usage, inp.finish_reason, self.streamed, took)
            self.turn.entries.append(call)
            reasoning = [item.content for item in inp.items if isinstance(item, Reasoning)]
            self.turn.entries += [ReasoningText(text) for text in reasoning]
        self.streamed = False

    def event(self, event: Any) -> None:  # noqa: C901  (one branch per event kind)
        entries = self.turn.entries
        if isinstance(event, DELTAS):
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
                seq = self.line.seq if self.line is not None else 0
                entries.append(self.index.tool_call(self.run_id, event.item, self.depth, seq))
        elif isinstance(event, HandoffItem):
            entries.append(self.handoff(event))
        elif isinstance(event, ApprovalRequested):
            # Shown on its call; a request for a call the stream never showed stands alone.
            if event.call_id not in self.calls:
                entries.append(self.index.approval(self.run_id, event.request.call))
        elif isinstance(event, GuardrailTriggered):
            entries.append(GuardrailView(event.guardrail, event.kind, event.info))
        elif isinstance(event, RepairStarted):
            entries.append(RepairView(event.attempt, event.errors))
        elif isinstance(event, StructuredOutputFailed):
            message = "; ".join(event.schema_errors)
            entries.append(ErrorView("StructuredOutputFailed", message, event.final_text))
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
