"""Agents as tools: another agent runs as a child of the calling run, opaque to its stream."""

from __future__ import annotations

import json
from typing import Any

from helikon.core.errors import FatalToolError, MaxAgentDepthExceeded, RunError
from helikon.run.driver import Run, RunToolContext
from helikon.run.results import RunResultStreaming
from helikon.run.spec import AgentSpec
from helikon.tools import Tool, ToolContext, tool


def agent_tool(agent: AgentSpec, name: str | None, description: str | None) -> Tool:
    """A tool that runs `agent` on an `input` text and returns its final output.

    The child run has depth+1, shares the parent's context and remaining token budget, and
    its usage counts toward the parent. A failed child gives an error result; exceeding
    `max_agent_depth` fails the parent run with `MaxAgentDepthExceeded`.
    """

    async def run_agent(input: str, context: ToolContext[Any]) -> str:
        parent = context.run if isinstance(context, RunToolContext) else None
        config = parent.config if parent is not None else agent.config
        depth = (parent.depth if parent is not None else 0) + 1
        if depth > config.max_agent_depth:
            raise FatalToolError(
                f"{agent.name} would run at depth {depth}",
                error=MaxAgentDepthExceeded(config.max_agent_depth, agent.name),
            )
        run_id = f"{context.run_id}/{context.call_id}"
        if parent is not None:
            child = parent.child(agent, input, run_id)
        else:  # the tool called outside a run: a run of its own, one level down
            child = Run(agent, input=input, config=config, run_id=run_id, depth=depth)
        try:
            result = await RunResultStreaming(child).collect()
        except RunError as exc:
            return f"error: {agent.name} failed: {exc}"
        finally:
            if isinstance(context, RunToolContext):
                context.spent.append(child.usage)
        if result.output is not None and result.output.value is not None:
            return json.dumps(result.output.value)
        return result.final_output or ""

    run_agent.__doc__ = f"""{description or agent.description or f"Ask {agent.name}."}

    Args:
        input: what to ask {agent.name}.
    """
    return tool(name=name or agent.name.replace("-", "_").replace(" ", "_"))(run_agent)
