"""How fast is one step of the loop? `python bench/transition.py`

Prints, from one run on this machine, microseconds per operation for:

- helikon's `transition` on the common rows of the default chart;
- the same chart dispatched through python-statemachine's own engine (`send()`), guards
  answered by a model object, the same two-event tool cycle;
- the `transitions` library's plain dispatch of that cycle (if installed: the `bench` extra);
- a plain dict-lookup floor: a function with `transition`'s signature that looks the target
  phase up in a nested dict and returns it.

and the ratios the targets are stated in. Each figure is the best of several repeats of a
timed loop, so a noisy neighbour inflates it less; run twice when in doubt.
"""

from __future__ import annotations

import argparse
import sys
import timeit
from collections.abc import Callable
from typing import Any

from helikon import (
    AGENT_LOOP,
    DEFAULT_TABLE,
    ApprovalRequest,
    AssistantMessage,
    CallingModel,
    ModelResponse,
    Start,
    ToolCall,
    ToolResult,
    ToolResults,
    TransitionCtx,
    Usage,
    UserMessage,
    transition,
)
from helikon.core import ApprovalDecisions, Cancel, ExecutingTools, NeedsApproval

TARGET_VS_STATEMACHINE = 30.0
TARGET_VS_FLOOR = 25.0


def best_us(fn: Callable[[], Any], number: int, repeat: int) -> float:
    """Best per-call time in microseconds over `repeat` loops of `number` calls."""
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number * 1e6


def helikon_rows() -> dict[str, Callable[[], Any]]:
    ctx = TransitionCtx(table=DEFAULT_TABLE, tools={"lookup": "allow", "pay": "ask"})
    usage = Usage(120, 18, 138, 1)
    calling = CallingModel(3, Usage(400, 60, 460, 3))
    call = ToolCall("call_1", "lookup", '{"q": "coffee"}')
    tool_response = ModelResponse((call,), usage, "tool_calls")
    text_response = ModelResponse((AssistantMessage("You spent 42.50 EUR."),), usage)
    executing = ExecutingTools((call,), 3, Usage(400, 60, 460, 3))
    results = ToolResults((ToolResult("call_1", '{"total": 42.5}'),))
    pay = ToolCall("call_2", "pay", '{"amount": 10}')
    request = ApprovalRequest.for_call(pay)
    waiting = NeedsApproval((request,), (), 3, Usage(), (pay,))
    decisions = ApprovalDecisions((request.approve(),))
    start = Start((UserMessage("How much did I spend on coffee?"),))
    return {
        "CallingModel + start": lambda: transition(CallingModel(), start, ctx),
        "CallingModel + model_response -> ExecutingTools": lambda: transition(
            calling, tool_response, ctx
        ),
        "ExecutingTools + tool_results -> CallingModel": lambda: transition(
            executing, results, ctx
        ),
        "CallingModel + model_response -> Done": lambda: transition(calling, text_response, ctx),
        "NeedsApproval + approval_decisions": lambda: transition(waiting, decisions, ctx),
        "ExecutingTools + cancel": lambda: transition(executing, Cancel("user"), ctx),
    }


def tool_cycle_inputs() -> tuple[Any, Any, TransitionCtx, Any]:
    ctx = TransitionCtx(table=DEFAULT_TABLE)
    call = ToolCall("call_1", "lookup", "{}")
    return (
        ModelResponse((call,), Usage(1, 1, 2, 1), "tool_calls"),
        ToolResults((ToolResult("call_1", "ok"),)),
        ctx,
        CallingModel(0),
    )


def helikon_cycle() -> Callable[[], Any]:
    """The two-event tool cycle (model_response, tool_results) through `transition`."""
    response, results, ctx, calling = tool_cycle_inputs()
    executing = transition(calling, response, ctx).next_state

    def cycle() -> None:
        transition(calling, response, ctx)
        transition(executing, results, ctx)

    return cycle


def floor_cycle() -> Callable[[], Any]:
    """The dict-lookup floor: transition's signature, two lookups, no semantics."""
    floor: dict[str, dict[str, str]] = {}
    for row in DEFAULT_TABLE.rows:
        floor.setdefault(row.source, {}).setdefault(row.input_kind, row.target)

    def lookup(state: Any, inp: Any, ctx: Any) -> str:
        return floor[state.phase][inp.kind]

    response, results, ctx, calling = tool_cycle_inputs()
    executing = transition(calling, response, ctx).next_state

    def cycle() -> None:
        lookup(calling, response, ctx)
        lookup(executing, results, ctx)

    return cycle


class GuardAnswers:
    """python-statemachine's model: guards answer so the tool cycle is taken."""

    def __init__(self) -> None:
        self.state = "calling_model"
        for row in DEFAULT_TABLE.rows:
            for guard in row.guards:
                setattr(self, guard.name, guard.name == "has_tool_calls")
            setattr(self, row.action, _noop)


def _noop(*args: Any, **kwargs: Any) -> None:
    return None


def statemachine_cycle() -> Callable[[], Any]:
    machine = AGENT_LOOP(model=GuardAnswers())

    def cycle() -> None:
        machine.send("model_response")
        machine.send("tool_results")

    cycle()
    assert machine.current_state_value == "calling_model", machine.current_state_value
    return cycle


def transitions_cycle() -> Callable[[], Any] | None:
    try:
        from transitions import Machine
    except ImportError:
        return None

    class Model:
        pass

    model = Model()
    machine_transitions = []
    for row in DEFAULT_TABLE.rows:
        if row.implicit:
            continue
        conditions = [lambda *a, g=g: g.name == "has_tool_calls" for g in row.guards]
        machine_transitions.append(
            {
                "trigger": row.input_kind,
                "source": row.source,
                "dest": row.target,
                "conditions": conditions,
            }
        )
    phases = [phase.name for phase in DEFAULT_TABLE.phases]
    Machine(model, states=phases, transitions=machine_transitions, initial="CallingModel")

    def cycle() -> None:
        model.model_response()  # type: ignore[attr-defined]
        model.tool_results()  # type: ignore[attr-defined]

    cycle()
    assert model.state == "CallingModel"  # type: ignore[attr-defined]
    return cycle


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer iterations")
    args = parser.parse_args(argv)
    number, repeat = (2_000, 3) if args.quick else (20_000, 7)

    from helikon.core.values import STRICT_VALUES

    print(f"python {sys.version.split()[0]}; best of {repeat} x {number} calls; ", end="")
    print(f"HELIKON_STRICT_VALUES={'1' if STRICT_VALUES else 'unset'}\n")
    print("helikon transition, per row:")
    for name, fn in helikon_rows().items():
        print(f"  {best_us(fn, number, repeat):8.3f} us  {name}")

    per_event = {
        "dict floor": best_us(floor_cycle(), number, repeat) / 2,
        "helikon transition": best_us(helikon_cycle(), number, repeat) / 2,
        "python-statemachine send()": best_us(statemachine_cycle(), max(number // 20, 200), repeat)
        / 2,
    }
    cycle = transitions_cycle()
    if cycle is not None:
        per_event["transitions dispatch"] = best_us(cycle, max(number // 5, 500), repeat) / 2

    print("\nthe tool cycle (model_response, tool_results), per event:")
    for name, us in per_event.items():
        print(f"  {us:8.3f} us  {name}")

    ours = per_event["helikon transition"]
    vs_psm = per_event["python-statemachine send()"] / ours
    vs_floor = ours / per_event["dict floor"]
    print("\nratios:")
    print(f"  {vs_psm:7.1f}x faster than python-statemachine (target >= {TARGET_VS_STATEMACHINE}x)")
    if "transitions dispatch" in per_event:
        vs_tr = per_event["transitions dispatch"] / ours
        print(f"  {vs_tr:7.1f}x faster than transitions (target > 1x)")
    print(f"  {vs_floor:7.1f}x the dict floor (target <= {TARGET_VS_FLOOR}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
