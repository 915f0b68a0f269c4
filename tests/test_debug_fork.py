"""`helikon.debug.fork`: the words after `fork`, parsed."""

from __future__ import annotations

import pytest

from helikon.core.items import ToolCall, ToolResult
from helikon.debug.debugger import DebuggerError
from helikon.debug.fork import parse_fork, tool_results


@pytest.mark.parametrize(
    ("words", "parsed"),
    [
        (["text", "hi"], ("text", ["hi"], None)),
        (["text", "then", "then", "a"], ("text", ["then"], ["a"])),
        (["tool", "c1", "r1", "c2", "r2"], ("tool", ["c1", "r1", "c2", "r2"], None)),
        (["tool", "c1", "then", "then", "a", "b"], ("tool", ["c1", "then"], ["a", "b"])),
        (["effect", "{}", "then", "a"], ("effect", ["{}"], ["a"])),
        (["approve"], ("approve", [], None)),
        (["reject", "c1", "then", "ok"], ("reject", ["c1"], ["ok"])),
    ],
)
def test_parse_fork(words: list[str], parsed: tuple[str, list[str], list[str] | None]) -> None:
    assert parse_fork(words) == parsed


@pytest.mark.parametrize(
    "words",
    [
        [],
        ["text"],
        ["text", "a", "b"],
        ["effect"],
        ["effect", "1", "2"],
        ["tool", "c1"],
        ["tool", "c1", "r", "x"],
        ["approve", "then"],
        ["undo"],
    ],
)
def test_parse_fork_refuses(words: list[str]) -> None:
    with pytest.raises(DebuggerError, match="usage: fork text"):
        parse_fork(words)


def test_tool_results_keep_the_calls_order_and_recorded_results() -> None:
    calls = [ToolCall("a", "f", "{}"), ToolCall("b", "g", "{}")]
    recorded = [ToolResult("a", "old a"), ToolResult("b", "old b")]
    assert tool_results(calls, {"b": "new b"}, recorded) == (
        ToolResult("a", "old a"),
        ToolResult("b", "new b"),
    )
    with pytest.raises(DebuggerError, match="no result recorded for a \\(f\\): give one"):
        tool_results(calls, {"b": "new b"}, [])
