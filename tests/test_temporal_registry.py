"""`AgentRegistry.facts`: per agent for an agent without tool sources, per (agent, listing)
for one with them, built from the recorded `ListedTool`s with no server (what workflow
code may do), and refused when a listing does not fit the agent."""

from __future__ import annotations

import pytest

pytest.importorskip("temporalio")
pytest.importorskip("mcp")

from temporal_agents import station_agent, weather_agent

from helikon.core import ListedTool, ToolSpec
from helikon.temporal.registry import AgentRegistry, UnknownAgent

OBJECT = {"type": "object", "properties": {"a": {"type": "integer"}}}
ADD = ListedTool("station", ToolSpec("add", "Add.", OBJECT), needs_approval=False)
WIPE = ListedTool("station", ToolSpec("wipe", "Wipe.", OBJECT))


def test_an_agent_without_sources_has_one_facts_per_name_and_budget() -> None:
    registry = AgentRegistry([weather_agent()])
    assert registry.facts("weather") is registry.facts("weather")
    assert registry.facts("weather", 10) is not registry.facts("weather")


def test_an_agent_with_sources_has_facts_per_listing_with_no_server_asked() -> None:
    agent = station_agent()
    registry = AgentRegistry([agent])
    one = registry.facts("station", listed=[ADD])
    both = registry.facts("station", listed=[ADD, WIPE])
    assert registry.facts("station", listed=[ADD]) is one
    assert [s.name for s in one.specs] == ["add"] and one.listed == (ADD,)
    assert [s.name for s in both.specs] == ["add", "wipe"]
    assert one.toolset != both.toolset and one.digest == both.digest
    assert dict(both.ctx.tools) == {"add": "allow", "wipe": "ask"}
    assert registry.facts("station").specs == ()  # before its listing: its own tools only
    (server,) = agent.mcp_servers
    assert server.listed is None and not server.connected


def test_a_listing_from_a_source_the_agent_lacks_is_refused() -> None:
    registry = AgentRegistry([station_agent()])
    other = ListedTool("elsewhere", ToolSpec("add", "Add.", OBJECT))
    with pytest.raises(UnknownAgent, match="came from tool source 'elsewhere'"):
        registry.facts("station", listed=[other])


def test_a_listed_tool_that_is_not_one_is_refused() -> None:
    registry = AgentRegistry([station_agent()])
    bad = ListedTool("station", ToolSpec("add", "Add.", {"type": "array"}))
    with pytest.raises(UnknownAgent, match="add"):
        registry.facts("station", listed=[bad])
