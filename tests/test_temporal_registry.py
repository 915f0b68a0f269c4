"""`AgentRegistry.facts`: per agent for an agent without tool sources, per (agent, listing)
for one with them, built from the recorded `ListedTool`s with no server (what workflow
code may do), and refused when a listing does not fit the agent. An agent that sets
`RunConfig.redact`, or one it reaches, is refused when a registry is built (the Temporal
runtime cannot apply it: it fails closed)."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

pytest.importorskip("temporalio")
pytest.importorskip("mcp")

from temporal_agents import station_agent, triage_agent, weather_agent

from helikon import Agent, RunConfig, ScriptedModel
from helikon.core import ListedTool, ToolSpec
from helikon.temporal import chart_of
from helikon.temporal.registry import AgentRegistry, RedactionUnsupported, UnknownAgent

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


def hidden(text: str) -> str:
    return text.replace("Oslo", "[city]")


def redacted(name: str) -> Agent:
    return Agent(name, ScriptedModel([]), config=RunConfig(redact=hidden))


@pytest.mark.parametrize(
    ("agents", "named"),
    [
        pytest.param(lambda: [weather_agent(redact=hidden)], "'weather' sets", id="registered"),
        pytest.param(
            lambda: [triage_agent(), Agent("triage2", ScriptedModel([]), handoffs=[redacted("b")])],
            "'b' (reached from agent 'triage2') sets",
            id="a-handoff-target",
        ),
        pytest.param(
            lambda: [Agent("manager", ScriptedModel([]), tools=[redacted("r").as_tool()])],
            "'r' (reached from agent 'manager') sets",
            id="an-agent-as-a-tool",
        ),
    ],
)
def test_an_agent_that_redacts_is_refused_naming_it_and_the_way_out(
    agents: Callable[[], list[Agent]], named: str
) -> None:
    with pytest.raises(RedactionUnsupported, match="agent " + re.escape(named)) as refused:
        AgentRegistry(agents())
    assert "payload codec" in str(refused.value) and "in process" in str(refused.value)
    assert isinstance(refused.value, ValueError)  # as `helikon worker` reports a bad agent list
    with pytest.raises(RedactionUnsupported):  # start_run checks the chart through it
        chart_of(agents()[-1])


def test_an_agent_without_redact_is_registered_with_its_reached_ones() -> None:
    registry = AgentRegistry([triage_agent(), weather_agent(redact=None)])
    assert sorted(registry.agents) == ["billing", "triage", "weather"]
