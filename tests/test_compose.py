"""Composing charts (`extend`): a draft of the default loop's rows, changed, built, compiled."""

from __future__ import annotations

from typing import Any

import pytest

from helikon import (
    AGENT_LOOP,
    DEFAULT_TABLE,
    Agent,
    AssistantMessage,
    ChartDefinitionError,
    ChartSpec,
    LoopChart,
    ModelResponse,
    ScriptedModel,
    Start,
    TransitionCtx,
    compile_chart,
    extend,
    initial_state,
    to,
    transition,
)


def own_rows(table: Any, phase: str) -> list[tuple[str, tuple[str, ...], str, str]]:
    return [
        (row.input_kind, tuple(map(str, row.guards)), row.target, row.action)
        for row in table.rows
        if row.source == phase and not row.implicit
    ]


def test_a_draft_that_changes_nothing_is_the_base_again() -> None:
    chart = extend(AGENT_LOOP, "AgentLoopChart").build()
    assert chart is not AGENT_LOOP
    assert compile_chart(chart).digest == DEFAULT_TABLE.digest


def test_building_leaves_the_base_chart_alone() -> None:
    before = {state.name: len(state.transitions) for state in AGENT_LOOP.states}
    extend(AGENT_LOOP, "X").phase("Extra").rows("Extra", "model_response", "complete").build()
    assert {state.name: len(state.transitions) for state in AGENT_LOOP.states} == before
    assert compile_chart(AGENT_LOOP).digest == DEFAULT_TABLE.digest


def test_building_gives_a_spec_that_states_the_shared_rows_once() -> None:
    spec = extend(AGENT_LOOP, "Mine").phase("Extra").build()
    assert isinstance(spec, ChartSpec) and not isinstance(spec, type)
    assert [(e.input_kind, e.target, e.action) for e in spec.everywhere] == [
        ("cancel", "Failed", "cancel_run"),
        ("fail", "Failed", "fail_run"),
    ]
    assert not any(row.input_kind in ("cancel", "fail") for row in spec.rows)
    # The diagram draws what the spec states: one group row each, Extra among the members.
    table = compile_chart(
        extend(spec, "Mine")
        .retarget("CallingModel", "start", "start_turn -> CallingModel", to="Extra")
        .rows("Extra", "model_response", "complete")
        .build()
    )
    assert [len(rows) for rows in table.everywhere] == [10, 10]
    assert {table.rows[i].source for i in table.everywhere[0]} >= {"Extra", "CallingModel"}


def test_a_built_spec_extends_again_and_a_class_is_no_longer_declared() -> None:
    draft = extend(AGENT_LOOP, "First").drop("CallingModel", "start", "fail_budget")
    first = draft.build()
    again = extend(first, "First").build()
    assert again == first
    assert compile_chart(again).digest == compile_chart(first).digest == draft.compile().digest
    assert draft.compile().digest != DEFAULT_TABLE.digest
    assert not [cls for cls in LoopChart.__subclasses__() if cls.__name__ == "First"]


def test_retargeting_start_adds_a_phase_in_front_of_the_loop() -> None:
    chart = (
        extend(AGENT_LOOP, "Greeting")
        .phase("Greeting", prompt="Greet the user in one line.")
        .retarget(
            "CallingModel", "start", "start_turn -> CallingModel", to="Greeting", on="enter_phase"
        )
        .rows("Greeting", "model_response", to("CallingModel", on="keep_reply"))
        .build()
    )
    table = compile_chart(chart)
    # Only the fallback moved: the output_only row runs start_turn too, to Finalizing. Each
    # start row that goes on keeps its twin, which holds it for the input guardrails.
    assert own_rows(table, "CallingModel")[:5] == [
        ("start", ("budget_exhausted",), "Failed", "fail_budget"),
        ("start", ("input_guarded", "output_only"), "CheckingInput", "start_turn"),
        ("start", ("output_only",), "Finalizing", "start_turn"),
        ("start", ("input_guarded",), "CheckingInput", "enter_phase"),
        ("start", (), "Greeting", "enter_phase"),
    ]
    # A new phase goes before the terminal ones and takes the rows every phase has.
    assert [p.name for p in table.phases][-3:] == ["Greeting", "Done", "Failed"]
    assert own_rows(table, "Greeting") == [
        ("model_response", (), "CallingModel", "keep_reply"),
        ("cancel", (), "Failed", "cancel_run"),
        ("fail", (), "Failed", "fail_run"),
    ]
    ctx = TransitionCtx(table=table)
    started = transition(initial_state(ctx), Start(), ctx)
    assert started.next_state.phase == "Greeting"
    greeted = transition(started.next_state, ModelResponse((AssistantMessage("Hi."),)), ctx)
    assert greeted.next_state.phase == "CallingModel"
    assert greeted.conversation_appends == (AssistantMessage("Hi."),)


def test_a_row_is_named_by_its_action_and_a_name_must_be_unique() -> None:
    draft = extend(AGENT_LOOP, "X")
    with pytest.raises(ChartDefinitionError, match=r"no row named 'nope' .its rows: fail_tr"):
        draft.retarget("CallingModel", "model_response", "nope", to="Done")
    with pytest.raises(ChartDefinitionError, match=r"2 rows named 'start_turn'.*'action -> Targ"):
        draft.retarget("CallingModel", "start", "start_turn", to="Done")
    draft.retarget("CallingModel", "start", "start_turn -> Finalizing", to="Done")
    draft.insert("Finalizing", "model_response", to("Failed", cond="empty", on="fail_empty"))
    with pytest.raises(ChartDefinitionError, match=r"no row named 'complete'"):
        draft.drop("Finalizing", "model_response", "complete")


def test_insert_goes_before_the_fallback_or_the_named_row() -> None:
    chart = (
        extend(AGENT_LOOP, "X")
        .insert("Compacting", "model_response", to("Failed", cond="empty", on="fail_empty"))
        .insert("Finalizing", "model_response", "fail_truncated", before="complete_structured")
        .build()
    )
    table = compile_chart(chart)
    assert [r[3] for r in own_rows(table, "Compacting")][:2] == ["fail_empty", "apply_summary"]
    assert [r[3] for r in own_rows(table, "Finalizing")][:4] == [
        "repair",
        "check_structured",
        "fail_truncated",
        "complete_structured",
    ]


def test_drop_and_rows_replace_what_the_base_had() -> None:
    chart = (
        extend(AGENT_LOOP, "X")
        .drop("CallingModel", "start", "fail_budget")
        .rows("ExecutingTools", "tool_results", "fail_max_turns", "compact", "next_turn")
        .build()
    )
    table = compile_chart(chart)
    assert [r[3] for r in own_rows(table, "CallingModel") if r[0] == "start"] == [
        "start_turn",  # the twins: held for the input guardrails
        "start_turn",
        "start_turn",
        "start_turn",
    ]
    assert [r[3] for r in own_rows(table, "ExecutingTools") if r[0] == "tool_results"] == [
        "fail_max_turns",
        "compact",
        "next_turn",
    ]


def test_a_string_row_must_name_one_row_of_the_base_on_that_input() -> None:
    draft = extend(AGENT_LOOP, "X")
    with pytest.raises(ChartDefinitionError, match=r"no row named 'complete' on this input"):
        draft.rows("CallingModel", "tool_results", "complete")
    # complete_structured is one row, though two phases have it.
    draft.rows("RepairingOutput", "model_response", "complete_structured", "fail_structured")


def test_mistakes_name_what_is_wrong() -> None:
    draft = extend(AGENT_LOOP, "X")
    with pytest.raises(ChartDefinitionError, match=r"has no such phase .*add it with .phase"):
        draft.rows("Planning", "start", "fail_budget")
    with pytest.raises(ChartDefinitionError, match="has this phase already"):
        draft.phase("CallingModel")
    with pytest.raises(ChartDefinitionError, match="no default action 'nope'"):
        draft.actions(mine="nope")
    draft.phase("Loose").rows("Loose", "model_response", to("Nowhere", on="complete"))
    with pytest.raises(ChartDefinitionError, match="names 'Nowhere', which is not a phase"):
        draft.build()


def test_the_built_chart_is_checked_like_any_chart() -> None:
    chart = extend(AGENT_LOOP, "X").phase("Reviewing").build()  # no row leads there
    with pytest.raises(ChartDefinitionError, match="state Reviewing: unreachable from the initial"):
        compile_chart(chart)
    chart = (
        extend(AGENT_LOOP, "X")
        .phase("Reviewing")
        .insert("CallingModel", "model_response", to("Reviewing", cond="empty", on="finalize"))
        .build()
    )
    with pytest.raises(ChartDefinitionError) as raised:
        compile_chart(chart)
    assert str(raised.value).splitlines()[1:] == [
        "  - state Reviewing, input model_response: no row handles this input",
        "  - state CallingModel, input model_response: row -> Reviewing [empty] can never fire: "
        "whenever its guards hold, the earlier row -> Failed [empty] also matches, and comes first",
    ]


def test_registered_guards_and_actions_travel_with_the_chart() -> None:
    def long_answer(state: Any, inp: Any, ctx: TransitionCtx) -> bool:
        """The answer is over 5 characters."""
        return sum(len(getattr(item, "content", "")) for item in inp.items) > 5

    chart = (
        extend(AGENT_LOOP, "X")
        .insert("CallingModel", "model_response", to("Failed", cond="long_answer", on="terse"))
        .guards(long_answer)
        .actions(terse="fail_empty")
        .build()
    )
    table = compile_chart(chart)
    assert table.guard_docs["long_answer"] == "The answer is over 5 characters."
    ctx = TransitionCtx(table=table)
    state = transition(initial_state(ctx), Start(), ctx).next_state
    long = transition(state, ModelResponse((AssistantMessage("far too long"),)), ctx)
    assert long.next_state.phase == "Failed"
    short = transition(state, ModelResponse((AssistantMessage("ok"),)), ctx)
    assert short.next_state.phase == "Done"


def test_an_initial_phase_takes_over_start() -> None:
    chart = (
        extend(AGENT_LOOP, "X")
        .phase("Warmup", initial=True, prompt="Warm up.")
        .rows("Warmup", "start", to("Warmup", on="enter_phase"))
        .rows("Warmup", "model_response", to("CallingModel", on="keep_reply"))
        .build()
    )
    table = compile_chart(chart)
    assert (table.initial, table.phases[0].name) == ("Warmup", "Warmup")
    (row,) = table.rows_for("CallingModel", "start")
    assert (row.action, row.implicit) == ("reject_input", True)


def _counted_words(state: Any, inp: Any, ctx: Any) -> Any:
    """A custom guard that answers a count (or None for no text), not a bool."""
    words = sum(len(str(getattr(item, "content", "")).split()) for item in inp.items)
    return words or None


@pytest.mark.parametrize(("plan", "ends"), [("a plan", "Done"), ("", "Failed")])
async def test_a_guard_answering_a_non_bool_takes_the_row_its_truth_says_traced_or_not(
    plan: str, ends: str, tmp_path: Any
) -> None:
    """`transition` and the row search a trace or a store uses (`matched_transition`)
    read a custom guard's answer alike, by its truth: before, `transition` took 2 for
    false, so a run ended one way without a trace and another with one."""
    chart = (
        extend(AGENT_LOOP, "WordyChart")
        .phase("Planning", initial=True, prompt="Plan first.")
        .rows("Planning", "start", "fail_budget", to("Planning", on="start_planning"))
        .rows(
            "Planning",
            "model_response",
            to("CallingModel", cond="wordy", on="record_plan"),
            to("Failed", on="fail_empty"),
        )
        .guards(wordy=_counted_words)
        .actions(start_planning="enter_phase", record_plan="keep_reply")
        .build()
    )
    table = compile_chart(chart)
    phases = []
    for trace in (None, tmp_path / "run.jsonl"):
        agent = Agent("planner", ScriptedModel([plan, "done"]), chart=table)
        events = [event async for event in agent.run("go", trace=trace)]
        phases.append("Done" if events[-1].type == "run_completed" else "Failed")
    assert phases == [ends, ends]


def test_a_row_must_go_where_its_action_builds_the_next_state() -> None:
    """`complete` builds Done whatever its row says: a row from it to Finalizing is refused
    when the chart compiles, naming the row and both phases."""
    wrong = (
        extend(AGENT_LOOP, "X").retarget(
            "CallingModel", "model_response", "complete", to="Finalizing"
        )
    ).build()
    with pytest.raises(ChartDefinitionError) as refused:
        compile_chart(wrong)
    assert (
        "state CallingModel, input model_response: row #13 goes to Finalizing, but its action "
        "complete builds the state of phase Done"
    ) in str(refused.value)


def test_an_action_bound_by_name_is_checked_as_the_action_it_runs() -> None:
    # record_plan runs keep_reply, which enters a model-calling phase: not ExecutingTools.
    wrong = (
        extend(AGENT_LOOP, "X")
        .phase("Planning", initial=True, prompt="Plan.")
        .rows("Planning", "start", to("Planning", on="start_planning"))
        .rows("Planning", "model_response", to("ExecutingTools", on="record_plan"))
        .actions(start_planning="enter_phase", record_plan="keep_reply")
        .build()
    )
    with pytest.raises(ChartDefinitionError, match="builds the state of a model-calling phase"):
        compile_chart(wrong)
    right = extend(wrong, "X").retarget(
        "Planning", "model_response", "record_plan", to="CallingModel"
    )
    assert compile_chart(right.build()).initial == "Planning"
