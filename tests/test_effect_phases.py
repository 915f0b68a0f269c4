"""Effect phases over the pure `transition`: the chart's effect is asked for as an action and
its JSON result comes back as an input; the table, its checks and its digest hold them."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from helikon import (
    AGENT_LOOP,
    DEFAULT_TABLE,
    CallingModel,
    Cancelled,
    ChartDefinitionError,
    Failed,
    RunFailed,
    Start,
    SystemMessage,
    TransitionCtx,
    TurnStarted,
    UserMessage,
    compile_chart,
    extend,
    initial_state,
    to,
    transition,
)
from helikon.core import (
    CallModel,
    Cancel,
    EffectFailed,
    EffectPhase,
    EffectResult,
    Fail,
    ModelRequest,
    RunEffect,
    next_action_of,
)
from helikon.core.chart.actions import ACTIONS
from helikon.core.chart.compile import build_table
from helikon.core.chart.guards import GUARDS
from helikon.core.codec import dumps, loads
from helikon.core.state import LoopState, NextAction, TransitionInput


def retrieving_chart(name: str = "Retrieving") -> Any:
    return (
        extend(AGENT_LOOP, "Lookup")
        .phase(name, effect="lookup")
        .retarget("CallingModel", "start", "start_turn -> CallingModel", to=name, on="enter_effect")
        .rows(name, "effect_result", to("CallingModel", on="keep_effect_result"))
        .build()
    )


TABLE = compile_chart(retrieving_chart())
CTX = TransitionCtx(table=TABLE)
ASKED = Start((UserMessage("old"), UserMessage("Which laptop?")))


def test_start_runs_the_effect_on_the_users_message() -> None:
    outcome = transition(initial_state(CTX), ASKED, CTX)
    args = {"text": "Which laptop?"}
    assert outcome.next_state == EffectPhase("Retrieving", "lookup", args, 0)
    assert outcome.next_action == RunEffect("lookup", args)
    assert outcome.events == ()  # not a turn
    assert outcome.conversation_appends == ASKED.items
    assert next_action_of(outcome.next_state, CTX) == outcome.next_action


def test_the_effects_result_reaches_the_model_and_opens_turn_0() -> None:
    state = transition(initial_state(CTX), ASKED, CTX).next_state
    output = {"passages": [{"text": "IT-7", "n": 3}], "more": None}
    outcome = transition(state, EffectResult("lookup", output), CTX)
    assert outcome.next_state == CallingModel(0)
    assert outcome.events == (TurnStarted(0),)
    assert outcome.next_action == CallModel(ModelRequest("turn"))
    assert outcome.conversation_appends == (
        SystemMessage('Result of lookup: {"more": null, "passages": [{"n": 3, "text": "IT-7"}]}'),
    )


def test_a_failed_or_cancelled_effect_fails_the_run() -> None:
    state = transition(initial_state(CTX), ASKED, CTX).next_state
    error = EffectFailed("lookup", "raised OSError: down")
    failed = transition(state, Fail(error), CTX)
    assert failed.next_state == Failed(error)
    assert failed.events == (RunFailed(error),)
    cancelled = transition(state, Cancel("bye"), CTX)
    assert cancelled.next_state == Failed(Cancelled("bye"))


def test_an_effect_result_is_refused_where_no_effect_runs() -> None:
    (row,) = TABLE.rows_for("CallingModel", "effect_result")
    assert (row.action, row.implicit) == ("reject_input", True)
    outcome = transition(CallingModel(0), EffectResult("lookup", 1), CTX)
    assert outcome.next_state.phase == "Failed"
    assert outcome.next_state.error.kind == "unexpected_input"


def test_only_charts_with_effects_have_effect_result_rows_so_no_digest_moved() -> None:
    assert not [row for row in DEFAULT_TABLE.rows if row.input_kind == "effect_result"]
    assert "effect_result" not in DEFAULT_TABLE.dispatch["CallingModel"]
    assert TABLE.effects == {"Retrieving": "lookup"}
    assert TABLE.as_data()["effects"] == {"Retrieving": "lookup"}
    assert "effects" not in DEFAULT_TABLE.as_data()
    # The effect a phase runs is part of the chart: another effect, another digest.
    other = replace(retrieving_chart(), effects={"Retrieving": "search"})
    assert compile_chart(other).digest != TABLE.digest
    assert TABLE.data().digest == TABLE.digest
    assert TABLE.data().table().effects == TABLE.effects


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        (EffectPhase("Retrieving", "lookup", {"text": "x", "k": [1, 2.5, None]}, 2), LoopState),
        (EffectResult("lookup", [{"a": True}, "b"]), TransitionInput),
        (RunEffect("lookup", {"text": "x"}), NextAction),
    ],
)
def test_effect_values_round_trip_through_json(value: Any, kind: Any) -> None:
    assert loads(kind, dumps(value, kind)) == value


def test_an_effect_phase_state_needs_its_effect_to_be_read_back() -> None:
    custom = loads(LoopState, '{"phase": "Planning", "turn": 0}')
    assert type(custom).__name__ == "CustomPhase"
    effect = loads(LoopState, '{"phase": "R", "effect": "lookup", "args": null, "turn": 0}')
    assert isinstance(effect, EffectPhase)


def test_the_chart_checks_its_effect_phases() -> None:
    effects = {"Retrieving": "not a name", "CallingModel": "x", "Nowhere": "y"}
    chart = replace(retrieving_chart(), effects=effects, prompts={"Retrieving": "Think."})
    with pytest.raises(ChartDefinitionError) as raised:
        compile_chart(chart)
    problems = str(raised.value).splitlines()[1:]
    assert "  - state Retrieving: the effect's name 'not a name' must be an identifier" in problems
    assert "  - state Retrieving: an effect phase calls no model: it takes no prompt" in problems
    assert "  - state CallingModel: only a custom, non-final phase can run an effect" in problems
    assert "  - state Nowhere: named in effects, but the chart has no such state" in problems


def test_effect_result_rows_belong_to_effect_phases() -> None:
    row = to("Done", on="complete")
    chart = extend(AGENT_LOOP, "X").rows("CallingModel", "effect_result", row).build()
    with pytest.raises(ChartDefinitionError, match="only an effect phase gets effect results"):
        compile_chart(chart)


def test_an_effect_phase_without_a_result_row_is_refused() -> None:
    chart = (
        extend(AGENT_LOOP, "X")
        .phase("Retrieving", effect="lookup")
        .retarget("CallingModel", "start", "start_turn -> CallingModel", to="Retrieving")
        .build()
    )
    with pytest.raises(ChartDefinitionError, match="input effect_result: no row handles"):
        compile_chart(chart)


def test_entering_a_phase_that_runs_no_effect_is_refused_and_fails_closed() -> None:
    chart = (
        extend(AGENT_LOOP, "X")
        .phase("Retrieving", effect="lookup")
        .phase("Oops")
        .retarget(
            "CallingModel", "start", "start_turn -> CallingModel", to="Oops", on="enter_effect"
        )
        .rows("Oops", "model_response", to("Retrieving", on="enter_effect"))
        .rows("Retrieving", "effect_result", to("CallingModel", on="keep_effect_result"))
        .build()
    )
    with pytest.raises(ChartDefinitionError) as refused:
        compile_chart(chart)
    assert (
        "state CallingModel, input start: row #4 goes to Oops, but its action enter_effect "
        "builds the state of an effect phase"
    ) in str(refused.value)
    # A table built without the check (as no chart compiles) still fails closed at run time.
    ctx = TransitionCtx(table=build_table(chart, GUARDS, ACTIONS))
    outcome = transition(initial_state(ctx), ASKED, ctx)
    assert outcome.next_state.phase == "Failed"
    assert outcome.next_state.error == EffectFailed(
        "Oops", "phase 'Oops' runs no effect: name one in effects"
    )
