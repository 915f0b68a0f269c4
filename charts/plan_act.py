"""Plan, then act: the model writes a plan before the tool loop starts.

A custom chart built on helikon's public API only; copy this file to start your own.

    Planning --start--> Planning        ask the model for a plan (its own prompt, no tools)
    Planning --model_response--> CallingModel
                                        keep the plan as an assistant message, open turn 0
    Planning --model_response [empty]--> Failed(EmptyModelResponse)

From CallingModel on, the rows are the default chart's, in the same order.
The planning call is not a turn: it is not counted against `max_turns`, but its usage is
counted. A planning response's tool calls are never run (the planning request offers no
tools); only its text is kept.

Why the whole chart is written out instead of subclassing `AgentLoopChart`: in
python-statemachine the initial state is fixed where the states are declared. A subclass
cannot move `initial=True` from CallingModel to Planning (two initial states are refused,
and a redeclared CallingModel comes without its rows), and rows added in a subclass to an
inherited state are added to the parent chart's State object too. A chart that starts
elsewhere therefore declares every state and row itself.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from statemachine import State

from helikon import (
    AssistantMessage,
    CallingModel,
    CustomPhase,
    Item,
    LoopChart,
    MessageOutput,
    TransitionCtx,
    TransitionOutcome,
    TransitionTable,
    TurnStarted,
    Usage,
    compile_chart,
)

# The shapes of a chart's named guards and actions (see helikon.core.chart.guards and .actions).
Guard = Callable[[Any, Any, TransitionCtx], bool]
Action = Callable[[Any, Any, TransitionCtx, str], TransitionOutcome]

PLANNING_PROMPT = (
    "Before doing anything, write a short numbered plan for the user's request: the steps, "
    "the tools each step needs, and how you will know you are done. Do not call tools yet."
)


class PlanActChart(LoopChart):
    """The default agent loop, preceded by one planning call."""

    prompts: ClassVar[dict[str, str]] = {"Planning": PLANNING_PROMPT}

    planning = State("Planning", initial=True)
    calling_model = State("CallingModel")
    executing_tools = State("ExecutingTools")
    approval = State("NeedsApproval")
    applying_handoff = State("ApplyingHandoff")
    finalizing = State("Finalizing")
    repairing_output = State("RepairingOutput")
    compacting = State("Compacting")
    done = State("Done", final=True)
    failed = State("Failed", final=True)

    start = planning.to(failed, cond="budget_exhausted", on="fail_budget") | planning.to.itself(
        on="start_planning"
    )
    model_response = (
        planning.to(failed, cond="empty", on="fail_empty")
        | planning.to(calling_model, on="record_plan")
        # The default chart's rows from here on.
        | calling_model.to(failed, cond="truncated", on="fail_truncated")
        | calling_model.to(failed, cond="empty", on="fail_empty")
        | calling_model.to(failed, cond="duplicate_call_ids", on="fail_duplicate_calls")
        | calling_model.to(applying_handoff, cond="has_handoff", on="apply_handoff")
        | calling_model.to(approval, cond="needs_approval", on="request_approval")
        | calling_model.to(executing_tools, cond="has_tool_calls", on="execute_tools")
        | calling_model.to(finalizing, cond="has_output_type", on="finalize")
        | calling_model.to(done, on="complete")
        | compacting.to(calling_model, on="apply_summary")
        | finalizing.to(done, cond="output_valid", on="complete_structured")
        | finalizing.to(repairing_output, on="repair")
        | repairing_output.to(done, cond="output_valid", on="complete_structured")
        | repairing_output.to(failed, on="fail_structured")
    )
    approval_decisions = approval.to(
        executing_tools, cond="all_decided", on="run_approved"
    ) | approval.to.itself(on="record_decisions")
    tool_results = (
        executing_tools.to(failed, cond="turn_limit_reached", on="fail_max_turns")
        | executing_tools.to(compacting, cond="over_context_budget", on="compact")
        | executing_tools.to(failed, cond="budget_exhausted", on="fail_budget")
        | executing_tools.to(calling_model, on="next_turn")
    )
    handoff_result = applying_handoff.to(
        done, cond="succeeded", on="complete_handoff"
    ) | applying_handoff.to(failed, on="fail_handoff")
    cancel = failed.from_.any(on="cancel_run")
    fail = failed.from_.any(on="fail_run")


def start_planning(state: Any, inp: Any, ctx: TransitionCtx, target: str) -> TransitionOutcome:
    """Append the user's input and ask the model for a plan (the Planning prompt, no tools)."""
    items: tuple[Item, ...] = inp.items
    next_state = CustomPhase(target, state.turn, state.usage)
    return TransitionOutcome(next_state, (), ctx.call_for(target), items)


def record_plan(state: Any, inp: Any, ctx: TransitionCtx, target: str) -> TransitionOutcome:
    """Keep the plan as an assistant message and open turn 0 of the tool loop."""
    text = "".join(item.content for item in inp.items if isinstance(item, AssistantMessage))
    plan = AssistantMessage(text)
    usage: Usage = state.usage + inp.usage
    turn: int = state.turn  # 0: planning is not a turn
    events = (MessageOutput(plan), TurnStarted(turn))
    next_state = CallingModel(turn, usage)  # the row's target: CallingModel
    return TransitionOutcome(next_state, events, ctx.call_for(target), (plan,))


PLAN_ACT: Any = PlanActChart
"""The plan-then-act chart class (pass it, or its table, where a chart is taken)."""

PLAN_ACT_GUARDS: Mapping[str, Guard] = {}
"""Custom guards: none; the chart names only the default ones (`empty`, ...)."""

PLAN_ACT_ACTIONS: Mapping[str, Action] = {
    "start_planning": start_planning,
    "record_plan": record_plan,
}
"""Custom actions, added to the default ones when the chart is compiled."""

PLAN_ACT_TABLE: TransitionTable = compile_chart(
    PLAN_ACT, guards=PLAN_ACT_GUARDS, actions=PLAN_ACT_ACTIONS
)
"""The compiled chart: `TransitionCtx(table=PLAN_ACT_TABLE, ...)`."""


# ---------------------------------------------------------------- an agent on this chart


def agent(model: Any) -> Any:
    """A research agent that plans before it acts, running on PLAN_ACT_TABLE."""
    from helikon import Agent, RunConfig, tool

    @tool(read_only=True)
    def search(query: str) -> list[str]:
        """Search the team's notes.

        Args:
            query: what to look for.
        """
        notes = {
            "launch": "Launch moved to 12 March; marketing needs the final copy by 5 March.",
            "budget": "Q1 budget approved: 40k EUR, 12k already committed.",
        }
        return [text for key, text in notes.items() if key in query.lower()]

    return Agent(
        name="planner",
        model=model,
        instructions="You answer questions about the team's plans using the notes.",
        tools=[search],
        chart=PLAN_ACT_TABLE,
        config=RunConfig(max_turns=6),
    )


def deps() -> None:
    return None


EXAMPLE_INPUT = "When is the launch, and what is due before it?"


def script() -> list[Any]:
    from helikon import ToolCall

    return [
        "1. Search the notes for the launch date. 2. Find what is due before it. 3. Answer.",
        [ToolCall("call_search", "search", '{"query": "launch"}')],
        "The launch is on 12 March; marketing needs the final copy by 5 March.",
    ]
