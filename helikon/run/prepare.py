"""What a run derives from its agent once, before its first step: its tools and handoffs by
name (refusing a name used twice), the transition context, and the tool specs it offers the
model. The default chart is resolved here: an agent without `chart=` runs `DEFAULT_TABLE`.

The tools of the agent's tool sources (`mcp_servers`) are listed asynchronously, once, when
a run starts (`source_tools`), each with the name of its source, and recorded as
`ListedTool`s in the run's trace and store. A run resumed from a store offers the tools it
recorded (`recorded_tools`), bound to its sources' listings where they still offer the same
tool; a replay takes them from the trace with no source at all. A run resumed from a
snapshot (which records no tools) takes the listings its sources hold
(`listed_source_tools`), so it is checked against the tools the run was suspended with.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence

from helikon.core.chart.default import DEFAULT_TABLE
from helikon.core.context import OutputSpec, TransitionCtx
from helikon.core.errors import HelikonError, ToolsUnavailable
from helikon.core.items import Item, UserMessage
from helikon.core.tool_spec import ListedTool, ToolSpec
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
        output_guardrails=tuple(guardrail.name for guardrail in agent.output_guardrails),
        input_guardrails=tuple(guardrail.name for guardrail in agent.input_guardrails),
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


Sourced = tuple[tuple[str, Tool], ...]
"""Tools from tool sources, each with the name of its source."""


async def source_tools(agent: AgentSpec) -> Sourced | ToolsUnavailable:
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
    if clash is not None:
        return clash
    return tuple((source.name, t) for source, listing in found for t in listing)


def listed_source_tools(agent: AgentSpec) -> Sourced:
    """The tools the agent's sources hold from their latest listing (a resumed run's).

    Raises:
        ValueError: a source has not listed its tools yet (in this process).
    """
    tools: list[tuple[str, Tool]] = []
    for source in agent.mcp_servers:
        listing = source.listed
        if listing is None:
            raise ValueError(
                f"tool source {source.name!r} of agent {agent.name!r} has not listed its tools "
                "in this process: connect it and await its list_tools() first"
            )
        tools.extend((source.name, each) for each in listing)
    return tuple(tools)


def listed(sourced: Sourced) -> tuple[ListedTool, ...]:
    """What a trace and a run store record of the tools a run took from its sources."""
    return tuple(
        ListedTool(
            source,
            tool.spec,
            tool.needs_approval if isinstance(tool.needs_approval, bool) else True,
            tool.read_only,
            tool.permission,
        )
        for source, tool in sourced
    )


def recorded_tools(agent: AgentSpec, records: Sequence[ListedTool], *, live: bool) -> Sourced:
    """The tools a run recorded from its sources, to offer them again.

    With `live` (a resumed run), each is its source's tool of that name when the source's
    listing still offers the same tool (spec equal), and a stand-in otherwise: offered as
    recorded, with the permission it had, answering each call with an error result that
    says why it was not called. Without (a replay), every tool is such a stand-in, so no
    source is asked anything.

    Raises:
        ValueError: a tool came from a source the agent does not have, a live source has
            not listed its tools in this process, or a record is not a valid tool.
    """
    sources = {source.name: source for source in agent.mcp_servers}
    tools: list[tuple[str, Tool]] = []
    for record in records:
        source = sources.get(record.source)
        if source is None:
            raise ValueError(
                f"its tool {record.spec.name!r} came from tool source {record.source!r}, "
                f"which agent {agent.name!r} does not have"
            )
        found = None
        if live:
            listing = source.listed
            if listing is None:
                raise ValueError(
                    f"tool source {source.name!r} of agent {agent.name!r} has not listed its "
                    "tools in this process: connect it and await its list_tools() first"
                )
            found = next((t for t in listing if t.name == record.spec.name), None)
            if found is not None and found.spec != record.spec:
                found = None
        tools.append((record.source, found or _stand_in(record, live)))
    return tuple(tools)


def _stand_in(record: ListedTool, live: bool) -> Tool:
    spec = record.spec
    if live:
        why = (
            f"tool {spec.name!r} is not called: tool source {record.source!r} no longer offers "
            "it as it did when this run started"
        )
    else:
        why = f"tool {spec.name!r} is not called: a replay has no tool source {record.source!r}"

    def not_called(arguments: dict[str, object]) -> str:
        raise RuntimeError(why)

    return Tool.from_schema(
        spec.name,
        spec.description,
        spec.parameters,
        not_called,
        needs_approval=record.needs_approval,
        read_only=record.read_only,
        permission=record.permission,
    )


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
