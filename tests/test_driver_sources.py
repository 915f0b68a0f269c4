"""Tool sources (`Agent(mcp_servers=[...])`) through the real driver: listed once, before the
first transition, and kept for the run; a listing that fails or clashes fails the run with
`ToolsUnavailable`, in one terminal event, before any model call.

The sources here are plain in-memory `ToolSource`s, so the driver's hook is tested on its
own; tests/test_mcp_*.py run the same paths against real MCP servers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest
from driver_support import drain, ends_once, types

from helikon import (
    Agent,
    ApprovalRequest,
    Cancelled,
    RunCompleted,
    RunConfig,
    RunFailed,
    RunSuspended,
    ScriptedModel,
    TimedOut,
    Tool,
    ToolCall,
    ToolPolicy,
    ToolResult,
    tool,
)
from helikon.core import ToolsUnavailable
from helikon.run import SnapshotMismatch


class Source:
    """A tool source whose listing is a list of tools, or an exception to raise."""

    def __init__(self, name: str, tools: Sequence[Tool] | Exception) -> None:
        self.name = name
        self.tools = tools
        self.listings = 0
        self.gate: asyncio.Event | None = None
        self._listed: tuple[Tool, ...] | None = None

    @property
    def listed(self) -> tuple[Tool, ...] | None:
        return self._listed

    async def list_tools(self) -> tuple[Tool, ...]:
        self.listings += 1
        if self.gate is not None:
            await self.gate.wait()
        if isinstance(self.tools, Exception):
            raise self.tools
        if self._listed is None:
            self._listed = tuple(self.tools)
        return self._listed


def echo_tool(name: str, **options: Any) -> Tool:
    return Tool.from_schema(name, f"{name} echoes", {"type": "object"}, lambda a: a, **options)


def calls(*named: str) -> list[ToolCall]:
    return [ToolCall(f"c{i}", name, '{"x": 1}') for i, name in enumerate(named)]


def results(events: Sequence[Any]) -> list[ToolResult]:
    return [e.item for e in events if e.type == "tool_output_item"]


async def test_a_sources_tools_are_offered_and_called_like_the_agents_own() -> None:
    @tool
    def own(x: int) -> str:
        """Mine."""
        return f"own {x}"

    source = Source("files", [echo_tool("read")])
    model = ScriptedModel([calls("read", "own"), "done"])
    agent = Agent("a", model, tools=[own], mcp_servers=[source])
    result = agent.run("go")
    events = await drain(result)
    ends_once(events, RunCompleted)
    assert [spec.name for spec in model.requests[0].tools] == ["own", "read"]
    assert [r.content for r in results(events)] == ['{"x":1}', "own 1"]
    assert result.run is not None
    assert [spec.name for spec in result.run.tool_specs] == ["own", "read"]
    assert source.listings == 1


async def test_each_run_lists_once_and_keeps_what_it_got() -> None:
    source = Source("files", [echo_tool("read")])
    model = ScriptedModel([calls("read"), calls("read"), "done"])
    agent = Agent("a", model, mcp_servers=[source])
    result = agent.run("go")
    events = [event async for event in result]
    ends_once(events, RunCompleted)
    assert source.listings == 1
    assert [spec.name for spec in model.requests[2].tools] == ["read"]


async def test_a_listing_that_fails_fails_the_run_before_any_model_call() -> None:
    source = Source("files", ConnectionError("refused"))
    model = ScriptedModel(["never"])
    events = await drain(Agent("a", model, mcp_servers=[source]).run("go"))
    failed = ends_once(events, RunFailed)
    assert types(events) == ["run_started", "run_failed"]
    assert failed.error == ToolsUnavailable(
        "files", "listing its tools failed: ConnectionError: refused"
    )
    assert model.requests == []


@pytest.mark.parametrize(
    ("first", "second", "message"),
    [
        (
            ["read"],
            ["read"],
            "tool 'read' of tool source 'two' has the name of a tool of tool source 'one'",
        ),
        (["own"], [], "tool 'own' of tool source 'one' has the name of a tool of the agent's own"),
        (
            ["transfer_to_b"],
            [],
            "tool 'transfer_to_b' of tool source 'one' has the name of a tool of the agent's "
            "handoffs",
        ),
    ],
)
async def test_a_name_two_tools_share_fails_the_run_naming_both_owners(
    first: list[str], second: list[str], message: str
) -> None:
    @tool
    def own() -> str:
        """Mine."""
        return ""

    one = Source("one", [echo_tool(n) for n in first])
    two = Source("two", [echo_tool(n) for n in second])
    model = ScriptedModel(["never"])
    other = Agent("b", model)
    agent = Agent("a", model, tools=[own], handoffs=[other], mcp_servers=[one, two])
    events = await drain(agent.run("go"))
    failed = ends_once(events, RunFailed)
    assert isinstance(failed.error, ToolsUnavailable)
    assert failed.error.message.startswith(message)
    assert model.requests == []


async def test_a_cancel_during_the_listing_fails_the_run_with_cancelled() -> None:
    source = Source("slow", [echo_tool("read")])
    source.gate = asyncio.Event()
    result = Agent("a", ScriptedModel(["never"]), mcp_servers=[source]).run("go")
    events: list[Any] = []

    async def consume() -> None:
        async for event in result:
            events.append(event)
            if event.type == "run_started":
                asyncio.get_running_loop().call_soon(result.cancel, "enough")

    await asyncio.wait_for(consume(), 5)
    failed = ends_once(events, RunFailed)
    assert failed.error == Cancelled("enough")


async def test_the_runs_deadline_covers_the_listing() -> None:
    source = Source("slow", [echo_tool("read")])
    source.gate = asyncio.Event()  # never set
    agent = Agent("a", ScriptedModel(["never"]), mcp_servers=[source])
    events = await asyncio.wait_for(drain(agent.run("go", config=RunConfig(timeout=0.05))), 5)
    assert ends_once(events, RunFailed).error == TimedOut(0.05)


async def test_the_run_policy_applies_to_a_sources_tools() -> None:
    source = Source("files", [echo_tool("read"), echo_tool("wipe")])
    model = ScriptedModel([calls("read", "wipe"), "done"])
    config = RunConfig(tool_policy=ToolPolicy(deny=frozenset({"wipe"})))
    events = await drain(Agent("a", model, mcp_servers=[source]).run("go", config=config))
    ends_once(events, RunCompleted)
    assert "permission_denied" in types(events)
    denied = [r for r in results(events) if r.status == "denied"]
    assert [r.call_id for r in denied] == ["c1"]


async def test_a_handoff_target_lists_its_own_sources() -> None:
    source = Source("files", [echo_tool("read")])
    model = ScriptedModel([[ToolCall("h", "transfer_to_b", "{}")], calls("read"), "done"])
    target = Agent("b", model, mcp_servers=[source])
    events = await drain(Agent("a", model, handoffs=[target]).run("go"))
    ends_once(events, RunCompleted)
    assert source.listings == 1
    assert [r.content for r in results(events)][-1] == '{"x":1}'


async def test_a_suspended_run_resumes_with_the_tools_its_source_listed() -> None:
    source = Source("files", [echo_tool("wipe", needs_approval=True)])
    model = ScriptedModel([calls("wipe"), "wiped"])
    agent = Agent("a", model, mcp_servers=[source])
    first = await agent.run("go").collect()
    assert first.snapshot is not None
    request: ApprovalRequest = first.pending[0]
    resumed = await agent.resume(first.snapshot, [request.approve()]).collect()
    assert resumed.final_output == "wiped"
    assert source.listings == 1


async def test_resuming_before_the_source_has_listed_is_refused() -> None:
    listed = Source("files", [echo_tool("wipe", needs_approval=True)])
    agent = Agent("a", ScriptedModel([calls("wipe")]), mcp_servers=[listed])
    first = await agent.run("go").collect()
    assert first.snapshot is not None
    fresh = Source("files", [echo_tool("wipe", needs_approval=True)])
    other = Agent("a", ScriptedModel(["x"]), mcp_servers=[fresh])
    with pytest.raises(SnapshotMismatch, match="'files' of agent 'a' has not listed its tools"):
        other.resume(first.snapshot, [first.pending[0].approve()])


async def test_an_agent_without_sources_never_waits_for_a_listing() -> None:
    result = await Agent("a", ScriptedModel(["hi"])).run("go").collect()
    assert isinstance(result.events[-1], RunCompleted)
    assert not isinstance(result.events[-1], RunSuspended)
