"""helikon.mcp against real MCP servers: the same behaviour over every transport.

Each test runs against tests/mcp_server.py (the official SDK's server) started as a stdio
subprocess, served over streamable HTTP on a loopback port, and in process. Nothing is
mocked: listings, calls and results cross the real protocol.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from driver_support import drain, ends_once
from mcp_support import TRANSPORTS, http_server, weather_station

from helikon import (
    Agent,
    RunCompleted,
    RunConfig,
    RunFailed,
    RunSuspended,
    ScriptedModel,
    ToolCall,
    ToolContext,
    ToolPolicy,
    ToolResult,
)
from helikon.core import ToolsUnavailable
from helikon.mcp import MCPServer, MCPServerError

CONTEXT: ToolContext[Any] = ToolContext("run-1", "call-1", "tester", None)
SERVED = [
    "add",
    "weather",
    "notes",
    "wipe",
    "archive",
    "fail",
    "slow",
    "huge",
    "die",
    "traceparent",
]


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with http_server() as served:
        yield served


@pytest.fixture(params=TRANSPORTS)
def transport(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def station(transport: str, url: str, **options: Any) -> MCPServer:
    return weather_station(transport, url, **options)


async def invoke(server: MCPServer, name: str, arguments: str) -> ToolResult:
    tools = {each.name: each for each in await server.list_tools()}
    return await tools[name].invoke(ToolCall("call-1", name, arguments), CONTEXT)


def outputs(events: list[Any]) -> dict[str, ToolResult]:
    return {e.item.call_id: e.item for e in events if e.type == "tool_output_item"}


# -- listing ---------------------------------------------------------------------------------


async def test_the_listing_keeps_the_servers_names_and_schemas(transport: str, url: str) -> None:
    async with station(transport, url) as server:
        assert server.listed is None
        tools = await server.list_tools()
        assert [each.name for each in tools] == SERVED
        add = tools[0]
        assert add.description == "Add two numbers."
        assert add.spec.parameters == server.listing[0].input_schema
        assert add.spec.parameters["required"] == ["a", "b"]
        assert server.listed == tools


async def test_a_name_the_model_apis_refuse_is_left_out_and_said_why(
    transport: str, url: str, caplog: pytest.LogCaptureFixture
) -> None:
    async with station(transport, url) as server:
        await server.list_tools()
    assert server.skipped == {
        "files.read": "tool name 'files.read' must be 1-64 letters, digits, '_' or '-'"
    }
    assert "tool 'files.read' left out" in caplog.text


async def test_the_listing_is_kept_until_refresh(url: str) -> None:
    transport = "in-process"
    async with station(transport, url) as server:
        first = await server.list_tools()
        assert await server.list_tools() is first
        again = await server.refresh()
        assert again is not first
        assert [t.name for t in again] == [t.name for t in first]
        assert server.listed is again


async def test_a_filter_by_names_or_predicate_and_a_prefix(url: str) -> None:
    transport = "in-process"  # the rules apply to the listing, whatever carried it
    async with station(transport, url, tool_filter=["add", "notes"], prefix="ws_") as server:
        assert [t.name for t in await server.list_tools()] == ["ws_add", "ws_notes"]
        assert (await invoke(server, "ws_add", '{"a": 1, "b": 2}')).content == "3"

    def annotated(listed: Any) -> bool:
        return listed.annotations is not None

    async with station(transport, url, tool_filter=annotated) as server:
        assert [t.name for t in await server.list_tools()] == ["add", "weather", "archive"]


async def test_listing_before_connecting_is_refused(transport: str, url: str) -> None:
    server = station(transport, url)
    with pytest.raises(MCPServerError, match="is not connected"):
        await server.list_tools()


# -- approvals: hints only tighten ------------------------------------------------------------


async def test_hints_only_ever_ask_for_approval(transport: str, url: str) -> None:
    async with station(transport, url) as server:
        tools = {t.name: t for t in await server.list_tools()}
    asks = {name: t.needs_approval for name, t in tools.items()}
    # add: destructiveHint false; archive: destructiveHint false; the rest: absent (true).
    # weather's readOnlyHint is not believed without trust_hints.
    assert asks == {name: name not in ("add", "archive") for name in SERVED}
    assert not any(t.read_only for t in tools.values())


async def test_trusted_hints_make_read_only_tools(transport: str, url: str) -> None:
    async with station(transport, url, trust_hints=True) as server:
        tools = {t.name: t for t in await server.list_tools()}
    assert {n for n, t in tools.items() if t.read_only} == {"add", "weather"}
    assert {n for n, t in tools.items() if not t.needs_approval} == {"add", "weather", "archive"}


async def test_the_users_word_on_approval_wins(url: str) -> None:
    transport = "in-process"
    async with station(transport, url, needs_approval=False) as server:
        assert not any(t.needs_approval for t in await server.list_tools())
    async with station(transport, url, needs_approval=lambda t: t.name == "add") as server:
        tools = await server.list_tools()
        assert [t.name for t in tools if t.needs_approval] == ["add"]


async def test_a_policy_for_side_effects_asks_for_untrusted_read_only_hints(url: str) -> None:
    transport = "in-process"
    policy = ToolPolicy(ask_for_side_effects=True)
    async with station(transport, url, needs_approval=False) as server:
        untrusted = policy.permissions(await server.list_tools())
    async with station(transport, url, needs_approval=False, trust_hints=True) as server:
        trusted = policy.permissions(await server.list_tools())
    assert untrusted["weather"] == "ask"
    assert trusted["weather"] == "allow"


# -- results ------------------------------------------------------------------------------------


RESULTS = [
    ("add", '{"a": 2, "b": 40}', "42"),  # {"result": 42} unwrapped
    ("weather", '{"city": "Oslo"}', '{"city":"Oslo","temp":21.5}'),
    ("notes", '{"topic": "tides"}', "notes on tides"),  # text content only
    ("archive", '{"path": "a.txt"}', "archived a.txt"),  # {"result": str}: the text
]


async def test_results_are_the_tools_json_value_or_its_text(transport: str, url: str) -> None:
    async with station(transport, url) as server:
        got = [await invoke(server, name, arguments) for name, arguments, _ in RESULTS]
    assert got == [ToolResult("call-1", content) for _, _, content in RESULTS]


async def test_a_tool_that_fails_is_an_error_result(transport: str, url: str) -> None:
    async with station(transport, url) as server:
        result = await invoke(server, "fail", '{"reason": "no disk"}')
    assert (result.is_error, result.status) == (True, "errored")
    assert result.content.startswith("error: MCPToolError: the tool failed: ")


async def test_bad_arguments_are_the_models_to_fix_and_never_sent(transport: str, url: str) -> None:
    async with station(transport, url) as server:
        result = await invoke(server, "add", '{"a": "two"}')
    assert result.is_error
    assert result.content == (
        "error: invalid arguments for tool 'add':\n"
        "- (root): 'b' is a required property\n"
        "- a: 'two' is not of type 'integer'"
    )


async def test_a_lone_surrogate_is_an_error_result_and_the_connection_lives_on(
    transport: str, url: str
) -> None:
    async with station(transport, url) as server:
        refused = await invoke(server, "notes", '{"topic": "\\ud800"}')
        after = await invoke(server, "notes", '{"topic": "tides"}')
    assert refused.is_error
    assert "lone surrogate" in refused.content
    assert after.content == "notes on tides"


async def test_a_result_over_the_limit_is_an_error_result(transport: str, url: str) -> None:
    async with station(transport, url, max_result_chars=1000) as server:
        fits = await invoke(server, "huge", '{"size": 1000}')
        over = await invoke(server, "huge", '{"size": 1001}')
    assert fits.content == "x" * 1000
    assert over.is_error
    assert "1001 characters long, over this server's limit of 1000" in over.content


async def test_a_call_over_the_timeout_is_an_error_result(transport: str, url: str) -> None:
    # The timeout is far above what the quick call takes, even on a loaded machine.
    async with station(transport, url, timeout=2.0) as server:
        slow = await invoke(server, "slow", '{"seconds": 60}')
        quick = await invoke(server, "add", '{"a": 1, "b": 1}')
    assert slow.content == "error: tool 'slow' timed out after 2 seconds"
    assert quick.content == "2"


async def test_a_call_after_close_is_fatal(transport: str, url: str) -> None:
    from helikon import FatalToolError

    server = station(transport, url)
    async with server:
        tools = {t.name: t for t in await server.list_tools()}
    with pytest.raises(FatalToolError, match="is not connected"):
        await tools["add"].invoke(ToolCall("c", "add", '{"a": 1, "b": 1}'), CONTEXT)


# -- runs -------------------------------------------------------------------------------------


def calls(*pairs: tuple[str, str]) -> list[ToolCall]:
    return [ToolCall(f"c{i}", name, arguments) for i, (name, arguments) in enumerate(pairs)]


async def test_a_run_lists_the_servers_tools_and_calls_them(transport: str, url: str) -> None:
    model = ScriptedModel(
        [calls(("add", '{"a": 1, "b": 2}'), ("notes", '{"topic": "x"}')), "three"]
    )
    async with station(transport, url, needs_approval=False) as server:
        agent = Agent("a", model, mcp_servers=[server])
        result = agent.run("add them")
        events = await drain(result)
    ends_once(events, RunCompleted)
    assert [spec.name for spec in model.requests[0].tools] == SERVED
    assert result.run is not None and result.run.tool_specs == model.requests[0].tools
    assert {k: r.content for k, r in outputs(events).items()} == {"c0": "3", "c1": "notes on x"}


async def test_a_destructive_tool_suspends_the_run_for_approval_then_resumes(
    transport: str, url: str
) -> None:
    model = ScriptedModel([calls(("add", '{"a": 1, "b": 2}'), ("wipe", '{"path": "/"}')), "ok"])
    async with station(transport, url) as server:
        agent = Agent("a", model, mcp_servers=[server])
        first = await agent.run("go").collect()
        assert isinstance(first.events[-1], RunSuspended)
        assert [r.call.name for r in first.pending] == ["wipe"]
        assert first.snapshot is not None
        second = agent.resume(first.snapshot, [first.pending[0].reject("no")])
        events = await drain(second)
    ends_once(events, RunCompleted)
    assert {k: r.status for k, r in outputs(events).items()} == {
        "c0": "executed",
        "c1": "rejected",
    }


async def test_a_run_with_a_server_that_is_not_connected_fails_in_one_event(
    transport: str, url: str
) -> None:
    model = ScriptedModel(["never"])
    server = station(transport, url)
    events = await drain(Agent("a", model, mcp_servers=[server]).run("go"))
    failed = ends_once(events, RunFailed)
    assert isinstance(failed.error, ToolsUnavailable)
    assert failed.error.source == server.name
    assert "is not connected" in failed.error.message
    assert model.requests == []


async def test_two_servers_with_the_same_tools_need_a_prefix(transport: str, url: str) -> None:
    model = ScriptedModel(
        [calls(("a_add", '{"a": 1, "b": 2}'), ("b_add", '{"a": 3, "b": 4}')), "x"]
    )
    async with station(transport, url) as one, station("in-process", url) as two:
        clash = await drain(Agent("a", ScriptedModel(["x"]), mcp_servers=[one, two]).run("go"))
        error = ends_once(clash, RunFailed).error
        assert isinstance(error, ToolsUnavailable)
        assert "give the source a prefix" in error.message
    async with (
        station(transport, url, prefix="a_", needs_approval=False) as one,
        station("in-process", url, prefix="b_", needs_approval=False) as two,
    ):
        events = await drain(Agent("a", model, mcp_servers=[one, two]).run("go"))
    ends_once(events, RunCompleted)
    assert {k: r.content for k, r in outputs(events).items()} == {"c0": "3", "c1": "7"}


async def test_many_calls_at_once_on_one_connection(transport: str, url: str) -> None:
    pairs = [("add", f'{{"a": {i}, "b": 1}}') for i in range(8)]
    model = ScriptedModel([calls(*pairs), "done"])
    async with station(transport, url, needs_approval=False) as server:
        events = await drain(Agent("a", model, mcp_servers=[server]).run("go"))
    ends_once(events, RunCompleted)
    assert [r.content for r in outputs(events).values()] == [str(i + 1) for i in range(8)]


async def test_the_runs_deadline_stops_a_slow_mcp_call(transport: str, url: str) -> None:
    model = ScriptedModel([calls(("slow", '{"seconds": 30}')), "never"])
    async with station(transport, url, needs_approval=False) as server:
        agent = Agent("a", model, mcp_servers=[server])
        started = asyncio.get_running_loop().time()
        events = await drain(agent.run("go", config=RunConfig(timeout=0.5)))
        assert asyncio.get_running_loop().time() - started < 10
        after = await invoke(server, "add", '{"a": 1, "b": 1}')
    assert ends_once(events, RunFailed).error.kind == "timed_out"
    assert after.content == "2"  # the cancelled call left the connection usable


def changing_server() -> Any:
    """A low-level in-process server whose tool list grows at each listing, over pages."""
    from mcp.server import Server
    from mcp.types import CallToolResult, ListToolsResult, TextContent, Tool

    listings = {"count": 0}

    async def list_tools(context: Any, params: Any) -> ListToolsResult:
        page = int(params.cursor) if params is not None and params.cursor else 0
        if page == 0:
            listings["count"] += 1
        names = [f"v{listings['count']}_p{page}"]
        cursor = str(page + 1) if page < 2 else None
        tools = [Tool(name=n, input_schema={"type": "object"}) for n in names]
        return ListToolsResult(tools=tools, next_cursor=cursor)

    async def call_tool(context: Any, params: Any) -> CallToolResult:
        return CallToolResult(content=[TextContent(text=f"called {params.name}")])

    return Server("changing", on_list_tools=list_tools, on_call_tool=call_tool)


async def test_a_run_keeps_its_tools_when_the_server_is_refreshed_during_it() -> None:
    from helikon import tool

    server = MCPServer(server=changing_server(), needs_approval=False)

    @tool
    async def relist() -> str:
        """List the server's tools again."""
        return ", ".join(t.name for t in await server.refresh())

    model = ScriptedModel(
        [calls(("relist", "{}"), ("v1_p1", "{}")), calls(("v1_p2", "{}")), "done"]
    )
    async with server:
        agent = Agent("a", model, tools=[relist], mcp_servers=[server])
        events = await drain(agent.run("go"))
        later = ScriptedModel(["fine"])
        await Agent("a", later, tools=[relist], mcp_servers=[server]).run("go").collect()
    ends_once(events, RunCompleted)
    offered = [[spec.name for spec in request.tools] for request in model.requests]
    assert offered == [["relist", "v1_p0", "v1_p1", "v1_p2"]] * 3  # one listing, three pages
    assert [e.item.content for e in events if e.type == "tool_output_item"] == [
        "v2_p0, v2_p1, v2_p2",
        "called v1_p1",
        "called v1_p2",
    ]
    assert [spec.name for spec in later.requests[0].tools] == ["relist", "v2_p0", "v2_p1", "v2_p2"]
