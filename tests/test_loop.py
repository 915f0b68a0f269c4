"""The loop's rules (helikon.run.loop), written once for both runtimes, and the claim that
only the loop dispatches on `NextAction`."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

from helikon import (
    Cancelled,
    FinalOutput,
    ModelResponse,
    RunConfig,
    TimedOut,
    ToolCall,
    ToolResult,
    ToolResults,
    Usage,
)
from helikon.core import Cancel, Fail, HandoffResult, MaxAgentDepthExceeded
from helikon.core.state import (
    AwaitApproval,
    CallModel,
    Done,
    ExecuteTools,
    Failed,
    Handoff,
    ModelRequest,
    NeedsApproval,
    RunEffect,
)
from helikon.run import loop

PACKAGE = Path(__file__).resolve().parents[1] / "helikon"
ACTIONS = {cls.__name__ for cls in (CallModel, ExecuteTools, AwaitApproval, Handoff, RunEffect)}
SPENT = Usage(3, 2, 5, 1)


def test_only_the_loop_dispatches_on_the_action() -> None:
    """No module of either runtime tests an action's class but the loop's: a rule written
    twice is a rule that drifts."""
    found = []
    for path in [*(PACKAGE / "run").glob("*.py"), *(PACKAGE / "temporal").glob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "isinstance":
                names = {n.id for n in ast.walk(node.args[1]) if isinstance(n, ast.Name)}
                if names & ACTIONS:
                    found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert found and all(place.startswith("run/loop.py:") for place in found), found


@pytest.mark.parametrize(
    ("stop", "observed", "expected"),
    [
        (None, ToolResults(()), ToolResults(())),  # no stop: the effect's input
        (Cancel("x"), Fail(TimedOut(1.0)), Fail(TimedOut(1.0))),  # a stop already won
        (Cancel("x"), Cancel("y"), Cancel("y")),
        (Cancel("x"), ModelResponse((), SPENT), Cancel("x", usage=SPENT)),  # paid for
        (
            Fail(TimedOut(2.0)),
            ToolResults((ToolResult("c1", "ok"),), SPENT),
            Fail(TimedOut(2.0), (ToolResult("c1", "ok"),), SPENT),  # keeps finished work
        ),
    ],
)
def test_a_stop_requested_while_an_effect_completed_wins(
    stop: Cancel | Fail | None, observed: Any, expected: Any
) -> None:
    assert loop.stop_wins(stop, observed) == expected


@pytest.mark.parametrize(("depth", "refused"), [(0, False), (1, False), (2, True), (5, True)])
def test_a_nested_run_past_the_depth_limit_is_refused(depth: int, refused: bool) -> None:
    error = loop.too_deep(depth, RunConfig(max_agent_depth=2), "helper")
    assert error == (MaxAgentDepthExceeded(2, "helper") if refused else None)


@pytest.mark.parametrize(
    ("budget", "spent", "left"),
    [(None, 50, None), (100, 30, 70), (100, 100, 1), (100, 250, 1)],
)
def test_a_nested_run_gets_only_the_budget_left(
    budget: int | None, spent: int, left: int | None
) -> None:
    config = RunConfig(token_budget=budget)
    assert loop.child_budget(config, Usage(0, spent, spent, 1)) == left


def test_a_handoff_result_is_its_target_end() -> None:
    output = FinalOutput("done", None, SPENT)
    assert loop.handoff_result(Done(output), "t") == HandoffResult(output, None, SPENT)
    error = TimedOut(1.0)
    assert loop.handoff_result(Failed(error, SPENT), "t") == HandoffResult(None, error, SPENT)
    suspended = loop.handoff_result(NeedsApproval(0, SPENT, (), ()), "t")
    assert isinstance(suspended.error, Cancelled) and "'t' waited for approval" in str(
        suspended.error.reason
    )


def test_a_batch_starts_at_most_its_limit_at_once() -> None:
    calls = tuple(ToolCall(f"c{i}", "echo", "{}") for i in range(3))
    assert loop.first_calls(ExecuteTools(calls), 2) == calls[:2]
    assert loop.first_calls(ExecuteTools(calls), None) == calls
    assert loop.first_calls(CallModel(ModelRequest("turn")), 2) == ()


def test_only_an_approval_awaits_decisions() -> None:
    assert loop.awaits_decisions(AwaitApproval(()))
    assert not loop.awaits_decisions(CallModel(ModelRequest("turn")))
    assert not loop.awaits_decisions(ExecuteTools(()))
