"""helikon.mcp against servers that misbehave: tests/mcp_hostile_server.py (JSON-RPC by hand:
odd listings, garbage, invalid and huge answers, silence, sudden death), servers that die in
the middle of a call over stdio and over HTTP, and servers that never start.

Whatever the server does, a call ends in an error result the model reads or in a
`FatalToolError` that fails the run, and every run's stream ends with exactly one terminal
event: never a traceback out of the run.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from driver_support import drain, ends_once
from mcp_support import hostile, http_server, weather_station

from helikon import (
    Agent,
    RunCompleted,
    RunConfig,
    RunFailed,
    ScriptedModel,
    ToolCall,
    ToolContext,
    ToolFailed,
    ToolResult,
)
from helikon.core import ToolsUnavailable
from helikon.mcp import MCPServer, MCPServerError

CONTEXT: ToolContext[Any] = ToolContext("run-1", "call-1", "tester", None)
LISTED = [
    *["echo", "garbage", "silent", "bad_result"],
    *["huge", "protocol_error", "is_error", "image", "structured_bad", "die"],
    "trusting",
]


async def invoke(server: MCPServer, name: str, arguments: str = "{}") -> ToolResult:
    tools = {each.name: each for each in await server.list_tools()}
    return await tools[name].invoke(ToolCall("call-1", name, arguments), CONTEXT)


def outputs(events: list[Any]) -> dict[str, ToolResult]:
    return {e.item.call_id: e.item for e in events if e.type == "tool_output_item"}


# -- listings ---------------------------------------------------------------------------------


async def test_a_listing_over_pages_keeps_the_good_tools_and_says_why_the_others_are_out() -> None:
    async with hostile(trust_hints=True) as server:
        tools = await server.list_tools()
    assert [t.name for t in tools] == LISTED
    assert server.skipped == {
        "bad_schema": "tool 'bad_schema': its schema is not valid JSON Schema: "
        "'strin' is not valid under any of the given schemas",
        "has space": "tool name 'has space' must be 1-64 letters, digits, '_' or '-'",
        "dup": "the server lists it more than once",
    }
    assert [t.name for t in tools if t.read_only] == ["trusting"]
    assert len(server.listing) == 15  # every tool as the server sent it


@pytest.mark.parametrize(
    ("mode", "problem"),
    [
        ("circle", "its tool list pages in a circle (cursor 'a' came back)"),
        ("endless", "its tool list did not end within 100 pages"),
        (
            "broken-list",
            "listing its tools failed: the server's answer is not valid MCP "
            "(tools.1.inputSchema.type: Input should be 'object'; "
            "tools.2.inputSchema: Field required)",
        ),
    ],
)
async def test_a_listing_that_is_not_one_fails_the_run_in_one_event(
    mode: str, problem: str
) -> None:
    model = ScriptedModel(["never"])
    async with hostile(mode) as server:
        with pytest.raises(MCPServerError) as refused:
            await server.list_tools()
        events = await drain(Agent("a", model, mcp_servers=[server]).run("go"))
    assert str(refused.value).endswith(problem)
    failed = ends_once(events, RunFailed)
    assert failed.error == ToolsUnavailable(server.name, str(refused.value))
    assert model.requests == []


# -- answers ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("bad_result", "error: MCPToolError: the server's answer is not valid MCP (content: "),
        ("huge", "error: MCPToolError: the result is 300000 characters long"),
        (
            "protocol_error",
            "error: MCPToolError: the server refused the call: internal failure (code -32603)",
        ),
        ("is_error", "error: MCPToolError: the tool failed: disk full"),
        (
            "structured_bad",
            "error: MCPToolError: the server's answer was refused: its structured content "
            "breaks the output schema of tool 'structured_bad': n: 'not a number' is not of "
            "type 'integer'",
        ),
        ("silent", "error: tool 'silent' timed out after 0.5 seconds"),
    ],
)
async def test_a_bad_answer_is_an_error_result_and_the_connection_lives_on(
    name: str, content: str
) -> None:
    async with hostile(timeout=0.5) as server:
        result = await invoke(server, name)
        after = await invoke(server, "echo", '{"text": "still here"}')
    assert (result.is_error, result.status) == (True, "errored")
    assert result.content.startswith(content)
    assert after == ToolResult("call-1", '{"text": "still here"}')


async def test_a_garbage_line_before_the_answer_is_skipped() -> None:
    async with hostile() as server:
        assert (await invoke(server, "garbage")).content == "after the garbage"


async def test_content_that_is_not_text_is_named_not_shown() -> None:
    async with hostile() as server:
        result = await invoke(server, "image")
    assert result.content == "[image: image/png, 6 bytes, not shown]\na caption"


async def test_every_hostile_answer_in_one_batch_gets_exactly_one_result() -> None:
    names = [n for n in LISTED if n != "die"]
    calls = [ToolCall(f"c{i}", name, "{}") for i, name in enumerate(names)]
    model = ScriptedModel([calls, "survived"])
    async with hostile(timeout=0.5, needs_approval=False) as server:
        events = await drain(Agent("a", model, mcp_servers=[server]).run("go"))
    ends_once(events, RunCompleted)
    results = outputs(events)
    assert sorted(results) == sorted(call.call_id for call in calls)
    errored = {names[int(k[1:])] for k, r in results.items() if r.is_error}
    assert errored == {
        *["silent", "bad_result", "huge", "protocol_error", "is_error", "structured_bad"]
    }


# -- schemas slow to check --------------------------------------------------------------------

A24 = "a" * 23 + "!"  # 24 characters: `^(a+)+$` backtracks about a second on them in `re`


@contextlib.asynccontextmanager
async def loop_latency() -> AsyncIterator[list[float]]:
    """The longest the event loop was held (seconds) while the block ran, in `worst[0]`."""
    worst = [0.0]

    async def tick() -> None:
        while True:
            started = time.monotonic()
            await asyncio.sleep(0.01)
            worst[0] = max(worst[0], time.monotonic() - started - 0.01)

    ticker = asyncio.create_task(tick())
    await asyncio.sleep(0)
    try:
        yield worst
    finally:
        await asyncio.sleep(0.05)  # a tick the block delayed is still to be counted
        ticker.cancel()


ITEMS = [{"n": n} for n in range(500)]  # pairwise: about a second


@pytest.mark.parametrize(
    ("name", "arguments", "error"),
    [
        ("pattern", {"text": A24}, f"text: {A24!r} does not match '^(a+)+$'"),
        ("pattern_keys", {A24: 1, "aa": "y"}, "aa: 'y' is not of type 'integer'"),
        ("only_pattern_keys", {A24: 1}, f"(root): Additional properties are not allowed ({A24!r}"),
        ("key_names", {A24: 1}, f"(root): {A24!r} does not match '^(a+)+$'"),
        ("unique", {"items": [[1], [1.0]]}, "items: [[1], [1.0]] has non-unique elements"),
        ("unique", {"items": [*ITEMS, {"n": 0}]}, "items: [{'n': 0}, {'n': 1}, "),
        ("fan_out", {"a": 1}, "(TooCostly: the check took over 1000 steps plus"),
    ],
)
async def test_a_schema_slow_to_check_never_holds_the_loop(
    name: str, arguments: dict[str, Any], error: str
) -> None:
    model = ScriptedModel([[ToolCall("c0", name, json.dumps(arguments))], "checked"])
    async with hostile("slow-schemas", needs_approval=False) as server:
        agent = Agent("a", model, mcp_servers=[server])
        async with loop_latency() as worst:
            events = await drain(agent.run("go", config=RunConfig(timeout=30)))
    ends_once(events, RunCompleted)
    assert worst[0] < 0.5  # `re`, uniqueItems pairwise, or the fan-out held it a second or more
    result = outputs(events)["c0"]
    assert result.is_error
    assert error in result.content


async def test_a_pattern_re2_cannot_compile_leaves_its_tool_out() -> None:
    async with hostile("slow-schemas") as server:
        tools = await server.list_tools()
    assert "backreference" not in [each.name for each in tools]
    assert server.skipped == {
        "backreference": "tool 'backreference': its schema has a pattern that cannot be "
        "checked in linear time: RE2 cannot compile the pattern '^(a)\\\\1$': "
        "invalid escape sequence: \\1"
    }


@pytest.mark.parametrize(
    ("name", "error"),
    [
        (
            "evil_output",
            "error: MCPToolError: the server's answer was refused: its structured content "
            f"breaks the output schema of tool 'evil_output': text0: {A24!r} does not match "
            "'^(a+)+$'",
        ),
        ("fan_output", "(TooCostly: the check took over 1000 steps plus"),
        (
            "no_structure",
            "error: MCPToolError: the server's answer was refused: tool 'no_structure' has an "
            "output schema, but the answer has no structured content",
        ),
    ],
)
async def test_an_output_schema_slow_to_check_never_holds_the_loop(name: str, error: str) -> None:
    model = ScriptedModel([[ToolCall("c0", name, "{}")], "checked"])
    async with hostile("slow-output", needs_approval=False) as server:
        agent = Agent("a", model, mcp_servers=[server])
        async with loop_latency() as worst:
            events = await drain(agent.run("go", config=RunConfig(timeout=30)))
    ends_once(events, RunCompleted)
    assert worst[0] < 0.5  # the SDK's own check (jsonschema on `re`) held it a second or more
    result = outputs(events)["c0"]
    assert result.is_error
    assert error in result.content


async def test_an_output_schema_re2_cannot_compile_leaves_its_tool_out() -> None:
    async with hostile("slow-output") as server:
        tools = await server.list_tools()
    assert [each.name for each in tools] == ["evil_output", "no_structure", "fan_output"]
    assert server.skipped == {
        "backreference_output": "tool 'backreference_output': its output schema has a pattern "
        "that cannot be checked in linear time: RE2 cannot compile the pattern '^(a)\\\\1$': "
        "invalid escape sequence: \\1"
    }


# -- dying ------------------------------------------------------------------------------------


async def test_a_stdio_server_that_dies_mid_call_fails_the_run_in_one_event() -> None:
    calls = [ToolCall("c0", "echo", '{"text": "first"}'), ToolCall("c1", "die", "{}")]
    model = ScriptedModel([calls, "never"])
    async with hostile(needs_approval=False) as server:
        events = await drain(Agent("a", model, mcp_servers=[server]).run("go"))
        assert not server.connected
        with pytest.raises(MCPServerError, match="closed during a call of 'die'"):
            await server.refresh()
        await server.connect()  # a dead connection is replaced by a new one
        assert (await invoke(server, "echo", '{"text": "back"}')).content == '{"text": "back"}'
    failed = ends_once(events, RunFailed)
    assert failed.error == ToolFailed(
        "die", "c1", f"MCP server {server.name!r} closed the connection during a call of 'die'"
    )
    assert len(model.requests) == 1


async def test_an_http_server_that_dies_mid_call_fails_the_run_in_one_event() -> None:
    model = ScriptedModel([[ToolCall("c0", "die", "{}")], "never"])
    with http_server() as url:
        async with weather_station("http", url, needs_approval=False) as server:
            events = await drain(Agent("a", model, mcp_servers=[server]).run("go"))
    failed = ends_once(events, RunFailed)
    assert isinstance(failed.error, ToolFailed)
    assert failed.error.message.endswith("closed the connection during a call of 'die'")


async def test_a_server_that_dies_between_runs_fails_the_next_run_at_its_first_call() -> None:
    async with hostile(needs_approval=False) as server:
        first = Agent(
            "a", ScriptedModel([[ToolCall("c0", "die", "{}")], "x"]), mcp_servers=[server]
        )
        ends_once(await drain(first.run("go")), RunFailed)
        model = ScriptedModel([[ToolCall("c0", "echo", "{}")], "never"])
        events = await drain(Agent("a", model, mcp_servers=[server]).run("again"))
    assert ends_once(events, RunFailed).error.kind == "tool_failed"


# -- never connecting -------------------------------------------------------------------------


async def test_a_command_that_does_not_exist_is_a_connection_error() -> None:
    server = MCPServer(stdio=["/nonexistent/helikon-mcp-server"], name="ghost")
    with pytest.raises(MCPServerError, match="MCP server 'ghost': could not connect: "):
        await server.connect()
    assert not server.connected


async def test_a_server_that_exits_at_once_is_a_connection_error() -> None:
    server = MCPServer(stdio=[sys.executable, "-c", "pass"], name="quitter")
    with pytest.raises(MCPServerError, match="MCP server 'quitter': could not connect: "):
        await server.connect()


async def test_a_server_that_never_answers_the_handshake_times_out() -> None:
    mute = [sys.executable, "-c", "import time; time.sleep(60)"]
    server = MCPServer(stdio=mute, name="mute", connect_timeout=0.5)
    started = time.monotonic()
    with pytest.raises(MCPServerError, match=r"'mute': did not connect within 0\.5 seconds"):
        await server.connect()
    assert time.monotonic() - started < 8
    assert not server.connected


async def test_nothing_listening_at_the_url_is_a_connection_error() -> None:
    with http_server() as url:
        pass  # the server has stopped: its port is closed
    with pytest.raises(MCPServerError, match="could not connect: "):
        await MCPServer(url=url).connect()
