"""The offline demo: the reference run of SEMANTICS.md, stepped through `transition` by hand.

No model and no driver: the inputs a driver would observe are written out, so what prints is
exactly what the pure core decides.
"""

from __future__ import annotations

from typing import Any

from helikon.codec import dumps
from helikon.context import TransitionCtx
from helikon.items import AssistantMessage, ToolCall, ToolResult, Usage, UserMessage
from helikon.state import ModelResponse, Start, ToolResults
from helikon.transition import initial_state, match_row, transition


def reference_inputs() -> list[Any]:
    """A model that calls one tool, then answers in text."""
    return [
        Start((UserMessage("How much did I spend on coffee?"),)),
        ModelResponse(
            (ToolCall("call_1", "spending", '{"category": "coffee"}'),),
            Usage(120, 18, 138, 1),
            "tool_calls",
        ),
        ToolResults((ToolResult("call_1", '{"total": 42.5, "currency": "EUR"}'),)),
        ModelResponse(
            (AssistantMessage("You spent 42.50 EUR on coffee this month."),),
            Usage(160, 14, 174, 1),
        ),
    ]


def walk_through() -> str:
    ctx = TransitionCtx(agent="budget-assistant", tools={"spending": "allow"})
    state = initial_state(ctx)
    lines = ["The reference run, one transition per input:"]
    for seq, inp in enumerate(reference_inputs()):
        match = match_row(state, inp, ctx)
        outcome = transition(state, inp, ctx)
        guards = ", ".join(f"{name}={value}" for name, value in match.checked) or "none"
        lines.append(
            f"\n[{seq}] {state.phase} + {inp.kind} -> {outcome.next_state.phase}"
            f"   (row {match.row.index}, action {match.row.action}; guards checked: {guards})"
        )
        lines.extend(f"      event  {dumps(event)}" for event in outcome.events)
        lines.append(f"      next   {dumps(outcome.next_action)}")
        state = outcome.next_state
    return "\n".join(lines)
