"""`helikon.run.lifecycle`: a run's one lifecycle state, its moves, `Run.position`, and the
step value `Run.apply` returns."""

from __future__ import annotations

import json
from typing import Any

import pytest

from helikon import (
    Agent,
    GuardrailResult,
    InputGuardrail,
    RunContext,
    ScriptedModel,
    ToolCall,
    tool,
)
from helikon.core.state import ModelResponse
from helikon.run.driver import Run
from helikon.run.lifecycle import MOVES, Lifecycle, LifecycleError
from helikon.trace import TransitionRecord

L = Lifecycle

# state: (announced, prepared, guarded, suspended, closed)
FLAGS = {
    L.NEW: (False, False, False, False, False),
    L.STARTED: (True, False, False, False, False),
    L.PREPARED: (True, True, False, False, False),
    L.RESUMING: (True, True, False, False, False),
    L.RUNNING: (True, True, True, False, False),
    L.SUSPENDING: (True, True, True, True, False),
    L.SUSPENDED: (True, True, True, True, True),
    L.ENDED: (True, True, True, False, True),
}


@pytest.mark.parametrize("state", list(Lifecycle))
def test_each_flag_is_a_view_of_the_one_state(state: Lifecycle) -> None:
    flags = (state.announced, state.prepared, state.guarded, state.suspended, state.closed)
    assert flags == FLAGS[state]


def test_the_moves_never_take_back_a_flag_and_closed_states_make_none() -> None:
    assert set(MOVES) == set(Lifecycle)
    for at, targets in MOVES.items():
        for to in targets:
            lost = [i for i, (a, b) in enumerate(zip(FLAGS[at], FLAGS[to], strict=True)) if a > b]
            assert lost in ([], [3]) and (lost == [] or at.suspended), (at, to)
    assert MOVES[L.SUSPENDED] == MOVES[L.ENDED] == frozenset()


@pytest.mark.parametrize(
    ("state", "resumed"),
    [(L.SUSPENDING, L.RUNNING), (L.SUSPENDED, L.RUNNING), (L.PREPARED, L.PREPARED)],
)
def test_a_suspended_run_resumed_runs_and_others_stay(state: Lifecycle, resumed: Lifecycle) -> None:
    assert state.resumed is resumed


def echo_agent(*turns: Any, **kwargs: Any) -> Agent:
    return Agent("echo", ScriptedModel(list(turns)), **kwargs)


def test_a_move_the_table_lacks_is_refused_naming_both_states() -> None:
    run = Run(echo_agent("hi"), run_id="r1")

    with pytest.raises(LifecycleError) as raised:
        run._move(L.ENDED)

    assert str(raised.value) == (
        "run 'r1' is NEW and cannot become ENDED (from NEW it may become: PREPARED, STARTED)"
    )
    assert run.lifecycle is L.NEW


async def test_a_run_is_announced_prepared_guarded_and_ended_in_that_order() -> None:
    seen: list[Lifecycle] = []

    def watch(text: str, context: RunContext[Any]) -> GuardrailResult:
        seen.append(run.lifecycle)  # marked guarded as they start: they never run twice
        return GuardrailResult(False, "")

    run = Run(echo_agent("hello", input_guardrails=[InputGuardrail("watch", watch)]), input="hi")
    assert run.lifecycle is L.NEW
    announced = [event.type async for event in run._begin()]
    assert announced == ["run_started"] and run.lifecycle is L.PREPARED

    await run.apply()  # the start, held in CheckingInput for the input guardrails
    assert run.state.phase == "CheckingInput"
    assert run.lifecycle is L.PREPARED and seen == []
    assert [event.type async for event in run.perform()] == []
    assert seen == [L.RUNNING] and run.lifecycle is L.RUNNING
    await run.apply()  # passed: the start goes on
    assert [event.type async for event in run.perform()] == ["token_delta"]
    await run.step()
    assert run.finished and run.lifecycle is L.ENDED and not run.suspended
    assert seen == [L.RUNNING]


def bank() -> Agent:
    @tool(needs_approval=True)
    async def transfer(to: str) -> str:
        """Pay someone."""
        return f"paid {to}"

    call = ToolCall("t1", "transfer", json.dumps({"to": "ann"}))
    return Agent("teller", ScriptedModel([[call], "done"]), tools=[transfer])


async def test_a_suspension_is_kept_once_closed_and_a_snapshot_resumes_running() -> None:
    agent = bank()
    run = Run(agent, input="pay ann")

    events = [event async for event in run.stream()]

    assert events[-1].type == "run_suspended"
    assert run.suspended and run.lifecycle is L.SUSPENDED
    assert await run.step() == []  # a closed run takes no further step
    decision = run.snapshot().pending()[0].approve()
    resumed = Run.from_snapshot(agent, run.snapshot(), [decision])
    assert resumed.lifecycle is L.RUNNING and not resumed.suspended


async def test_a_handoff_target_or_a_debugged_run_continues_a_stream_unannounced() -> None:
    run = Run(echo_agent("hello"), input="hi")
    run.continue_stream()

    assert run.lifecycle is L.STARTED
    events = await run.step()
    assert "run_started" not in [event.type for event in events]
    run.continue_stream()  # a run already announced: nothing to do
    assert run.lifecycle is L.RUNNING


def test_position_keeps_what_it_is_not_given_and_claims_only_when_resuming() -> None:
    run = Run(echo_agent("hello"), input="hi")
    start = run.next_input

    run.position(seq=4, conversation=())

    assert (run.seq, len(run.conversation), run.next_input) == (4, 0, start)
    assert run.lifecycle is L.NEW
    with pytest.raises(ValueError, match="claims"):
        run.position(lifecycle=L.RESUMING)


class Kept:
    """A trace sink that keeps the records it is given."""

    def __init__(self) -> None:
        self.records: list[TransitionRecord] = []

    def started(self, run: Any) -> None:
        return None

    def transition(self, run: Any, record: TransitionRecord) -> None:
        self.records.append(record)

    def effect(self, run: Any, event: Any) -> None:
        return None


async def test_apply_returns_the_step_with_its_row_and_guards_when_rows_are_kept() -> None:
    kept = Kept()
    run = Run(echo_agent("hello"), input="hi", trace=kept)
    await run.step()  # the start: the model is called, its response is the next input
    assert isinstance(run.next_input, ModelResponse)

    applied = await run.apply()

    record = kept.records[-1]
    assert (applied.seq, applied.before, applied.input) == (2, record.state_before, record.input)
    assert applied.match == record.match and applied.match is not None
    assert applied.match.checked  # each guard checked, with its value
    assert applied.outcome == record.outcome
    assert applied.events == record.outcome.events


async def test_apply_names_no_row_when_nothing_keeps_rows() -> None:
    run = Run(echo_agent("hello"), input="hi")

    applied = await run.apply()

    assert applied.match is None and applied.seq == 1
    assert applied.events == applied.outcome.events
