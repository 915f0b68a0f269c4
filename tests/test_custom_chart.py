"""charts/plan_act.py: a custom chart, loaded by path, compiled and run through `transition`."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from helikon import (
    DEFAULT_TABLE,
    AssistantMessage,
    CallingModel,
    Cancelled,
    ChartDefinitionError,
    Failed,
    FinalOutput,
    MaxTurnsExceeded,
    MessageOutput,
    ModelResponse,
    RunCompleted,
    RunFailed,
    Start,
    ToolCall,
    ToolCallItem,
    ToolOutputItem,
    ToolResult,
    ToolResults,
    TransitionCtx,
    TransitionOutcome,
    TurnStarted,
    Usage,
    UserMessage,
    compile_chart,
    initial_state,
    transition,
)
from helikon.core import (
    CallModel,
    Cancel,
    CustomPhase,
    Done,
    EmptyModelResponse,
    ExecuteTools,
    ExecutingTools,
    ModelRequest,
    next_action_of,
)
from helikon.core.chart.actions import ACTIONS

CHART_FILE = Path(__file__).resolve().parents[1] / "charts" / "plan_act.py"


def load_by_path(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"_helikon_chart_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


plan_act = load_by_path(CHART_FILE)
TABLE = plan_act.PLAN_ACT_TABLE
PROMPT = plan_act.PlanActChart.prompts["Planning"]


def usage(tokens: int) -> Usage:
    return Usage(tokens, 0, tokens, 1)


def run(ctx: TransitionCtx, *inputs: Any) -> list[TransitionOutcome]:
    """Feed `inputs` to the chart from its initial state; the outcome of each step."""
    state = initial_state(ctx)
    outcomes = []
    for inp in inputs:
        outcome = transition(state, inp, ctx)
        outcomes.append(outcome)
        state = outcome.next_state
    return outcomes


def test_the_chart_carries_its_actions() -> None:
    assert TABLE.name == "PlanActChart"
    assert TABLE.initial == "Planning"
    chart = plan_act.PlanActChart
    assert set(chart.actions) == {"start_planning", "record_plan"}
    assert chart.guards == {}
    assert TABLE.prompts == {"Planning": PROMPT}
    # The chart's own action names run helikon's custom-phase actions.
    assert chart.actions["start_planning"] is ACTIONS["enter_phase"]
    assert chart.actions["record_plan"] is ACTIONS["keep_reply"]
    assert compile_chart(chart).digest == TABLE.digest
    # An action passed to compile_chart overrides the chart's own: a default one is checked
    # against its rows (complete builds Done, the row goes to CallingModel), a function of
    # the chart's own, whose state helikon cannot know, is not.
    with pytest.raises(ChartDefinitionError, match="its action record_plan builds the state"):
        compile_chart(chart, actions={"record_plan": ACTIONS["complete"]})

    def finish(state: Any, inp: Any, ctx: Any, target: str) -> Any:
        return ACTIONS["complete"](state, inp, ctx, target)

    overridden = compile_chart(chart, actions={"record_plan": finish})
    _, planned = run(
        TransitionCtx(table=overridden), Start(), ModelResponse((AssistantMessage("a"),))
    )
    assert planned.next_state.phase == "Done"


def test_planning_is_the_custom_initial_phase() -> None:
    planning = TABLE.phase("Planning")
    assert (planning.custom, planning.final) == (True, False)
    assert [phase.name for phase in TABLE.phases if phase.custom] == ["Planning"]
    assert not TABLE.phase("CallingModel").custom
    assert [
        (str(row.input_kind), tuple(map(str, row.guards)), row.target, row.action)
        for row in TABLE.rows
        if row.source == "Planning" and not row.implicit
    ] == [
        ("start", ("budget_exhausted",), "Failed", "fail_budget"),
        ("start", ("input_guarded",), "CheckingInput", "start_planning"),
        ("start", (), "Planning", "start_planning"),
        ("model_response", ("empty",), "Failed", "fail_empty"),
        ("model_response", (), "CallingModel", "record_plan"),
        ("cancel", (), "Failed", "cancel_run"),
        ("fail", (), "Failed", "fail_run"),
    ]


def test_the_rest_of_the_loop_is_the_default_chart() -> None:
    def declared(table: Any) -> list[tuple[str, str, tuple[str, ...], str, str]]:
        return [
            (r.source, r.input_kind, tuple(map(str, r.guards)), r.target, r.action)
            for r in table.rows
            if not r.implicit
            and r.source != "Planning"
            and r.input_kind not in ("start", "guardrail_verdict")
        ]

    assert declared(TABLE) == declared(DEFAULT_TABLE)
    # The input guardrails' check is Planning's start held: it goes on to Planning.
    assert [
        (tuple(map(str, r.guards)), r.target, r.action)
        for r in TABLE.rows_for("CheckingInput", "guardrail_verdict")
    ] == [(("passed",), "Planning", "resume_input"), ((), "Failed", "fail_guardrail")]
    # CallingModel is no longer initial, so a start there is refused, not a new run.
    (row,) = TABLE.rows_for("CallingModel", "start")
    assert (row.action, row.implicit) == ("reject_input", True)


def test_a_full_run_plans_then_uses_a_tool_then_answers() -> None:
    ctx = TransitionCtx(agent="planner", tools={"lookup": "allow"}, table=TABLE)
    call = ToolCall("c1", "lookup", '{"q": "rates"}')
    plan = AssistantMessage("1. look up the rates\n2. answer")
    started, planned, asked, ran, answered = run(
        ctx,
        Start((UserMessage("What are the rates?"),)),
        ModelResponse((plan,), usage(10)),
        ModelResponse((call,), usage(20)),
        ToolResults((ToolResult("c1", "rates: 3%"),)),
        ModelResponse((AssistantMessage("They are 3%."),), usage(30)),
    )

    # Planning: turn 0 asks the model for a plan, with the chart's prompt and no tools.
    assert started.next_state == CustomPhase("Planning", 0, Usage())
    assert started.next_action == CallModel(ModelRequest("Planning", tools=False, prompt=PROMPT))
    assert started.events == (TurnStarted(0),)
    assert started.conversation_appends == (UserMessage("What are the rates?"),)
    assert next_action_of(started.next_state, ctx) == started.next_action

    # The plan is kept and turn 1 opens in CallingModel, with the ordinary turn request.
    assert planned.next_state == CallingModel(1, usage(10))
    assert planned.events == (MessageOutput(plan), TurnStarted(1))
    assert planned.conversation_appends == (plan,)
    assert planned.next_action == CallModel(ModelRequest("turn"))
    assert isinstance(planned.next_action, CallModel) and planned.next_action.request.tools

    # From here, the default loop.
    assert isinstance(asked.next_state, ExecutingTools)
    assert asked.next_state.calls == (call,)
    assert asked.next_action == ExecuteTools((call,))
    assert asked.events == (ToolCallItem(call),)

    assert ran.next_state == CallingModel(2, usage(10) + usage(20))
    assert ran.events == (ToolOutputItem(ToolResult("c1", "rates: 3%")), TurnStarted(2))

    total = usage(10) + usage(20) + usage(30)
    output = FinalOutput("They are 3%.", None, total)
    assert answered.next_state == Done(output)
    assert answered.events == (
        MessageOutput(AssistantMessage("They are 3%.")),
        RunCompleted.of(output),
    )
    assert [o.next_state.phase for o in (started, planned, asked, ran, answered)] == [
        "Planning",
        "CallingModel",
        "ExecutingTools",
        "CallingModel",
        "Done",
    ]


def test_the_plan_is_the_responses_text_only() -> None:
    ctx = TransitionCtx(table=TABLE)
    _, planned = run(
        ctx,
        Start(),
        ModelResponse(
            (
                AssistantMessage("1. think"),
                ToolCall("c9", "lookup", "{}"),
                AssistantMessage(" 2. act"),
            )
        ),
    )
    assert planned.conversation_appends == (AssistantMessage("1. think 2. act"),)
    assert planned.next_state.phase == "CallingModel"


def test_a_ctx_prompt_overrides_the_charts() -> None:
    ctx = TransitionCtx(table=TABLE, prompts={"Planning": "Plan in one line."})
    (started,) = run(ctx, Start())
    assert started.next_action == CallModel(
        ModelRequest("Planning", tools=False, prompt="Plan in one line.")
    )


def test_cancel_while_planning_fails_the_run() -> None:
    ctx = TransitionCtx(table=TABLE)
    _, cancelled = run(ctx, Start((UserMessage("hi"),)), Cancel("user left"))
    assert cancelled.next_state == Failed(Cancelled("user left"), Usage())
    assert cancelled.events == (RunFailed(Cancelled("user left")),)
    assert cancelled.conversation_appends == ()


def test_an_empty_plan_fails_the_run() -> None:
    ctx = TransitionCtx(table=TABLE)
    _, failed = run(
        ctx, Start((UserMessage("hi"),)), ModelResponse((AssistantMessage("  "),), usage(5))
    )
    assert failed.next_state == Failed(EmptyModelResponse("stop"), usage(5))
    assert failed.events == (RunFailed(EmptyModelResponse("stop")),)


def test_a_spent_budget_fails_before_planning() -> None:
    ctx = TransitionCtx(table=TABLE, token_budget=100)
    state = CustomPhase("Planning", 0, usage(100))
    outcome = transition(state, Start(), ctx)
    assert isinstance(outcome.next_state, Failed)
    assert outcome.next_state.error.kind == "budget_exceeded"


def test_the_planning_call_is_a_turn() -> None:
    """Every model call a custom phase makes counts against max_turns: before, the plan was
    free, so a chart could loop through a custom phase without ever reaching the limit."""
    ctx = TransitionCtx(table=TABLE, max_turns=3, tools={"lookup": "allow"})
    call = ToolCall("c1", "lookup", "{}")
    steps = (ModelResponse((call,)), ToolResults((ToolResult("c1", "ok"),)))
    *_, second = run(ctx, Start(), ModelResponse((AssistantMessage("plan"),)), *steps)
    # Three model calls allowed: the plan, then two in the tool loop.
    assert second.next_state == CallingModel(2, Usage())
    *_, limited = run(ctx, Start(), ModelResponse((AssistantMessage("plan"),)), *steps, *steps)
    assert isinstance(limited.next_state, Failed)
    assert limited.next_state.error.kind == "max_turns_exceeded"


def test_with_one_turn_the_plan_is_all_the_model_says() -> None:
    ctx = TransitionCtx(table=TABLE, max_turns=1)
    *_, planned = run(ctx, Start(), ModelResponse((AssistantMessage("plan"),), usage(7)))
    assert planned.next_state == Failed(MaxTurnsExceeded(1), usage(7))
    assert planned.events == (
        MessageOutput(AssistantMessage("plan")),
        RunFailed(MaxTurnsExceeded(1)),
    )
    assert planned.conversation_appends == (AssistantMessage("plan"),)
