"""What a run derives from its agent once, before its first step: its tools and handoffs by
name (refusing a name used twice), the transition context, and the tool specs it offers the
model. The default chart is resolved here: an agent without `chart=` runs `DEFAULT_TABLE`.

The tools of the agent's tool sources (`mcp_servers`) are listed asynchronously, once, when
a run starts (`source_tools`); a resumed run takes the listings its sources already hold
(`listed_source_tools`), so it is checked against the tools the run was suspended with.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence

from helikon.core.chart.default import DEFAULT_TABLE
from helikon.core.context import OutputSpec, TransitionCtx
from helikon.core.errors import HelikonError, ToolsUnavailable
from helikon.core.items import Item, UserMessage
from helikon.core.tool_spec import ToolSpec
from helikon.run.config import RunConfig
from helikon.run.spec import AgentSpec, HandoffTo
from helikon.tools import Tool, ToolSource, tools_by_name


def as_items(input: str | Sequence[Item]) -> tuple[Item, ...]:
    """A run's input as items: a text is one user message."""
    if isinstance(input, str):
        return (UserMessage(input),)
    return tuple(input)


def tools_and_handoffs(
    agent: AgentSpec, agents: Mapping[str, AgentSpec], listed: Sequence[Tool] = ()
) -> tuple[dict[str, Tool], dict[str, HandoffTo]]:
    """Tools (the agent's own, then `listed` from its tool sources) and handoffs by name,
    handoffs by agent name resolved in `agents`, refusing any tool name used twice and any
    name no reachable agent has.

    Raises:
        ValueError: naming the agent and what is wrong.
    """
    try:
        tools = tools_by_name([*agent.tools, *listed])
        targets = [target.resolve(agents) for target in agent.handoff_targets()]
    except ValueError as exc:
        raise ValueError(f"agent {agent.name!r}: {exc}") from None
    handoffs: dict[str, HandoffTo] = {}
    for target in targets:
        name = target.name
        if name in tools or name in handoffs:
            raise ValueError(
                f"agent {agent.name!r}: handoff tool {name!r} (to {target.agent_name!r}) "
                "collides with another tool or handoff of the same name"
            )
        handoffs[name] = target
    return tools, handoffs


def transition_ctx(
    agent: AgentSpec,
    config: RunConfig,
    tools: Mapping[str, Tool],
    handoffs: Mapping[str, HandoffTo],
) -> TransitionCtx:
    """The fixed facts every transition of the run reads: limits, permissions, the chart."""
    policy = config.tool_policy
    return TransitionCtx(
        agent=agent.name,
        max_turns=config.max_turns,
        token_budget=config.token_budget,
        compaction_threshold=config.compaction_threshold,
        tools=policy.permissions(tools.values()),
        handoffs={name: h.agent_name for name, h in handoffs.items()},
        call_policy=policy.call_policy(tools.values()),
        output=OutputSpec.of(agent.output_type) if agent.output_type is not None else None,
        table=agent.chart or DEFAULT_TABLE,
    )


def tool_specs(
    tools: Mapping[str, Tool], handoffs: Mapping[str, HandoffTo]
) -> tuple[ToolSpec, ...]:
    """What the model is offered: the tools, then the handoffs (each a call with no arguments)."""
    specs = [tool.spec for tool in tools.values()]
    specs += [
        ToolSpec(h.name, h.purpose, {"type": "object", "properties": {}}) for h in handoffs.values()
    ]
    return tuple(specs)


async def source_tools(agent: AgentSpec) -> tuple[Tool, ...] | ToolsUnavailable:
    """The tools of every tool source of `agent`, listed concurrently, in the sources' order;
    or why the run cannot have them: a source that fails to list (any exception it raises),
    or a name two tools share (two sources, or a source and the agent's own tools or
    handoffs), named with both owners."""
    sources = tuple(agent.mcp_servers)
    listings = await asyncio.gather(*(s.list_tools() for s in sources), return_exceptions=True)
    found: list[tuple[ToolSource, Sequence[Tool]]] = []
    for source, listing in zip(sources, listings, strict=True):
        if isinstance(listing, asyncio.CancelledError):
            raise listing
        if isinstance(listing, HelikonError):  # ours: written to be read as it is
            return ToolsUnavailable(source.name, str(listing))
        if isinstance(listing, BaseException):
            message = f"{type(listing).__name__}: {listing}"
            return ToolsUnavailable(source.name, f"listing its tools failed: {message}")
        found.append((source, listing))
    clash = _clash(agent, found)
    return clash if clash is not None else tuple(t for _, listing in found for t in listing)


def listed_source_tools(agent: AgentSpec) -> tuple[Tool, ...]:
    """The tools the agent's sources hold from their latest listing (a resumed run's).

    Raises:
        ValueError: a source has not listed its tools yet (in this process).
    """
    tools: list[Tool] = []
    for source in agent.mcp_servers:
        listing = source.listed
        if listing is None:
            raise ValueError(
                f"tool source {source.name!r} of agent {agent.name!r} has not listed its tools "
                "in this process: connect it and await its list_tools() first"
            )
        tools.extend(listing)
    return tuple(tools)


def _clash(
    agent: AgentSpec, found: Sequence[tuple[ToolSource, Sequence[Tool]]]
) -> ToolsUnavailable | None:
    owners = {each.name: "the agent's own tools" for each in agent.tools}
    owners.update({h.name: "the agent's handoffs" for h in agent.handoff_targets()})
    for source, listing in found:
        mine = f"tool source {source.name!r}"
        for each in listing:
            other = owners.get(each.name)
            if other is not None:
                return ToolsUnavailable(
                    source.name,
                    f"tool {each.name!r} of {mine} has the name of a tool of {other}: "
                    "give the source a prefix",
                )
            owners[each.name] = mine
    return None
