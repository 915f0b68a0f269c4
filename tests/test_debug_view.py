"""`helikon.debug.view`: the debugger's text, from hand-built values (no run needed)."""

from __future__ import annotations

from typing import Any

import pytest

from helikon.core.approvals import ApprovalDecision
from helikon.core.errors import Cancelled
from helikon.core.events import (
    MessageOutput,
    StructuredOutputFailed,
    TokenDelta,
    ToolCallDelta,
    ToolCallItem,
    TurnStarted,
)
from helikon.core.items import (
    AssistantMessage,
    FinalOutput,
    ToolCall,
    ToolResult,
    Usage,
    UserMessage,
)
from helikon.core.state import (
    TERMINATE,
    ApprovalDecisions,
    CallingModel,
    Cancel,
    ExecutingTools,
    Fail,
    HandoffResult,
    ModelResponse,
    Start,
    ToolResults,
    TransitionOutcome,
)
from helikon.core.table import GuardRef, Row
from helikon.core.transition import Match
from helikon.debug.debugger import Step
from helikon.debug.view import (
    clip,
    conversation_lines,
    describe_input,
    describe_row,
    event_lines,
    event_types,
    input_lines,
    match_lines,
    state_lines,
    step_line,
)

CALL = ToolCall("c1", "spending", '{"category": "coffee"}')
ROW = Row(
    7,
    "CallingModel",
    "model_response",
    (GuardRef("has_tool_calls"),),
    "ExecutingTools",
    "execute_tools",
)


def paint(text: str, *styles: str) -> str:
    return f"<{','.join(styles)}>{text}</>"


@pytest.mark.parametrize(
    ("inp", "text"),
    [
        (Start((UserMessage("hi"),)), "start: user: hi"),
        (
            ModelResponse((CALL,), finish_reason="tool_calls"),
            'model_response: call c1: spending({"category": "coffee"}) [tool_calls]',
        ),
        (ModelResponse(()), "model_response: (no items) [stop]"),
        (
            ToolResults((ToolResult("c1", "42", status="executed"),)),
            "tool_results: result c1 executed: 42",
        ),
        (
            ApprovalDecisions((ApprovalDecision("c1", "h", False, "too costly"),)),
            "approval_decisions: c1 rejected (too costly)",
        ),
        (HandoffResult(FinalOutput("done")), "handoff_result: output: done"),
        (
            HandoffResult(None, Cancelled("stop")),
            "handoff_result: failed: Cancelled(reason='stop')",
        ),
        (Cancel("user"), "cancel: user"),
        (Fail(Cancelled("x")), "fail: Cancelled(reason='x')"),
    ],
)
def test_describe_input_names_the_kind_and_what_it_carries(inp: Any, text: str) -> None:
    assert describe_input(inp) == text


def test_input_lines_put_each_item_on_its_line() -> None:
    results = ToolResults((ToolResult("a", "1"), ToolResult("b", "2", True, "errored")))
    assert input_lines(results) == [
        "tool_results",
        "  result a executed: 1",
        "  result b errored: 2",
    ]
    assert input_lines(ModelResponse((AssistantMessage("ok", "bot"),))) == [
        "model_response [stop]",
        "  assistant (bot): ok",
    ]
    assert input_lines(Cancel()) == ["cancel: (no reason)"]


def test_clip_keeps_one_line_and_cuts_long_text() -> None:
    assert clip("a\n  b") == "a b"
    assert clip("x" * 10, 5) == "xxxx…"


def test_rows_and_guards() -> None:
    assert describe_row(ROW) == (
        "row 7: CallingModel --model_response [has_tool_calls]--> ExecutingTools (execute_tools)"
    )
    match = Match(ROW, (("truncated", False), ("has_tool_calls", True)))
    assert match_lines(match, paint) == [
        describe_row(ROW),
        "  truncated       <dim>false</>",
        "  has_tool_calls  <green>true</>",
    ]
    assert match_lines(Match(ROW, ()))[1] == "  (no guard checked)"


def test_step_line() -> None:
    outcome = TransitionOutcome(ExecutingTools((CALL,), 0), (), TERMINATE)
    step = Step(2, CallingModel(), ModelResponse((CALL,)), Match(ROW, ()), outcome)
    assert (
        step_line(step)
        == "#2 CallingModel → ExecutingTools  on model_response · row 7 execute_tools"
    )
    assert step_line(step, paint).startswith("<bold>#2</> CallingModel")


def test_state_lines_show_items_one_a_line() -> None:
    state = ExecutingTools((CALL,), 1, Usage(requests=1))
    assert state_lines(state) == [
        "ExecutingTools",
        "  calls:",
        '    call c1: spending({"category": "coffee"})',
        "  turn: 1",
        '  usage: {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0, "requests": 1}',
        "  settled: []",
        "  context_tokens: 0",
    ]


def test_conversation_lines_are_numbered_and_aligned() -> None:
    items = [UserMessage("hi")] * 11
    lines = conversation_lines(items)
    assert (lines[0], lines[10]) == (" 0  user: hi", "10  user: hi")
    assert conversation_lines([]) == []


def test_event_lines_fold_streamed_deltas() -> None:
    events = [
        TurnStarted(0),
        ToolCallDelta("c1", '{"cat', "spending"),
        ToolCallDelta("c1", 'egory"}'),
        ToolCallItem(CALL),
        TokenDelta("Hello "),
        TokenDelta("there"),
        MessageOutput(AssistantMessage("Hello there")),
        StructuredOutputFailed(("bad",), "{}"),
    ]
    assert event_lines(events) == [
        "── turn 0",
        "  … streaming tool calls: spending",
        '  ⚙ spending({"category": "coffee"})',
        '  … streaming: "Hello there"',
        "Hello there",
        "  · structured_output_failed",
    ]
    assert "\x1b[" in event_lines([TurnStarted(0)], colour=True)[0]


def test_event_types_are_the_stream_s_tags() -> None:
    types = event_types()
    assert types[0] == "run_started"
    assert {"tool_call_item", "run_completed", "run_suspended"} <= set(types)
