"""Input guardrails checked as rows (`ChartSpec.checks_input`): the start rows' guarded twins,
CheckingInput and its verdict rows, in the pure core and through the driver, on the default
chart (which checks its input so) and on retrieve_answer, which starts with an effect.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import pytest
from driver_support import drain, ends_once, settle, types
from pydantic import TypeAdapter

from charts.retrieve_answer import RetrieveAnswerChart, retrieve
from helikon import (
    AGENT_LOOP,
    Agent,
    Cancelled,
    GuardrailResult,
    GuardrailTriggered,
    GuardrailTripped,
    InputGuardrail,
    RunContext,
    RunError,
    RunFailed,
    ScriptedModel,
    compile_chart,
)
from helikon.core.chart.compile import read_chart
from helikon.core.context import OutputSpec, TransitionCtx
from helikon.core.items import UserMessage
from helikon.core.state import (
    CallingModel,
    CallModel,
    CheckGuardrails,
    CheckingInput,
    Failed,
    Finalizing,
    GuardrailVerdict,
    LoopState,
    Start,
)
from helikon.core.transition import initial_state, next_action_of, transition
from helikon.run.chart_versions import DEFAULT_VERSIONS
from helikon.run.driver import Run
from helikon.run.lifecycle import Lifecycle

CHECKED = compile_chart(AGENT_LOOP)
OUTPUT_ROWS = "7e19d021c917228d124629ece46f5002ce4fe975faf780591aaf93901c17e289"
"""The default chart before it checked its input as rows (kept: helikon.run.chart_versions)."""
CHECKED_RETRIEVAL = compile_chart(replace(RetrieveAnswerChart, checks_input=True))
TRIPPED = GuardrailTripped("no-secrets", "input", "asks for a password")


def rows(table: Any, phase: str, kind: str) -> list[tuple[list[str], str, str]]:
    return [([str(g) for g in r.guards], r.target, r.action) for r in table.rows_for(phase, kind)]


# -- the rows --------------------------------------------------------------------------------


def test_each_start_row_that_goes_on_gets_a_guarded_twin_in_front_of_it() -> None:
    assert rows(CHECKED, "CallingModel", "start") == [
        (["budget_exhausted"], "Failed", "fail_budget"),
        (["input_guarded", "output_only"], "CheckingInput", "start_turn"),
        (["output_only"], "Finalizing", "start_turn"),
        (["input_guarded"], "CheckingInput", "start_turn"),
        ([], "CallingModel", "start_turn"),
    ]


def test_checking_inputs_verdict_goes_on_as_its_start_row_would_or_fails() -> None:
    assert rows(CHECKED, "CheckingInput", "guardrail_verdict") == [
        (["passed", "output_only"], "Finalizing", "resume_input"),
        (["passed"], "CallingModel", "resume_input"),
        ([], "Failed", "fail_guardrail"),
    ]
    assert [r.action for r in CHECKED.rows_for("CheckingInput", "cancel")] == ["cancel_run"]


def test_a_chart_that_starts_with_an_effect_checks_its_input_before_the_effect() -> None:
    assert rows(CHECKED_RETRIEVAL, "CheckingInput", "guardrail_verdict")[1] == (
        ["passed"],
        "Retrieving",
        "resume_input",
    )


def test_the_default_chart_checks_its_input_as_rows_and_without_them_is_its_last_version() -> None:
    spec = read_chart(AGENT_LOOP)
    assert spec.checks_input and compile_chart(AGENT_LOOP).digest == CHECKED.digest
    phases = tuple(phase for phase in spec.phases if phase.name != "CheckingInput")
    unchecked = compile_chart(replace(spec, checks_input=False, phases=phases))
    assert unchecked.digest == OUTPUT_ROWS
    assert "CheckingInput" not in unchecked.dispatch


# -- the pure core ---------------------------------------------------------------------------


def ctx(**kw: Any) -> TransitionCtx:
    return TransitionCtx(input_guardrails=("no-secrets",), table=CHECKED, **kw)


def started(context: TransitionCtx) -> Any:
    return transition(initial_state(context), Start((UserMessage("hi"),)), context)


def test_the_start_is_held_with_its_events_and_appends_while_the_guardrails_check_it() -> None:
    context = ctx()
    outcome = started(context)
    state = outcome.next_state

    assert isinstance(state, CheckingInput)
    assert state.held == CallingModel(0) and state.action == context.call_for("CallingModel")
    assert outcome.next_action == CheckGuardrails(None) == next_action_of(state, context)
    assert [e.type for e in outcome.events] == ["turn_started"]
    assert outcome.conversation_appends == (UserMessage("hi"),)


def test_passed_goes_on_in_the_state_held_with_the_action_held() -> None:
    context = ctx()
    checking = started(context).next_state

    outcome = transition(checking, GuardrailVerdict(), context)

    assert outcome.next_state == CallingModel(0)
    assert isinstance(outcome.next_action, CallModel)
    assert outcome.events == () and outcome.conversation_appends == ()


def test_passed_goes_where_the_start_row_went_an_output_only_run_to_finalizing() -> None:
    context = ctx(output=OutputSpec.of(int))
    checking = started(context).next_state

    assert isinstance(checking.held, Finalizing)
    assert transition(checking, GuardrailVerdict(), context).next_state == checking.held


def test_a_tripped_guardrail_fails_the_run_from_checking_input() -> None:
    context = ctx()
    checking = started(context).next_state

    outcome = transition(checking, GuardrailVerdict(TRIPPED), context)

    assert outcome.next_state == Failed(TRIPPED)
    assert [e.type for e in outcome.events] == ["guardrail_triggered", "run_failed"]


def test_an_agent_without_input_guardrails_starts_as_before() -> None:
    context = TransitionCtx(table=CHECKED)
    assert started(context).next_state == CallingModel(0)


def test_checking_input_round_trips_as_a_loop_state() -> None:
    checking = started(ctx()).next_state
    adapter: TypeAdapter[Any] = TypeAdapter(LoopState)
    assert adapter.validate_python(adapter.dump_python(checking, mode="json")) == checking


# -- through the driver ----------------------------------------------------------------------


def no_secrets(text: str, context: RunContext[Any]) -> GuardrailResult:
    return GuardrailResult("password" in text, "asks for a password")


@pytest.mark.parametrize(
    "chart", [DEFAULT_VERSIONS.table(OUTPUT_ROWS), CHECKED], ids=["loop-rule", "rows"]
)
async def test_a_tripwire_fails_the_run_alike_by_the_rule_and_by_the_rows(chart: Any) -> None:
    model = ScriptedModel(["never"])
    guardrail = InputGuardrail("no-secrets", no_secrets)
    agent = Agent("guarded", model, input_guardrails=[guardrail], chart=chart)
    streaming = agent.run("what is the admin password?")

    with pytest.raises(RunError) as raised:
        await streaming.collect()

    assert raised.value.error == TRIPPED
    assert model.requests == []
    triggered = [e for e in streaming.events if isinstance(e, GuardrailTriggered)]
    assert triggered == [GuardrailTriggered("no-secrets", "input", "asks for a password")]
    assert types(streaming.events) == [
        "run_started",
        "turn_started",
        "guardrail_triggered",
        "run_failed",
    ]


async def test_a_passing_check_runs_once_and_the_run_proceeds() -> None:
    seen: list[str] = []

    def fine(text: str, context: RunContext[Any]) -> bool:
        seen.append(text)
        return False

    model = ScriptedModel(["hello"])
    agent = Agent("guarded", model, input_guardrails=[InputGuardrail("fine", fine)], chart=CHECKED)

    result = await agent.run("hi").collect()

    assert result.final_output == "hello"
    assert seen == ["hi"]


async def test_the_check_runs_before_a_first_effect_on_a_chart_that_checks_its_input() -> None:
    model = ScriptedModel(["never"])
    agent = Agent(
        "guarded",
        model,
        input_guardrails=[InputGuardrail("no-secrets", no_secrets)],
        chart=CHECKED_RETRIEVAL,
        effects=[retrieve],
    )
    streaming = agent.run("what is the admin password?")

    with pytest.raises(RunError):
        await streaming.collect()

    assert "effect_started" not in types(streaming.events)
    assert model.requests == []


async def test_a_cancel_during_the_check_fails_the_run_from_checking_input() -> None:
    checking = asyncio.Event()

    async def slow(text: str, context: RunContext[Any]) -> bool:
        checking.set()
        await asyncio.Event().wait()
        return False

    model = ScriptedModel(["never"])
    agent = Agent("guarded", model, input_guardrails=[InputGuardrail("slow", slow)], chart=CHECKED)
    streaming = agent.run("hi")
    events_task = asyncio.create_task(drain(streaming))

    await checking.wait()
    streaming.cancel()
    await settle()
    events = await asyncio.wait_for(events_task, 5)

    assert ends_once(events, RunFailed).error == Cancelled("cancelled")
    assert model.requests == []


async def test_a_run_placed_after_the_check_before_its_first_model_call_does_not_check_again() -> (
    None
):
    """A run resumed between the check and its first model call (its lifecycle not yet
    RUNNING, as a stored run's is) calls the model without checking its input a second time:
    its chart checked it, as a row."""
    seen: list[str] = []

    def watch(text: str, context: RunContext[Any]) -> bool:
        seen.append(text)
        return False

    agent = Agent(
        "guarded", ScriptedModel(["hello"]), input_guardrails=[InputGuardrail("w", watch)]
    )
    run = Run(agent, input="hi")
    _ = [event async for event in run._begin()]
    await run.apply()  # the start, held
    _ = [event async for event in run.perform()]  # the check
    await run.apply()  # passed: CallingModel, its model call next
    assert run.state.phase == "CallingModel" and seen == ["hi"]
    run.position(lifecycle=Lifecycle.PREPARED)  # as a resume before the first model call
    assert "token_delta" in [event.type async for event in run.perform()]
    assert seen == ["hi"]
