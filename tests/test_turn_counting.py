"""What a turn is: every model call CallingModel or a custom phase makes counts against
`max_turns`, whichever row enters the phase (docs/semantics.md, "Turns")."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from charts.plan_act import PLAN_ACT_TABLE
from helikon import (
    AGENT_LOOP,
    DEFAULT_TABLE,
    Agent,
    AssistantMessage,
    CallingModel,
    MaxTurnsExceeded,
    ModelResponse,
    RunConfig,
    ScriptedModel,
    Start,
    ToolCall,
    ToolResult,
    ToolResults,
    TransitionCtx,
    TransitionOutcome,
    TurnStarted,
    UserMessage,
    compile_chart,
    extend,
    initial_state,
    to,
    transition,
)
from helikon.charttest import ChartTests, Subject, Witness
from helikon.core import (
    CallModel,
    Compacting,
    CustomPhase,
    EffectPhase,
    EffectResult,
    ExecuteTools,
    ExecutingTools,
)
from helikon.core.chart.guards import opening_turn, text_of
from helikon.core.table import GuardRef


def _approved(state: Any, inp: Any, ctx: Any) -> bool:
    """The reviewer's reply starts with APPROVED."""
    return text_of(inp.items).startswith("APPROVED")


# The chart of issue 19, point 10: a review phase that sends every answer back to
# CallingModel, without a tool call, until the reviewer approves it.
ReviewChart = (
    extend(AGENT_LOOP, "ReviewChart")
    .phase("Reviewing", prompt="Review the answer; reply APPROVED if it is right.")
    .retarget("CallingModel", "model_response", "complete", to="Reviewing", on="review")
    .rows(
        "Reviewing",
        "model_response",
        to("Done", cond="approved", on="complete"),
        to("CallingModel", on="revise"),
    )
    .guards(approved=_approved)
    .actions(review="enter_phase", revise="keep_reply")
    .build()
)
REVIEW_TABLE = compile_chart(ReviewChart)


@pytest.mark.parametrize("max_turns", [1, 2, 3, 4])
async def test_a_review_cycle_without_tool_calls_stops_after_max_turns_model_calls(
    max_turns: int,
) -> None:
    """Before, the cycle never reached the only row that checks the limit (ExecutingTools'):
    the reviewer's rejections ran until the script ran out (203 calls with max_turns=3)."""
    model = ScriptedModel(["an answer", "not yet"] * 20)
    agent = Agent("writer", model, chart=REVIEW_TABLE, config=RunConfig(max_turns=max_turns))
    events = [event async for event in agent.run("Write a haiku.")]
    assert events[-1].type == "run_failed"
    assert events[-1].error == MaxTurnsExceeded(max_turns)
    assert [event.type for event in events].count("run_failed") == 1
    assert len(model.requests) == max_turns
    assert [event.turn for event in events if event.type == "turn_started"] == list(
        range(max_turns)
    )


async def test_the_reviewers_approval_completes_within_the_limit() -> None:
    model = ScriptedModel(["draft", "not yet", "better", "APPROVED"])
    agent = Agent("writer", model, chart=REVIEW_TABLE, config=RunConfig(max_turns=4))
    result = await agent.run("Write a haiku.").collect()
    assert (result.final_output, len(model.requests)) == ("APPROVED", 4)


def _reply(text: str) -> ModelResponse:
    return ModelResponse((AssistantMessage(text),))


@pytest.mark.parametrize(
    ("replies", "phase", "turn"),
    [
        ((), "CallingModel", 0),
        (("an answer",), "Reviewing", 1),
        (("an answer", "no"), "CallingModel", 2),
        (("an answer", "no", "again"), "Failed", None),
    ],
)
def test_each_entry_into_a_turn_phase_opens_the_next_turn(
    replies: tuple[str, ...], phase: str, turn: int | None
) -> None:
    ctx = TransitionCtx(table=REVIEW_TABLE, max_turns=3)
    state = transition(initial_state(ctx), Start(), ctx).next_state
    for text in replies:
        state = transition(state, _reply(text), ctx).next_state
    assert (state.phase, getattr(state, "turn", None)) == (phase, turn)


def test_chart_tests_reach_the_review_charts_limit_checks_through_the_driver() -> None:
    """`helikon test` plans a path to each implicit turn-limit check, as to a declared row."""
    table = REVIEW_TABLE
    checks = {row.index for row in table.rows if row.implicit and row.guards}
    assert {(table.rows[i].source, table.rows[i].action) for i in checks} == {
        ("CallingModel", "fail_max_turns"),
        ("Reviewing", "fail_max_turns"),
    }
    approved = Witness(lambda d: d.with_text("APPROVED"), lambda d: d.with_text("not yet"))
    subject = Subject.of_table(table, name="review", witnesses={"approved": approved})
    coverage = ChartTests(subject).run_sync()
    assert coverage.gaps == ()
    assert checks <= set(coverage.rows_hit)
    assert {t.via for t in coverage.targets if t.target.row in checks} == {"driver"}


# ---------------------------------------------------------------- a property over any replies

TURN_PHASES = {"CallingModel", "Reviewing", "Planning"}
REPLIES = st.lists(st.sampled_from(["text", "tool", "APPROVED", ""]), min_size=1, max_size=8)


def run_replies(table: Any, max_turns: int, replies: list[str]) -> tuple[list[Any], int]:
    """A run over `transition` whose model answers `replies` in turn, round and round, and
    whose tools answer "ok": its outcomes and how many turn calls it made."""
    ctx = TransitionCtx(table=table, max_turns=max_turns, tools={"search": "allow"})
    state, inp = initial_state(ctx), Start((UserMessage("go"),))
    outcomes, turns = [], 0
    while state.phase not in ("Done", "Failed") and len(outcomes) < 200:
        outcome = transition(state, inp, ctx)
        outcomes.append(outcome)
        state, action = outcome.next_state, outcome.next_action
        if isinstance(action, ExecuteTools):
            inp = ToolResults(tuple(ToolResult(call.call_id, "ok") for call in action.calls))
        elif isinstance(action, CallModel):
            turns += state.phase in TURN_PHASES
            reply = replies[len(outcomes) % len(replies)]
            items = (ToolCall(f"c{len(outcomes)}", "search", "{}"),) if reply == "tool" else ()
            inp = ModelResponse(items or ((AssistantMessage(reply),) if reply else ()))
    return outcomes, turns


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(["review", "plan_act"]), st.integers(1, 6), REPLIES)
def test_no_run_makes_more_turns_than_max_turns(
    chart: str, max_turns: int, replies: list[str]
) -> None:
    """Whatever the model answers, a run ends; it makes at most max_turns turn calls, numbered
    0, 1, ... in its TurnStarted events, and exactly max_turns when it fails on the limit."""
    table = REVIEW_TABLE if chart == "review" else PLAN_ACT_TABLE
    outcomes, turns = run_replies(table, max_turns, replies)
    final = outcomes[-1].next_state
    assert final.phase in ("Done", "Failed")
    assert turns <= max_turns
    started = [e.turn for o in outcomes for e in o.events if isinstance(e, TurnStarted)]
    assert started == list(range(turns))
    if final.phase == "Failed" and final.error == MaxTurnsExceeded(max_turns):
        assert turns == max_turns


# ---------------------------------------------------------------- the pure core, by table

RETRIEVE = compile_chart(
    extend(AGENT_LOOP, "Retrieve")
    .phase("Retrieving", effect="retrieve")
    .retarget(
        "CallingModel", "start", "start_turn -> CallingModel", to="Retrieving", on="enter_effect"
    )
    .rows("Retrieving", "effect_result", to("CallingModel", on="keep_effect_result"))
    .build()
)


@pytest.mark.parametrize(
    ("table", "state", "inp", "turn"),
    [
        (DEFAULT_TABLE, CallingModel(0), Start(), 0),
        (DEFAULT_TABLE, CallingModel(2), _reply("x"), 3),
        (DEFAULT_TABLE, ExecutingTools((), 2), ToolResults(()), 3),
        (DEFAULT_TABLE, Compacting(2), _reply("summary"), 3),
        (REVIEW_TABLE, CustomPhase("Reviewing", 1), _reply("no"), 2),
        (RETRIEVE, CallingModel(0), Start(), 0),
        (RETRIEVE, EffectPhase("Retrieving", "retrieve", None, 2), EffectResult("retrieve", 1), 2),
    ],
)
def test_the_turn_a_row_opens(table: Any, state: Any, inp: Any, turn: int) -> None:
    assert opening_turn(state, inp, TransitionCtx(table=table)) == turn


@pytest.mark.parametrize(
    ("table", "checked"),
    [
        (DEFAULT_TABLE, set()),  # ExecutingTools checks; Compacting is entered only after it
        (RETRIEVE, set()),  # Retrieving is entered on start, before any turn
        (PLAN_ACT_TABLE, {"Planning model_response"}),  # the plan is turn 0
        (REVIEW_TABLE, {"CallingModel model_response", "Reviewing model_response"}),
    ],
)
def test_the_compiler_checks_the_limit_where_nothing_did(table: Any, checked: set[str]) -> None:
    limits = [row for row in table.rows if row.implicit and row.guards]
    assert {f"{row.source} {row.input_kind}" for row in limits} == checked
    for row in limits:
        assert (row.guards, row.target, row.action) == (
            (GuardRef("turn_limit_reached"),),
            "Failed",
            "fail_max_turns",
        )
        tried = table.rows_for(row.source, row.input_kind)
        after = tried[tried.index(row) + 1 :]
        assert after and after[0].target in ("CallingModel", "Reviewing", "Planning")


def _keep_quietly(state: Any, inp: Any, ctx: TransitionCtx, target: str) -> TransitionOutcome:
    """A custom action that forgets to count: it keeps the turn number it was given."""
    return TransitionOutcome(CallingModel(state.turn, state.usage), (), ctx.call_for(target), ())


def test_an_action_that_forgets_to_count_is_numbered_anyway() -> None:
    draft = extend(ReviewChart, "Forgetful").actions(revise=_keep_quietly)
    outcomes, turns = run_replies(compile_chart(draft.build()), 3, ["an answer", "no"])
    assert outcomes[-1].next_state.error == MaxTurnsExceeded(3)
    assert turns == 3
