"""The debugger over recorded and live runs: replay, rewind, fork, breakpoints, inspection.

Every recording here is a real scripted run written by `TraceWriter` with a fixed run id:
tools (charts/budget_assistant.py), a handoff (charts/triage.py), an in-process approval and
a suspended approval (charts/approval_gated.py), and a structured-output repair. Tools and
approval handlers are instrumented, so a replay that ran any of them, or called a model,
fails.
"""

from __future__ import annotations

import dataclasses
import functools
import io
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from statemachine import State

from helikon import (
    Agent,
    AssistantMessage,
    OutputGuardrail,
    RunConfig,
    RunContext,
    ScriptedModel,
    ToolCall,
    ToolResult,
    compile_chart,
)
from helikon.cli.loading import load_module
from helikon.core.chart.dsl import LoopChart
from helikon.core.codec import dumps
from helikon.core.events import AgentEvent
from helikon.core.items import Item
from helikon.core.state import LoopState, ModelResponse, ToolResults, TransitionInput
from helikon.debug import Debugger, DebuggerError
from helikon.debug.debugger import Step
from helikon.tools.tool import Tool
from helikon.trace import Trace, TraceWriter, read_trace

CHARTS = Path(__file__).resolve().parents[1] / "charts"
BUDGET = load_module(str(CHARTS / "budget_assistant.py"))
TRIAGE = load_module(str(CHARTS / "triage.py"))
PAYMENTS = load_module(str(CHARTS / "approval_gated.py"))
PLAN_ACT = load_module(str(CHARTS / "plan_act.py"))

EVENTS = tuple[AgentEvent, ...]
ITEMS = tuple[Item, ...]


# ---------------------------------------------------------------- recordings


def counted(original: Tool, effects: list[str]) -> Tool:
    """`original` with the same name, schema and approval rule, noting each call it runs."""
    inner = original.fn

    @functools.wraps(inner)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        effects.append(f"tool {original.name}")
        return inner(*args, **kwargs)

    return Tool(
        wrapper,
        name=original.name,
        read_only=original.read_only,
        needs_approval=original.needs_approval,
    )


@dataclass
class Case:
    """One recorded run: its trace text, and how to build its agent on any model.

    `effects` collects every tool call and approval-handler call the instrumented agents
    make; it is emptied once the recording is written.
    """

    name: str
    build: Callable[[Any], Agent]
    input: str
    turns: list[Any]
    deps: Callable[[], Any] = lambda: None
    effects: list[str] = field(default_factory=list)
    text: str = ""

    @property
    def run_id(self) -> str:
        return f"run-{self.name}"

    @property
    def trace(self) -> Trace:
        return read_trace(self.text.splitlines())

    def context(self) -> RunContext[Any]:
        return RunContext(self.deps())

    async def record(self) -> Case:
        buffer = io.StringIO()
        agent = self.build(ScriptedModel(list(self.turns)))
        with TraceWriter(buffer) as writer:
            run = agent.run(self.input, context=self.context(), run_id=self.run_id, trace=writer)
            async for _ in run:
                pass
        self.text = buffer.getvalue()
        self.effects.clear()
        return self

    def replay(self, model: ScriptedModel, trace: Trace | None = None) -> Debugger:
        return Debugger.replay(trace or self.trace, self.build(model), context=self.context())


def budget_case() -> Case:
    case = Case("tools", lambda model: model, BUDGET.EXAMPLE_INPUT, list(BUDGET.script()))
    tools = [counted(BUDGET.spending, case.effects), counted(BUDGET.budget, case.effects)]
    case.build = lambda model: dataclasses.replace(BUDGET.agent(model), tools=tools)
    case.deps = BUDGET.deps
    return case


def triage_case() -> Case:
    case = Case("handoff", lambda model: model, TRIAGE.EXAMPLE_INPUT, list(TRIAGE.script()))

    def build(model: Any) -> Agent:
        billing, tech = TRIAGE.specialists(model)
        billing = dataclasses.replace(billing, tools=[counted(TRIAGE.invoice, case.effects)])
        return dataclasses.replace(TRIAGE.agent(model), handoffs=[billing, tech])

    case.build = build
    return case


def payments_case(*, in_process: bool) -> Case:
    name = "approval" if in_process else "suspended"
    case = Case(name, lambda model: model, PAYMENTS.EXAMPLE_INPUT, list(PAYMENTS.script()))
    tools = [counted(PAYMENTS.balance, case.effects), counted(PAYMENTS.transfer, case.effects)]

    def approve(request: Any, context: RunContext[Any]) -> bool:
        case.effects.append(f"approval {request.call.name}")
        return True

    def build(model: Any) -> Agent:
        agent = dataclasses.replace(PAYMENTS.agent(model), tools=tools)
        return dataclasses.replace(agent, on_approval=approve) if in_process else agent

    case.build = build
    return case


class Verdict(BaseModel):
    label: str
    score: int


def repair_case() -> Case:
    turns = ['{"label": "fine"}', '{"label": "fine", "score": 3}']

    def build(model: Any) -> Agent:
        return Agent("grader", model, instructions="Grade the text.", output_type=Verdict)

    return Case("repair", build, "Grade: the cat sat on the mat.", turns)


CASES: dict[str, Callable[[], Case]] = {
    "tools": budget_case,
    "handoff": triage_case,
    "approval": lambda: payments_case(in_process=True),
    "suspended": lambda: payments_case(in_process=False),
    "repair": repair_case,
}


async def recorded(name: str) -> Case:
    return await CASES[name]().record()


# ---------------------------------------------------------------- comparing


def compact(data: Any) -> str:
    """Recorded JSON re-serialized the way `helikon.core.codec.dumps` writes it."""
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False)


def raw_transitions(text: str, run_id: str) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in text.splitlines()]
    return [line for line in lines if line["kind"] == "transition" and line["run_id"] == run_id]


def step_json(step: Step) -> tuple[Any, ...]:
    """Everything a step holds, as codec JSON, so two steps compare byte for byte."""
    return (
        step.seq,
        dumps(step.state_before, LoopState),
        dumps(step.input, TransitionInput),
        step.match.row.index,
        step.match.checked,
        dumps(step.state_after, LoopState),
        dumps(step.outcome.events, EVENTS),
        dumps(step.outcome.conversation_appends, ITEMS),
        dumps(step.effect_events, EVENTS),
        step.divergence,
    )


def transition_json(step: Step) -> tuple[Any, ...]:
    """The transition part of `step_json`: all but the effect's events and divergence."""
    return step_json(step)[:8]


def history_json(debugger: Debugger) -> list[tuple[Any, ...]]:
    return [step_json(step) for step in debugger.history]


async def run_out(debugger: Debugger) -> None:
    while await debugger.step() is not None:
        pass


# ---------------------------------------------------------------- replay

ALL = list(CASES)


@pytest.mark.parametrize("name", ALL)
async def test_replay_reproduces_every_recorded_transition_byte_for_byte(name: str) -> None:
    case = await recorded(name)
    model = ScriptedModel([])
    debugger = case.replay(model)

    await run_out(debugger)

    recorded_lines = raw_transitions(case.text, case.run_id)
    assert len(debugger.history) == len(recorded_lines) > 0
    for step, line in zip(debugger.history, recorded_lines, strict=True):
        assert step.seq == line["seq"]
        assert dumps(step.state_before, LoopState) == compact(line["state_before"])
        assert dumps(step.input, TransitionInput) == compact(line["input"])
        assert dumps(step.state_after, LoopState) == compact(line["state_after"])
        assert dumps(step.outcome.events, EVENTS) == compact(line["events"])
        assert dumps(step.outcome.conversation_appends, ITEMS) == compact(line["appends"])
        assert step.match.row.index == line["row"]["index"]
        assert [list(pair) for pair in step.match.checked] == line["row"]["checked"]
        assert step.divergence is None
    assert debugger.finished
    assert model.requests == []
    assert case.effects == []


@pytest.mark.parametrize("name", ALL)
async def test_replay_streams_the_recorded_events_in_order(name: str) -> None:
    case = await recorded(name)
    debugger = case.replay(ScriptedModel([]))

    await run_out(debugger)

    replayed = [dumps(event, AgentEvent) for step in debugger.history for event in step.events]
    stream = case.trace.events()
    assert stream[0].type == "run_started"
    assert replayed == [dumps(event, AgentEvent) for event in stream[1:]]
    appends = [item for step in debugger.history for item in step.outcome.conversation_appends]
    assert dumps(debugger.conversation, ITEMS) == dumps(tuple(appends), ITEMS)


@pytest.mark.parametrize(
    "name",
    ALL,
)
async def test_save_trace_of_a_replay_is_the_recorded_file(name: str) -> None:
    case = await recorded(name)
    debugger = case.replay(ScriptedModel([]))
    await run_out(debugger)

    saved = io.StringIO()
    debugger.save_trace(saved)

    assert saved.getvalue() == case.text


async def test_replay_refuses_an_agent_on_another_chart() -> None:
    case = await recorded("tools")

    with pytest.raises(DebuggerError, match="chart"):
        Debugger.replay(case.trace, PLAN_ACT.agent(ScriptedModel([])))
    planned = dataclasses.replace(case.build(ScriptedModel([])), chart=PLAN_ACT.PLAN_ACT_TABLE)
    with pytest.raises(DebuggerError, match="chart"):
        Debugger.replay(case.trace, planned)
    renamed = dataclasses.replace(case.build(ScriptedModel([])), name="someone-else")
    with pytest.raises(DebuggerError, match="budget-assistant"):
        Debugger.replay(case.trace, renamed)


async def test_replay_refuses_a_trace_without_transitions() -> None:
    case = await recorded("tools")
    header_only = read_trace(case.text.splitlines()[:1])

    with pytest.raises(DebuggerError, match="no transition"):
        case.replay(ScriptedModel([]), header_only)


def tamper(text: str, run_id: str, seq: int, edit: Callable[[dict[str, Any]], None]) -> str:
    lines = []
    for line in text.splitlines():
        data = json.loads(line)
        if data["kind"] == "transition" and data["run_id"] == run_id and data["seq"] == seq:
            edit(data)
            line = compact(data)
        lines.append(line)
    return "\n".join(lines) + "\n"


def more_input_tokens(line: dict[str, Any]) -> None:
    line["state_after"]["usage"]["input_tokens"] += 1000


def another_turn_number(line: dict[str, Any]) -> None:
    started = [event for event in line["events"] if event["type"] == "turn_started"]
    started[0]["turn"] = 7


@pytest.mark.parametrize(
    ("edit", "seq", "what"),
    [(more_input_tokens, 2, "state"), (another_turn_number, 3, "events")],
)
async def test_a_tampered_line_is_reported_as_a_divergence(
    edit: Callable[[dict[str, Any]], None], seq: int, what: str
) -> None:
    case = await recorded("tools")
    tampered = read_trace(tamper(case.text, case.run_id, seq, edit).splitlines())
    debugger = case.replay(ScriptedModel([]), tampered)

    stop = await debugger.continue_()

    assert stop.reason == "diverged"
    assert stop.step is not None and stop.step.seq == seq
    assert stop.step.divergence is not None and what in stop.step.divergence
    assert [step.divergence is None for step in debugger.history] == [True] * (seq - 1) + [False]
    # The replay goes on from its own states: later steps match the (untampered) recording.
    assert (await debugger.continue_()).reason == "end"


async def test_a_replayed_suspension_stops_as_the_live_run_did() -> None:
    case = await recorded("suspended")
    live = Debugger.live(case.build(ScriptedModel(list(case.turns))), case.input)
    assert (await live.continue_()).reason == "suspended"

    replay = case.replay(ScriptedModel([]))

    assert (await replay.continue_()).reason == "suspended"


# ---------------------------------------------------------------- rewind


@pytest.mark.parametrize("name", ALL)
async def test_rewind_then_step_again_in_replay_gives_the_same_states(name: str) -> None:
    case = await recorded(name)
    model = ScriptedModel([])
    debugger = case.replay(model)
    conversations = [dumps(debugger.conversation, ITEMS)]
    while await debugger.step() is not None:
        conversations.append(dumps(debugger.conversation, ITEMS))
    first = history_json(debugger)

    for k in reversed(range(len(first) + 1)):
        frame = debugger.rewind(k)
        assert debugger.position == k == len(debugger.history)
        assert history_json(debugger) == first[:k]
        assert dumps(debugger.state, LoopState) == dumps(frame.state, LoopState)
        expected = first[k - 1][5] if k else first[0][1]
        assert dumps(debugger.state, LoopState) == expected
        assert dumps(debugger.conversation, ITEMS) == conversations[k]
        assert (await debugger.continue_()).reason in {"end", "suspended"}
        assert history_json(debugger) == first
    assert model.requests == []
    assert case.effects == []


async def test_back_and_out_of_range_rewinds() -> None:
    case = await recorded("tools")
    debugger = case.replay(ScriptedModel([]))
    await debugger.continue_()

    assert debugger.back().seq == 3 and debugger.position == 3
    assert debugger.back(2).seq == 1 and debugger.position == 1
    assert debugger.back(10).seq == 0 and debugger.position == 0
    with pytest.raises(DebuggerError):
        debugger.rewind(1)  # the rewind discarded the history past step 0
    with pytest.raises(DebuggerError):
        debugger.rewind(-1)


def live_budget(case: Case, model: ScriptedModel, run_id: str = "live-1") -> Debugger:
    return Debugger.live(case.build(model), case.input, context=case.context(), run_id=run_id)


async def test_live_rewind_repeats_no_tool_side_effect_unless_asked() -> None:
    case = budget_case()
    model = ScriptedModel(list(case.turns))
    debugger = live_budget(case, model)

    await debugger.step()
    executing = await debugger.step()
    assert executing is not None and executing.state_after.phase == "ExecutingTools"
    assert case.effects == ["tool spending", "tool budget"]
    results = dumps(debugger.next_input, TransitionInput)

    debugger.rewind(1)
    again = await debugger.step()

    assert again is not None and step_json(again) == step_json(executing)
    assert case.effects == ["tool spending", "tool budget"]
    assert dumps(debugger.next_input, TransitionInput) == results

    debugger.rewind(1)
    await debugger.step(live=True)

    assert case.effects == ["tool spending", "tool budget"] * 2
    assert len(model.requests) == 1


@pytest.mark.parametrize("trips", [False, True])
async def test_a_replay_takes_the_output_guardrails_verdict_from_the_recording(
    trips: bool, tmp_path: Path
) -> None:
    """An output guardrail is an effect (it may call a model): a replay given the agent, and
    a step taken again after a rewind, take its recorded verdict and never run it again."""
    checks: list[str] = []

    def check(output: Any, context: Any) -> bool:
        checks.append(output.text)
        return trips

    def agent() -> Any:
        guard = OutputGuardrail("polite", check)
        return Agent("guarded", ScriptedModel(["Fine."]), output_guardrails=[guard])

    trace = tmp_path / "run.jsonl"
    events = [event async for event in agent().run("hi", trace=trace)]
    assert checks == ["Fine."]
    debugger = Debugger.replay(read_trace(trace), agent())
    await run_out(debugger)
    steps = list(debugger.history)
    assert [step.divergence for step in steps] == [None] * len(steps)
    assert steps[-1].state_after.phase == ("Failed" if trips else "Done")
    debugger.rewind(len(steps) - 1)
    again = await debugger.step()
    assert again is not None and step_json(again) == step_json(steps[-1])
    assert checks == ["Fine."]  # the replay and the step taken again ran it never
    assert events[-1].type == ("run_failed" if trips else "run_completed")


async def test_live_rewind_to_the_start_calls_neither_model_nor_tools_again() -> None:
    case = budget_case()
    model = ScriptedModel(list(case.turns))
    debugger = live_budget(case, model)
    assert (await debugger.continue_()).reason == "end"
    first, calls, effects = history_json(debugger), len(model.requests), list(case.effects)

    debugger.rewind(0)
    assert (await debugger.continue_()).reason == "end"

    assert [transition_json(step) for step in debugger.history] == [row[:8] for row in first]
    assert len(model.requests) == calls == 2
    assert case.effects == effects == ["tool spending", "tool budget"]


async def test_live_rewind_then_step_again_shows_the_same_events() -> None:
    case = budget_case()
    debugger = live_budget(case, ScriptedModel(list(case.turns)))
    await debugger.continue_()
    first = history_json(debugger)

    debugger.rewind(0)
    await debugger.continue_()

    assert history_json(debugger) == first


async def test_a_live_debugger_saves_the_trace_the_driver_writes() -> None:
    case = await recorded("tools")
    debugger = live_budget(case, ScriptedModel(list(case.turns)), run_id=case.run_id)
    await debugger.continue_()

    saved = io.StringIO()
    debugger.save_trace(saved)

    assert untimed(saved.getvalue()) == untimed(case.text)  # two runs: their own times


def untimed(text: str) -> list[dict[str, Any]]:
    """A trace's lines without their times (`at`, `time`)."""
    lines = [json.loads(line) for line in text.splitlines()]
    return [{k: v for k, v in line.items() if k not in ("at", "time")} for line in lines]


# ---------------------------------------------------------------- fork


def snapshot(debugger: Debugger) -> tuple[Any, ...]:
    return (
        debugger.run.run_id,
        debugger.position,
        dumps(debugger.state, LoopState),
        dumps(debugger.conversation, ITEMS),
        history_json(debugger),
        len(debugger.frames),
    )


async def test_a_fork_with_another_model_response_differs_only_after_k() -> None:
    case = await recorded("tools")
    model = ScriptedModel([])
    original = case.replay(model)
    await original.continue_()
    before = snapshot(original)
    answer = ModelResponse((AssistantMessage("No need to look anything up.", "budget-assistant"),))

    fork = original.fork(answer, at=1, turns=[])
    assert (await fork.continue_()).reason == "end"

    assert history_json(fork)[:1] == history_json(original)[:1]
    assert len(fork.history) == 2
    assert step_json(fork.history[1]) != step_json(original.history[1])
    assert fork.state.phase == "Done"
    assert fork.state.output.text == "No need to look anything up."
    assert snapshot(original) == before
    assert model.requests == [] and case.effects == []


async def test_a_fork_with_other_tool_results_continues_on_scripted_turns() -> None:
    case = await recorded("tools")
    original = case.replay(ScriptedModel([]))
    await original.continue_()
    before = snapshot(original)
    results = ToolResults((ToolResult("call_spent", "0 EUR"), ToolResult("call_budget", "30 EUR")))

    fork = original.fork(results, at=2, turns=["Nothing spent: 30 EUR left."])
    assert (await fork.continue_()).reason == "end"

    assert history_json(fork)[:2] == history_json(original)[:2]
    assert all(
        step_json(a) != step_json(b)
        for a, b in zip(fork.history[2:], original.history[2:], strict=True)
    )
    assert fork.history[2].input == results
    assert fork.state.output.text == "Nothing spent: 30 EUR left."
    assert len(fork.run.agent.model.requests) == 1
    assert case.effects == []
    assert snapshot(original) == before


async def test_a_forks_trace_is_a_new_valid_trace_that_replays() -> None:
    case = await recorded("tools")
    original = case.replay(ScriptedModel([]))
    await original.continue_()
    results = ToolResults((ToolResult("call_spent", "0 EUR"), ToolResult("call_budget", "30 EUR")))
    fork = original.fork(results, at=2, turns=["Nothing spent."])
    await fork.continue_()

    saved = io.StringIO()
    fork.save_trace(saved)
    trace = read_trace(saved.getvalue().splitlines())

    assert trace.header.run_id != case.run_id
    assert {line.run_id for line in trace.lines} == {trace.header.run_id}
    assert trace.header.chart_digest == case.trace.header.chart_digest
    replayed = case.replay(ScriptedModel([]), trace)
    assert (await replayed.continue_()).reason == "end"
    states = [dumps(step.state_after, LoopState) for step in replayed.history]
    assert states == [dumps(step.state_after, LoopState) for step in fork.history]


async def test_a_fork_of_a_live_run_continues_with_the_agents_model() -> None:
    case = budget_case()
    model = ScriptedModel([*case.turns, "A second opinion: cut down on coffee."])
    original = live_budget(case, model)
    await original.continue_()
    assert len(model.requests) == 2
    results = original.frames[2].next_input

    fork = original.fork(results, at=2)
    await fork.continue_()

    assert len(model.requests) == 3
    assert fork.state.output.text == "A second opinion: cut down on coffee."
    assert history_json(fork)[:2] == history_json(original)[:2]
    assert fork.run.run_id != original.run.run_id
    assert case.effects == ["tool spending", "tool budget"]


async def test_a_fork_at_a_step_not_taken_is_refused() -> None:
    case = await recorded("tools")
    debugger = case.replay(ScriptedModel([]))
    await debugger.step()

    with pytest.raises(DebuggerError):
        debugger.fork(ToolResults(()), at=2)
    with pytest.raises(DebuggerError):
        debugger.fork(ToolResults(()), at=-1)


# ---------------------------------------------------------------- breakpoints


@pytest.mark.parametrize(
    ("kind", "value", "seq"),
    [
        ("phase", "ExecutingTools", 2),
        ("phase", "Done", 4),
        ("event", "tool_output_item", 3),
        ("event", "run_completed", 4),
        ("tool", "budget", 2),
        ("guard", "has_tool_calls", 2),
        ("guard", "has_output_type", None),  # checked on step 4, but false: no stop
        ("tool", "transfer", None),
    ],
)
async def test_each_kind_of_breakpoint_stops_where_expected(
    kind: Any, value: str, seq: int | None
) -> None:
    case = await recorded("tools")
    debugger = case.replay(ScriptedModel([]))
    breakpoint = debugger.break_on(kind, value)

    stop = await debugger.continue_()

    if seq is None:
        assert stop.reason == "end" and stop.breakpoint is None
        return
    assert stop.reason == "breakpoint" and stop.breakpoint is breakpoint
    assert stop.step is debugger.last and stop.step.seq == seq == debugger.position


async def test_a_predicate_breakpoint_sees_the_state_and_the_next_input() -> None:
    case = await recorded("tools")
    debugger = case.replay(ScriptedModel([]))
    seen: list[tuple[str, str | None]] = []

    def tools_answered(state: Any, next_input: Any) -> bool:
        seen.append((state.phase, None if next_input is None else next_input.kind))
        return next_input is not None and next_input.kind == "tool_results"

    debugger.break_when(tools_answered)
    stop = await debugger.continue_()

    assert stop.reason == "breakpoint" and stop.step is not None and stop.step.seq == 2
    assert seen == [("CallingModel", "model_response"), ("ExecutingTools", "tool_results")]
    assert isinstance(debugger.next_input, ToolResults)
    assert (await debugger.continue_()).reason == "end"


async def test_breakpoints_keep_stopping_until_deleted() -> None:
    case = await recorded("tools")
    debugger = case.replay(ScriptedModel([]))
    turns = debugger.break_on("event", "turn_started")

    first = await debugger.continue_()
    second = await debugger.continue_()
    debugger.delete(turns.id)
    last = await debugger.continue_()

    assert [first.reason, second.reason, last.reason] == ["breakpoint", "breakpoint", "end"]
    assert [stop.step.seq for stop in (first, second, last) if stop.step] == [1, 3, 4]
    assert debugger.breakpoints == []
    with pytest.raises(DebuggerError, match=f"#{turns.id}"):
        debugger.delete(turns.id)


async def test_a_handoff_replay_stops_on_the_targets_events_and_tools() -> None:
    case = await recorded("handoff")
    debugger = case.replay(ScriptedModel([]))
    debugger.break_on("phase", "ApplyingHandoff")
    debugger.break_on("tool", "invoice")

    stop = await debugger.continue_()

    assert stop.reason == "breakpoint" and stop.step is not None and stop.step.seq == 2
    assert stop.breakpoint is not None and stop.breakpoint.kind == "phase"
    assert "agent_updated" in [event.type for event in stop.step.effect_events]
    assert case.effects == []


def test_breakpoints_on_unknown_phases_or_guards_are_refused() -> None:
    debugger = Debugger.live(budget_case().build(ScriptedModel([])), "hi")

    with pytest.raises(DebuggerError, match=r"no phase 'Sleeping'.*ExecutingTools"):
        debugger.break_on("phase", "Sleeping")
    with pytest.raises(DebuggerError, match=r"no guard 'is_tuesday'.*has_tool_calls"):
        debugger.break_on("guard", "is_tuesday")
    assert debugger.breakpoints == []


# ---------------------------------------------------------------- inspecting


async def test_peek_shows_the_row_and_guard_values_the_next_step_takes() -> None:
    case = await recorded("tools")
    debugger = case.replay(ScriptedModel([]))
    rows = [line.row for line in case.trace.transitions(case.run_id)]

    for row in rows:
        match = debugger.peek()
        assert match is not None
        step = await debugger.step()
        assert step is not None
        assert step.match == match
        assert (match.row.index, match.row.target, match.checked) == (
            row.index,
            row.target,
            row.checked,
        )
    assert debugger.peek() is None


async def test_a_steps_match_holds_every_guard_checked_with_its_value() -> None:
    case = await recorded("tools")
    debugger = case.replay(ScriptedModel([]))
    await debugger.continue_()

    checked = [step.match.checked for step in debugger.history]

    model_guards = (
        "truncated",
        "empty",
        "duplicate_call_ids",
        "has_handoff",
        "needs_approval",
        "has_tool_calls",
    )
    tool_guards = ("turn_limit_reached", "over_context_budget", "budget_exhausted")
    assert checked == [
        (
            ("budget_exhausted", False),
            ("input_guarded", False),  # the twins of the start rows: no input guardrails
            ("output_only", False),
            ("input_guarded", False),
        ),
        tuple((guard, guard == "has_tool_calls") for guard in model_guards),
        tuple((guard, False) for guard in tool_guards),
        tuple((guard, False) for guard in (*model_guards, "has_output_type", "output_guarded")),
    ]
    assert [step.match.row.target for step in debugger.history] == [
        "CallingModel",
        "ExecutingTools",
        "CallingModel",
        "Done",
    ]


async def test_next_turn_stops_at_each_turn_started() -> None:
    case = await recorded("tools")
    debugger = case.replay(ScriptedModel([]))

    stops = [await debugger.next_turn() for _ in range(3)]

    assert [stop.reason for stop in stops] == ["turn", "turn", "end"]
    turns = [
        [event.turn for event in stop.step.events if event.type == "turn_started"]
        for stop in stops[:2]
        if stop.step is not None
    ]
    assert turns == [[0], [1]]
    assert [stop.step.seq for stop in stops if stop.step] == [1, 3, 4]


async def test_a_replay_can_be_inspected_at_every_step() -> None:
    case = await recorded("approval")
    debugger = case.replay(ScriptedModel([]))
    debugger.break_on("phase", "NeedsApproval")

    stop = await debugger.continue_()

    assert stop.reason == "breakpoint" and stop.step is not None
    assert debugger.state.phase == "NeedsApproval"
    assert [request.call.name for request in debugger.state.pending] == ["transfer"]
    assert debugger.next_input.kind == "approval_decisions"
    calls = [item for item in debugger.conversation if isinstance(item, ToolCall)]
    assert [call.name for call in calls] == ["balance", "transfer"]
    assert debugger.frames[debugger.position].state == debugger.state
    assert case.effects == []


async def test_the_debugger_shows_what_a_redacting_run_says_and_its_saved_trace_hides_it(
    tmp_path: Path,
) -> None:
    config = RunConfig(redact=lambda text: text.replace("s3cret", "[hidden]"))
    agent = Agent("keeper", ScriptedModel(["the code is s3cret"]), config=config)
    debugger = Debugger.live(agent, "what is the code?")

    await debugger.continue_()

    assert debugger.conversation[-1].content == "the code is s3cret"  # in process: raw
    debugger.rewind(debugger.position)  # its log is the run's, not the trace's
    assert debugger.conversation[-1].content == "the code is s3cret"
    saved = tmp_path / "saved.jsonl"
    debugger.save_trace(saved)
    text = saved.read_text()
    assert "the code is [hidden]" in text and "s3cret" not in text


class _CountedChart(LoopChart):
    calling_model = State("CallingModel", initial=True)
    done = State("Done", final=True)
    failed = State("Failed", final=True)
    start = calling_model.to.itself(on="start_turn")
    model_response = calling_model.to(failed, cond="rude", on="fail_run") | calling_model.to(
        done, on="complete"
    )
    cancel = calling_model.to(failed, on="cancel_run")
    fail = calling_model.to(failed, on="fail_run")


async def test_a_debugger_step_evaluates_each_guard_once_and_shows_its_value() -> None:
    asked: list[str] = []

    def rude(state: Any, inp: Any, ctx: Any) -> bool:
        """The answer insults the user."""
        asked.append(inp.kind)
        return False

    chart = compile_chart(_CountedChart, guards={"rude": rude})
    agent = Agent("polite", ScriptedModel(["Fine, thanks."]), chart=chart)
    debugger = Debugger.live(agent, "how are you?")

    await debugger.continue_()

    assert asked == ["model_response"]  # once, by the step's own transition
    answered = next(s for s in debugger.history if s.input.kind == "model_response")
    assert answered.match.checked == (("rude", False),)
    assert answered.state_after.phase == "Done"
