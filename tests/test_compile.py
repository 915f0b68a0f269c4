"""compile_chart: every compile-time refusal, and what compiling the default chart gives.

Each refusal is provoked by a small broken chart and checked through its message (which names
the state and, where there is one, the input) and the error's `state` / `input_kind`.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from types import MappingProxyType
from typing import Any, ClassVar

import pytest
from statemachine import State, StateChart

from helikon import (
    AGENT_LOOP,
    DEFAULT_TABLE,
    AgentLoopChart,
    AssistantMessage,
    CallingModel,
    ChartDefinitionError,
    LoopChart,
    ModelResponse,
    TransitionCtx,
    TransitionOutcome,
    compile_chart,
    transition,
)
from helikon.core.chart.actions import ACTIONS
from helikon.core.chart.compile import ChartSpec, read_chart
from helikon.core.chart.guards import GUARDS
from helikon.core.chart.validate import check_chart
from helikon.core.items import FinalOutput
from helikon.core.state import TERMINATE, Done
from helikon.core.table import GuardRef, Phase, Row

Rows = Callable[[State, State, State], Any]


def tiny(model_response: Rows | None = None, **attrs: Any) -> Any:
    """The smallest sound loop chart: one model-calling phase, Done and Failed.

    `model_response(calling_model, done, failed)` replaces its model_response rows; `attrs`
    are extra class attributes (`awaits`, `prompts`...).
    """
    calling_model = State("CallingModel", initial=True)
    done = State("Done", final=True)
    failed = State("Failed", final=True)
    rows = model_response or (
        lambda c, d, f: c.to(f, cond="empty", on="fail_empty") | c.to(d, on="complete")
    )
    namespace = {
        "calling_model": calling_model,
        "done": done,
        "failed": failed,
        "start": calling_model.to.itself(on="start_turn"),
        "model_response": rows(calling_model, done, failed),
        "cancel": calling_model.to(failed, on="cancel_run"),
        "fail": calling_model.to(failed, on="fail_run"),
        **attrs,
    }
    metaclass: Any = type(LoopChart)
    return metaclass("Tiny", (LoopChart,), namespace)


def refusal(chart: Any, **registries: Any) -> ChartDefinitionError:
    with pytest.raises(ChartDefinitionError) as info:
        compile_chart(chart, **registries)
    return info.value


def problems(error: ChartDefinitionError) -> list[str]:
    """The listed problems of a multi-problem error, one string each."""
    return re.findall(r"^  - (.*)$", str(error), flags=re.MULTILINE)


def test_the_tiny_chart_compiles() -> None:
    table = compile_chart(tiny())
    assert [row.action for row in table.rows if not row.implicit] == [
        "start_turn",
        "fail_empty",
        "complete",
        "cancel_run",
        "fail_run",
    ]


# ---------------------------------------------------------------- names


def test_an_unknown_guard_is_refused_naming_state_and_input() -> None:
    chart = tiny(lambda c, d, f: c.to(f, cond="is_sad", on="fail_empty") | c.to(d, on="complete"))
    error = refusal(chart)
    assert problems(error) == ["state CallingModel, input model_response: unknown guard 'is_sad'"]
    assert str(error).startswith("chart Tiny cannot be compiled:")
    assert (error.state, error.input_kind) == ("CallingModel", "model_response")


def test_an_unknown_action_is_refused_naming_state_and_input() -> None:
    chart = tiny(lambda c, d, f: c.to(f, cond="empty", on="fail_empty") | c.to(d, on="finish"))
    error = refusal(chart)
    assert problems(error) == ["state CallingModel, input model_response: unknown action 'finish'"]
    assert (error.state, error.input_kind) == ("CallingModel", "model_response")


def test_a_row_without_an_action_is_refused() -> None:
    error = refusal(tiny(lambda c, d, f: c.to(f, cond="empty", on="fail_empty") | c.to(d)))
    assert str(error) == (
        "state CallingModel, input model_response -> Done: a row needs exactly one action, "
        'named with on="..."; it has none'
    )
    assert (error.state, error.input_kind) == ("CallingModel", "model_response")


def test_a_row_with_two_actions_is_refused() -> None:
    chart = tiny(
        lambda c, d, f: (
            c.to(f, cond="empty", on="fail_empty") | c.to(d, on=["complete", "finalize"])
        )
    )
    error = refusal(chart)
    assert str(error).endswith("it has 2: 'complete', 'finalize'")
    assert "state CallingModel, input model_response -> Done" in str(error)
    assert (error.state, error.input_kind) == ("CallingModel", "model_response")


def test_an_action_given_as_a_callable_is_refused() -> None:
    def finish(*args: Any) -> None:
        """Not a name: the table must be data."""

    error = refusal(
        tiny(lambda c, d, f: c.to(f, cond="empty", on="fail_empty") | c.to(d, on=finish))
    )
    assert "state CallingModel, input model_response -> Done" in str(error)
    assert "is not a registered action name" in str(error)
    assert (error.state, error.input_kind) == ("CallingModel", "model_response")


@pytest.mark.parametrize("guard", ["empty and truncated", "not empty", "empty or truncated"])
def test_a_guard_given_as_a_boolean_expression_is_refused(guard: str) -> None:
    error = refusal(
        tiny(lambda c, d, f: c.to(f, cond=guard, on="fail_empty") | c.to(d, on="complete"))
    )
    assert str(error) == (
        f"state CallingModel, input model_response: guard {guard!r} must be a single registered "
        "guard name; use cond= for guards that must hold and unless= for guards that must not"
    )
    assert (error.state, error.input_kind) == ("CallingModel", "model_response")


def test_a_guard_given_as_a_callable_is_refused() -> None:
    def is_empty(*args: Any) -> bool:
        return True

    chart = tiny(lambda c, d, f: c.to(f, cond=is_empty, on="fail_empty") | c.to(d, on="complete"))
    error = refusal(chart)
    assert "state CallingModel, input model_response: guard <function" in str(error)
    assert "must be a single registered guard name" in str(error)
    assert (error.state, error.input_kind) == ("CallingModel", "model_response")


def test_an_event_that_is_not_an_input_kind_is_refused() -> None:
    class Misnamed(LoopChart):
        calling_model = State("CallingModel", initial=True)
        done = State("Done", final=True)
        failed = State("Failed", final=True)
        start = calling_model.to.itself(on="start_turn")
        model_responded = calling_model.to(done, on="complete")
        cancel = calling_model.to(failed, on="cancel_run")
        fail = calling_model.to(failed, on="fail_run")

    error = refusal(Misnamed)
    assert str(error) == (
        "state CallingModel, input model_responded: unknown input kind 'model_responded'; "
        "events must be one of start, model_response, tool_results, approval_decisions, "
        "handoff_result, cancel, fail, effect_result, guardrail_verdict"
    )
    assert (error.state, error.input_kind) == ("CallingModel", "model_responded")


# ---------------------------------------------------------------- coverage


def test_a_phase_that_handles_model_response_needs_a_cancel_row() -> None:
    class NoCancel(LoopChart):
        calling_model = State("CallingModel", initial=True)
        done = State("Done", final=True)
        failed = State("Failed", final=True)
        start = calling_model.to.itself(on="start_turn")
        model_response = calling_model.to(done, on="complete")
        fail = calling_model.to(failed, on="fail_run")

    error = refusal(NoCancel)
    assert problems(error) == ["state CallingModel, input cancel: no row handles this input"]
    assert (error.state, error.input_kind) == ("CallingModel", "cancel")


def test_the_initial_phase_needs_a_start_row() -> None:
    class NoStart(LoopChart):
        calling_model = State("CallingModel", initial=True)
        done = State("Done", final=True)
        failed = State("Failed", final=True)
        model_response = calling_model.to(done, on="complete")
        cancel = calling_model.to(failed, on="cancel_run")
        fail = calling_model.to(failed, on="fail_run")

    error = refusal(NoStart)
    assert problems(error) == ["state CallingModel, input start: no row handles this input"]
    assert (error.state, error.input_kind) == ("CallingModel", "start")


def test_a_reachable_custom_phase_needs_a_model_response_row() -> None:
    class Critic(LoopChart):
        calling_model = State("CallingModel", initial=True)
        critiquing = State("Critiquing")
        done = State("Done", final=True)
        failed = State("Failed", final=True)
        start = calling_model.to.itself(on="start_turn")
        model_response = calling_model.to(critiquing, cond="empty", on="start_turn") | (
            calling_model.to(done, on="complete")
        )
        cancel = failed.from_.any(on="cancel_run")
        fail = failed.from_.any(on="fail_run")

    error = refusal(Critic)
    assert "state Critiquing, input model_response: no row handles this input" in problems(error)
    assert "state Critiquing: cannot reach Done or Failed" not in problems(error)


def test_awaits_sets_what_a_custom_phase_must_handle() -> None:
    class Waiter(LoopChart):
        awaits: ClassVar[dict[str, tuple[str, ...]]] = {"Waiting": ("tool_results",)}
        calling_model = State("CallingModel", initial=True)
        waiting = State("Waiting")
        done = State("Done", final=True)
        failed = State("Failed", final=True)
        start = calling_model.to(waiting, on="start_turn")
        model_response = calling_model.to(done, on="complete")
        cancel = failed.from_.any(on="cancel_run")
        fail = failed.from_.any(on="fail_run")

    error = refusal(Waiter)
    assert problems(error) == ["state Waiting, input tool_results: no row handles this input"]
    assert (error.state, error.input_kind) == ("Waiting", "tool_results")


def test_a_pair_whose_rows_are_all_guarded_is_refused() -> None:
    chart = tiny(
        lambda c, d, f: (
            c.to(f, cond="empty", on="fail_empty")
            | c.to(d, cond=["has_tool_calls", "truncated"], on="complete")
        )
    )
    error = refusal(chart)
    assert problems(error) == [
        "state CallingModel, input model_response: no unguarded fallback row: when none of "
        "[empty | has_tool_calls and truncated] holds, nothing fires"
    ]
    assert (error.state, error.input_kind) == ("CallingModel", "model_response")


# ---------------------------------------------------------------- the graph


def test_a_state_unreachable_from_the_initial_one_is_refused() -> None:
    class Island(LoopChart):
        calling_model = State("CallingModel", initial=True)
        compacting = State("Compacting")
        done = State("Done", final=True)
        failed = State("Failed", final=True)
        start = calling_model.to.itself(on="start_turn")
        model_response = calling_model.to(done, on="complete") | compacting.to(
            calling_model, on="apply_summary"
        )
        cancel = failed.from_.any(on="cancel_run")
        fail = failed.from_.any(on="fail_run")

    error = refusal(Island)
    assert problems(error) == ["state Compacting: unreachable from the initial state CallingModel"]
    assert (error.state, error.input_kind) == ("Compacting", None)


def test_a_state_that_cannot_reach_done_or_failed_is_refused() -> None:
    class Trap(LoopChart):
        calling_model = State("CallingModel", initial=True)
        compacting = State("Compacting")
        done = State("Done", final=True)
        failed = State("Failed", final=True)
        start = calling_model.to.itself(on="start_turn")
        model_response = (
            calling_model.to(compacting, cond="empty", on="compact")
            | calling_model.to(done, on="complete")
            | compacting.to.itself(on="apply_summary")
        )
        # apply_summary builds a Compacting state (cancel_run would build Failed).
        cancel = calling_model.to(failed, on="cancel_run") | compacting.to.itself(
            on="apply_summary"
        )
        fail = calling_model.to(failed, on="fail_run") | compacting.to.itself(on="apply_summary")

    error = refusal(Trap)
    assert problems(error) == ["state Compacting: cannot reach Done or Failed"]
    assert (error.state, error.input_kind) == ("Compacting", None)


# ---------------------------------------------------------------- dead rows


def test_a_row_after_an_unguarded_row_is_dead() -> None:
    chart = tiny(
        lambda c, d, f: (
            c.to(d, on="complete")
            | c.to(f, cond="empty", on="fail_empty")
            | c.to(f, on="fail_truncated")
        )
    )
    error = refusal(chart)
    assert problems(error) == [
        "state CallingModel, input model_response: row -> Failed [empty] can never fire: "
        "whenever its guards hold, the earlier row -> Done [no guard] also matches, "
        "and comes first",
        "state CallingModel, input model_response: row -> Failed [no guard] can never fire: "
        "in every case, the earlier row -> Done [no guard] also matches, and comes first",
    ]
    assert (error.state, error.input_kind) == ("CallingModel", "model_response")


def test_a_row_whose_guards_include_an_earlier_rows_is_dead() -> None:
    chart = tiny(
        lambda c, d, f: (
            c.to(f, unless="empty", on="fail_truncated")
            | c.to(f, cond="truncated", on="fail_truncated")
            | c.to(f, cond=["empty", "truncated"], on="fail_empty")
            | c.to(d, on="complete")
        )
    )
    error = refusal(chart)
    # The row is blamed on [truncated], not on [not empty], which never holds with it.
    assert problems(error) == [
        "state CallingModel, input model_response: row -> Failed [empty and truncated] can "
        "never fire: whenever its guards hold, the earlier row -> Failed [truncated] also "
        "matches, and comes first"
    ]


def test_a_row_covered_by_several_earlier_rows_together_is_dead() -> None:
    chart = tiny(
        lambda c, d, f: (
            c.to(f, cond="empty", on="fail_empty")
            | c.to(d, unless="empty", on="complete")
            | c.to(d, cond="truncated", on="complete")
            | c.to(d, on="complete")
        )
    )
    error = refusal(chart)
    assert problems(error) == [
        "state CallingModel, input model_response: row -> Done [truncated] can never fire: "
        "whenever its guards hold, one of the earlier rows -> Failed [empty] | "
        "-> Done [not empty] matches, and comes first",
        "state CallingModel, input model_response: row -> Done [no guard] can never fire: "
        "in every case, one of the earlier rows -> Failed [empty] | -> Done [not empty] "
        "matches, and comes first",
    ]


def test_contradictory_guards_on_one_row_make_it_dead() -> None:
    """cond="x", unless="x" cannot be written in the DSL (see the next test), so the check
    is driven through check_chart with a hand-built spec."""
    rows = (
        Row(0, "CallingModel", "start", (), "CallingModel", "start_turn"),
        Row(
            1,
            "CallingModel",
            "model_response",
            (GuardRef("empty"), GuardRef("empty", expected=False)),
            "Failed",
            "fail_empty",
        ),
        Row(2, "CallingModel", "model_response", (), "Done", "complete"),
        Row(3, "CallingModel", "cancel", (), "Failed", "cancel_run"),
        Row(4, "CallingModel", "fail", (), "Failed", "fail_run"),
    )
    spec = ChartSpec(
        "Handmade",
        "CallingModel",
        (Phase("CallingModel"), Phase("Done", final=True), Phase("Failed", final=True)),
        rows,
        MappingProxyType({}),
        MappingProxyType({}),
    )
    with pytest.raises(ChartDefinitionError) as info:
        check_chart(spec, GUARDS, ACTIONS)
    assert problems(info.value) == [
        "state CallingModel, input model_response: row -> Failed [empty and not empty] can "
        "never fire: its guards contradict (a guard both required and refused)"
    ]


def test_cond_and_unless_of_one_name_collapse_to_cond_in_python_statemachine() -> None:
    """python-statemachine keeps one spec per guard name on a transition, so `unless="empty"`
    beside `cond="empty"` is dropped before helikon reads the class: the row compiles as
    `cond="empty"`, as python-statemachine's own engine runs it. Pinned so that a change
    upstream (which would let compile_chart see the contradiction) is noticed."""
    chart = tiny(
        lambda c, d, f: (
            c.to(f, cond="empty", unless="empty", on="fail_empty") | c.to(d, on="complete")
        )
    )
    table = compile_chart(chart)
    (guarded, _) = table.rows_for("CallingModel", "model_response")
    assert guarded.guards == (GuardRef("empty"),)


# ---------------------------------------------------------------- final states


def test_a_chart_without_done_is_refused() -> None:
    class NoDone(LoopChart):
        calling_model = State("CallingModel", initial=True)
        failed = State("Failed", final=True)
        start = calling_model.to.itself(on="start_turn")
        model_response = calling_model.to(failed, on="fail_empty")
        cancel = calling_model.to(failed, on="cancel_run")
        fail = calling_model.to(failed, on="fail_run")

    error = refusal(NoDone)
    assert problems(error) == ['state Done: missing: a loop chart needs State("Done", final=True)']
    assert (error.state, error.input_kind) == ("Done", None)


def test_a_chart_without_final_states_lists_both() -> None:
    class Endless(LoopChart):
        calling_model = State("CallingModel", initial=True)
        start = calling_model.to.itself(on="start_turn")
        model_response = calling_model.to.itself(on="complete")
        cancel = calling_model.to.itself(on="cancel_run")
        fail = calling_model.to.itself(on="fail_run")

    assert problems(refusal(Endless)) == [
        'state Done: missing: a loop chart needs State("Done", final=True)',
        'state Failed: missing: a loop chart needs State("Failed", final=True)',
        "state CallingModel: cannot reach Done or Failed",
    ]


def test_a_failed_state_that_is_not_final_is_refused() -> None:
    class SoftFail(LoopChart):
        calling_model = State("CallingModel", initial=True)
        done = State("Done", final=True)
        failed = State("Failed")
        start = calling_model.to.itself(on="start_turn")
        model_response = calling_model.to(done, on="complete")
        cancel = calling_model.to(failed, on="cancel_run") | failed.to(done, on="complete")
        fail = calling_model.to(failed, on="fail_run")

    error = refusal(SoftFail)
    assert (
        problems(error)[0] == 'state Failed: must be final: declare it State("Failed", final=True)'
    )
    assert (error.state, error.input_kind) == ("Failed", None)


def test_an_extra_final_state_is_refused() -> None:
    gave_up = State("GaveUp", final=True)
    chart = tiny(
        lambda c, d, f: c.to(gave_up, cond="empty", on="fail_empty") | c.to(d, on="complete"),
        gave_up=gave_up,
    )
    error = refusal(chart)
    assert problems(error) == ["state GaveUp: the only final states are Done and Failed"]
    assert (error.state, error.input_kind) == ("GaveUp", None)


# ---------------------------------------------------------------- not a chart


def test_an_instance_is_refused_with_the_fix() -> None:
    class Light(StateChart[Any]):
        green = State(initial=True)
        red = State(final=True)
        go = green.to(red)

    error = refusal(Light())
    assert str(error) == (
        "expected a chart class, got an instance of Light; pass the class itself: "
        "compile_chart(Light)"
    )
    assert (error.state, error.input_kind) == (None, None)


@pytest.mark.parametrize("thing", [object, "AgentLoopChart", AgentLoopChart.calling_model, 3])
def test_a_non_chart_is_refused(thing: Any) -> None:
    error = refusal(thing)
    assert str(error) == (
        f"expected a LoopChart (python-statemachine StateChart) subclass, got {thing!r}"
    )


def test_a_plain_statechart_is_read_but_its_events_must_be_input_kinds() -> None:
    class Light(StateChart[Any]):
        green = State(initial=True)
        red = State(final=True)
        go = green.to(red)

    error = refusal(Light)
    assert str(error).startswith("state Green, input go: unknown input kind 'go'")


# ---------------------------------------------------------------- what a row would drop


def test_a_transition_without_an_event_is_refused() -> None:
    class Eventless(LoopChart):
        calling_model = State("CallingModel", initial=True)
        done = State("Done", final=True)
        failed = State("Failed", final=True)
        start = calling_model.to.itself(on="start_turn")
        model_response = calling_model.to(done, on="complete")
        calling_model.to(failed, cond="empty", on="fail_empty")  # not assigned to an input
        cancel = calling_model.to(failed, on="cancel_run")
        fail = calling_model.to(failed, on="fail_run")

    error = refusal(Eventless)
    assert str(error).startswith(
        "state CallingModel -> Failed: a transition without an event is never taken"
    )
    assert (error.state, error.input_kind) == ("CallingModel", None)


def test_callbacks_helikon_never_runs_are_refused() -> None:
    chart = tiny(
        lambda c, d, f: (
            c.to(f, cond="empty", on="fail_empty") | c.to(d, on="complete", before="log_answer")
        )
    )
    error = refusal(chart)
    assert str(error).startswith(
        "state CallingModel, input model_response -> Done: before='log_answer' would never run"
    )
    assert (error.state, error.input_kind) == ("CallingModel", "model_response")


def test_a_row_added_to_an_inherited_state_is_caught_in_the_parent() -> None:
    parent = tiny()

    class Child(parent):  # type: ignore[valid-type,misc]
        critiquing = State("Critiquing")
        # parent.calling_model is the parent's State object: this row lands in the parent too.
        model_response = parent.calling_model.to(critiquing, cond="has_tool_calls", on="finalize")

    error = refusal(parent)
    assert "Critiquing is not a state of chart Tiny" in str(error)
    assert "shares State objects between a chart and its subclasses" in str(error)
    assert (error.state, error.input_kind) == ("CallingModel", "model_response")


def test_two_states_with_one_name_are_refused() -> None:
    chart = tiny(again=State("CallingModel"))
    error = refusal(chart)
    assert str(error) == (
        "state CallingModel: two states have this name; a phase name must be unique"
    )


def test_awaits_and_prompts_must_name_the_charts_states() -> None:
    chart = tiny(
        awaits={"Planing": ("model_response",), "CallingModel": ("model_responses",)},
        prompts={"Planing": "Plan first."},
    )
    assert problems(refusal(chart)) == [
        "state Planing: named in awaits, but the chart has no such state",
        "state CallingModel, input model_responses: awaits names an unknown input kind "
        "'model_responses'",
        "state Planing: named in prompts, but the chart has no such state",
        "state CallingModel, input model_responses: no row handles this input",
    ]


def test_nested_states_are_refused() -> None:
    class Nested(LoopChart):
        class calling_model(State.Compound, name="CallingModel"):
            thinking = State(initial=True)
            answered = State(final=True)
            think = thinking.to(answered)

        done = State("Done", final=True)
        failed = State("Failed", final=True)
        start = calling_model.to.itself(on="start_turn")

    error = refusal(Nested)
    assert str(error) == (
        "state CallingModel: nested and parallel states are not supported in loop charts"
    )


# ---------------------------------------------------------------- several problems


def test_every_problem_is_reported_in_one_error() -> None:
    class Broken(LoopChart):
        calling_model = State("CallingModel", initial=True)
        compacting = State("Compacting")
        done = State("Done", final=True)
        failed = State("Failed", final=True)
        start = calling_model.to.itself(on="start_turn")
        model_response = (
            calling_model.to(failed, cond="is_sad", on="fail_empty")
            | calling_model.to(done, on="finish")
            | calling_model.to(failed, cond="empty", on="fail_empty")
            | compacting.to(calling_model, on="apply_summary")
        )
        fail = failed.from_.any(on="fail_run")

    error = refusal(Broken)
    assert problems(error) == [
        "state CallingModel, input model_response: unknown guard 'is_sad'",
        "state CallingModel, input model_response: unknown action 'finish'",
        "state Compacting: unreachable from the initial state CallingModel",
        "state CallingModel, input cancel: no row handles this input",
        "state CallingModel, input model_response: row -> Failed [empty] can never fire: "
        "whenever its guards hold, the earlier row -> Done [no guard] also matches, "
        "and comes first",
    ]
    assert str(error).startswith("chart Broken cannot be compiled:\n  - ")
    # The error's own fields locate the first problem.
    assert (error.state, error.input_kind) == ("CallingModel", "model_response")


# ---------------------------------------------------------------- the default chart

# SEMANTICS.md, "Rows of the default chart": (source, input, guards, target) in priority order
# within each (source, input). SEMANTICS.md does not list the driver's `Fail` input; its rows
# (every non-terminal phase -> Failed, action fail_run) are the last of each phase here.
NON_TERMINAL = (
    "CallingModel",
    "ExecutingTools",
    "NeedsApproval",
    "ApplyingHandoff",
    "Finalizing",
    "RepairingOutput",
    "Compacting",
    "CheckingOutput",
    "CheckingInput",
)
SEMANTICS_ROWS: tuple[tuple[str, str, tuple[str, ...], str], ...] = (
    ("CallingModel", "start", ("budget_exhausted",), "Failed"),
    ("CallingModel", "start", ("input_guarded", "output_only"), "CheckingInput"),
    ("CallingModel", "start", ("output_only",), "Finalizing"),
    ("CallingModel", "start", ("input_guarded",), "CheckingInput"),
    ("CallingModel", "start", (), "CallingModel"),
    ("CheckingInput", "guardrail_verdict", ("passed", "output_only"), "Finalizing"),
    ("CheckingInput", "guardrail_verdict", ("passed",), "CallingModel"),
    ("CheckingInput", "guardrail_verdict", (), "Failed"),
    ("CallingModel", "model_response", ("truncated",), "Failed"),
    ("CallingModel", "model_response", ("empty",), "Failed"),
    ("CallingModel", "model_response", ("duplicate_call_ids",), "Failed"),
    ("CallingModel", "model_response", ("has_handoff",), "ApplyingHandoff"),
    ("CallingModel", "model_response", ("needs_approval",), "NeedsApproval"),
    ("CallingModel", "model_response", ("has_tool_calls",), "ExecutingTools"),
    ("CallingModel", "model_response", ("has_output_type",), "Finalizing"),
    ("CallingModel", "model_response", ("output_guarded",), "CheckingOutput"),
    ("CallingModel", "model_response", (), "Done"),
    ("NeedsApproval", "approval_decisions", ("all_decided",), "ExecutingTools"),
    ("NeedsApproval", "approval_decisions", (), "NeedsApproval"),
    ("ExecutingTools", "tool_results", ("turn_limit_reached",), "Failed"),
    ("ExecutingTools", "tool_results", ("over_context_budget",), "Compacting"),
    ("ExecutingTools", "tool_results", ("budget_exhausted",), "Failed"),
    ("ExecutingTools", "tool_results", (), "CallingModel"),
    ("Compacting", "model_response", (), "CallingModel"),
    ("Finalizing", "model_response", ("not output_valid",), "RepairingOutput"),
    ("Finalizing", "model_response", ("output_guarded",), "CheckingOutput"),
    ("Finalizing", "model_response", (), "Done"),
    ("RepairingOutput", "model_response", ("not output_valid",), "Failed"),
    ("RepairingOutput", "model_response", ("output_guarded",), "CheckingOutput"),
    ("RepairingOutput", "model_response", (), "Done"),
    ("ApplyingHandoff", "handoff_result", ("not succeeded",), "Failed"),
    ("ApplyingHandoff", "handoff_result", ("output_guarded",), "CheckingOutput"),
    ("ApplyingHandoff", "handoff_result", (), "Done"),
    ("CheckingOutput", "guardrail_verdict", ("passed",), "Done"),
    ("CheckingOutput", "guardrail_verdict", (), "Failed"),
    *((phase, "cancel", (), "Failed") for phase in NON_TERMINAL),
    *((phase, "fail", (), "Failed") for phase in NON_TERMINAL),
)


def by_pair(rows: Any) -> dict[tuple[str, str], list[tuple[str, str, tuple[str, ...], str]]]:
    pairs: dict[tuple[str, str], list[tuple[str, str, tuple[str, ...], str]]] = {}
    for source, kind, guards, target in rows:
        pairs.setdefault((source, kind), []).append((source, kind, guards, target))
    return pairs


def test_the_default_chart_compiles_to_the_rows_of_semantics_md() -> None:
    table = compile_chart(AGENT_LOOP)
    declared = [
        (row.source, row.input_kind, tuple(map(str, row.guards)), row.target)
        for row in table.rows
        if not row.implicit
    ]
    assert by_pair(declared) == by_pair(SEMANTICS_ROWS)
    for (source, kind), expected in by_pair(SEMANTICS_ROWS).items():
        tried = [
            (r.source, r.input_kind, tuple(map(str, r.guards)), r.target)
            for r in table.rows_for(source, kind)
        ]
        assert tried == expected, (source, kind)


def test_the_default_table_is_total_with_implicit_rows() -> None:
    table = compile_chart(AGENT_LOOP)
    assert [row.index for row in table.rows] == list(range(len(table.rows)))
    for terminal in ("Done", "Failed"):
        assert table.phase(terminal).final
        for kind in ("start", "model_response", "cancel", "fail"):
            (row,) = table.rows_for(terminal, kind)
            assert (row.target, row.action, row.implicit) == (terminal, "absorb", True)
    (refused,) = table.rows_for("ExecutingTools", "model_response")
    assert (refused.target, refused.action, refused.implicit) == ("Failed", "reject_input", True)
    assert not any(phase.custom for phase in table.phases)


def test_the_table_is_frozen() -> None:
    table = compile_chart(AGENT_LOOP)
    with pytest.raises(dataclasses.FrozenInstanceError):
        table.rows = ()  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        table.rows[0].target = "Done"  # type: ignore[misc]
    with pytest.raises(TypeError):
        table.guard_docs["empty"] = "changed"  # type: ignore[index]
    assert isinstance(table.rows, tuple)


def test_the_digest_is_stable_and_tracks_the_rows() -> None:
    first, second = compile_chart(AGENT_LOOP), compile_chart(AGENT_LOOP)
    assert first is not second
    assert first.digest == second.digest == DEFAULT_TABLE.digest
    assert re.fullmatch(r"[0-9a-f]{64}", first.digest)
    assert compile_chart(tiny()).digest != first.digest


def test_custom_guards_and_actions_are_used() -> None:
    seen: list[str] = []

    def is_shouting(state: Any, inp: Any, ctx: TransitionCtx) -> bool:
        """The answer is in capitals."""
        seen.append("is_shouting")
        return any(
            isinstance(item, AssistantMessage) and item.content.isupper() for item in inp.items
        )

    def hush(state: Any, inp: Any, ctx: TransitionCtx, target: str) -> TransitionOutcome:
        """Finish with the answer in lower case."""
        output = FinalOutput("hushed", None, state.usage)
        return TransitionOutcome(Done(output), (), TERMINATE, ())

    chart = tiny(lambda c, d, f: c.to(d, cond="is_shouting", on="hush") | c.to(d, on="complete"))
    with pytest.raises(ChartDefinitionError, match="unknown guard 'is_shouting'"):
        compile_chart(chart)
    table = compile_chart(chart, guards={"is_shouting": is_shouting}, actions={"hush": hush})
    assert table.guard_docs["is_shouting"] == "The answer is in capitals."
    assert table.action_docs["hush"] == "Finish with the answer in lower case."

    ctx = TransitionCtx(table=table)
    loud = transition(CallingModel(), ModelResponse((AssistantMessage("HELLO"),)), ctx)
    quiet = transition(CallingModel(), ModelResponse((AssistantMessage("hello"),)), ctx)
    assert loud.next_state == Done(FinalOutput("hushed", None, CallingModel().usage))
    assert loud.events == ()
    assert isinstance(quiet.next_state, Done) and quiet.next_state.output.text == "hello"
    assert seen == ["is_shouting", "is_shouting"]


def test_a_custom_action_overrides_a_default_one_of_the_same_name() -> None:
    def complete(state: Any, inp: Any, ctx: TransitionCtx, target: str) -> TransitionOutcome:
        """Finish with a fixed text."""
        return TransitionOutcome(Done(FinalOutput("fixed", None, state.usage)), (), TERMINATE, ())

    table = compile_chart(AGENT_LOOP, actions={"complete": complete})
    ctx = TransitionCtx(table=table)
    outcome = transition(CallingModel(), ModelResponse((AssistantMessage("hi"),)), ctx)
    assert outcome.next_state == Done(FinalOutput("fixed", None, CallingModel().usage))
    assert table.digest == DEFAULT_TABLE.digest  # the same rows; only the function differs
    default = transition(
        CallingModel(), ModelResponse((AssistantMessage("hi"),)), TransitionCtx(table=DEFAULT_TABLE)
    )
    assert isinstance(default.next_state, Done) and default.next_state.output.text == "hi"


def test_a_spec_is_flat_until_nested_charts_are_supported() -> None:
    """The hierarchical fields exist, empty for every flat chart; filling them is refused
    when compiling, and a row from a phase the spec lacks when the spec is made."""
    spec = read_chart(AGENT_LOOP)
    assert spec.flat and not (spec.parents or spec.regions or spec.history)
    nested = dataclasses.replace(spec, parents={"ExecutingTools": "CallingModel"})
    with pytest.raises(ChartDefinitionError) as info:
        compile_chart(nested)
    assert problems(info.value) == [
        "state ExecutingTools: nested, parallel and history phases are not supported yet"
    ]
    stray = Row(0, "Nowhere", "start", (), "Done", "complete")
    with pytest.raises(ChartDefinitionError, match=r"state Nowhere, input start: chart .* no such"):
        dataclasses.replace(spec, rows=(*spec.rows, stray))
