"""`MCPServers`: servers connected in parallel, each within its timeout; strict, or dropping
the servers that fail. Real servers: tests/mcp_server.py over stdio and in process, a
command that does not exist, and one that never answers the handshake."""

from __future__ import annotations

import sys
import time

import pytest
from driver_support import drain, ends_once
from mcp_support import SERVER

from helikon import Agent, RunCompleted, ScriptedModel, ToolCall
from helikon.mcp import MCPServer, MCPServerError, MCPServers

MUTE = [sys.executable, "-c", "import time; time.sleep(60)"]


def good(name: str) -> MCPServer:
    return MCPServer(stdio=[sys.executable, SERVER], name=name, prefix=f"{name}_")


def ghost() -> MCPServer:
    return MCPServer(stdio=["/nonexistent/helikon-mcp-server"], name="ghost")


def mute(name: str = "mute") -> MCPServer:
    return MCPServer(stdio=MUTE, name=name, connect_timeout=1.0)


async def test_servers_that_fail_are_dropped_and_the_rest_connect() -> None:
    one, two, lost, slow = good("one"), good("two"), ghost(), mute()
    async with MCPServers([one, lost, two, slow]) as group:  # each within its own timeout
        assert group.active == [one, two]
        assert set(group.failed) == {lost, slow}
        assert "could not connect" in str(group.failed[lost])
        assert "did not connect within 1 seconds" in str(group.failed[slow])
        assert one.connected and two.connected
    assert not one.connected and not two.connected
    assert group.active == []


async def test_servers_connect_in_parallel() -> None:
    servers = [mute(f"mute{i}") for i in range(4)]
    started = time.monotonic()
    async with MCPServers(servers, connect_timeout=1.0) as group:
        assert group.active == []
    # Each gives up after a second, then its process gets the SDK's 2 s to exit: 3 s each,
    # 12 s one after the other.
    assert time.monotonic() - started < 7.5


async def test_strict_raises_the_first_failure_and_closes_the_others() -> None:
    one, lost, slow = good("one"), ghost(), mute()
    group = MCPServers([one, lost, slow], strict=True)
    with pytest.raises(MCPServerError, match="MCP server 'ghost': could not connect") as failed:
        await group.connect()
    assert failed.value.__notes__ == [f"also: {group.failed[slow]}"]
    assert not one.connected


async def test_an_agent_gets_the_servers_that_connected() -> None:
    one, lost = good("one"), ghost()
    model = ScriptedModel([[ToolCall("c0", "one_add", '{"a": 2, "b": 3}')], "five"])
    async with MCPServers([one, lost]) as group:
        agent = Agent("a", model, mcp_servers=group.active)
        events = await drain(agent.run("add"))
    ends_once(events, RunCompleted)
    assert [e.item.content for e in events if e.type == "tool_output_item"] == ["5"]


async def test_a_server_can_connect_again_after_closing() -> None:
    server = MCPServer(server=__import__("mcp_server").build())
    for _ in range(2):
        async with server:
            assert [t.name for t in await server.refresh()][:1] == ["add"]
