"""What a run derives from its agent once, before its first step: its tools and handoffs by
name (refusing a name used twice), the transition context, and the tool specs it offers the
model. The default chart is resolved here: an agent without `chart=` runs `DEFAULT_TABLE`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from helikon.core.chart.default import DEFAULT_TABLE
from helikon.core.context import OutputSpec, TransitionCtx
from helikon.core.items import Item, UserMessage
from helikon.core.tool_spec import ToolSpec
from helikon.run.config import RunConfig
from helikon.run.spec import AgentSpec, HandoffTo
from helikon.tools import Tool, tools_by_name


def as_items(input: str | Sequence[Item]) -> tuple[Item, ...]:
    """A run's input as items: a text is one user message."""
    if isinstance(input, str):
        return (UserMessage(input),)
    return tuple(input)


def tools_and_handoffs(
    agent: AgentSpec, agents: Mapping[str, AgentSpec]
) -> tuple[dict[str, Tool], dict[str, HandoffTo]]:
    """Tools and handoffs by name, handoffs by agent name resolved in `agents`, refusing
    any tool name used twice and any name no reachable agent has.

    Raises:
        ValueError: naming the agent and what is wrong.
    """
    try:
        tools = tools_by_name(agent.tools)
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
