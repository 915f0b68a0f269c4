"""Agents as tools: another agent runs as a child of the calling run, opaque to its stream.

A stop of the calling run (its `cancel()`, its deadline) reaches the child at once
(`Run.nesting`), and the child, running in a task of its own, ends through its chart, its end
stored, before the call is cut short: as a handoff target does, and as the Temporal
runtime's child workflow does. A call cancelled otherwise (a fatal call of its batch) stops
the child with `Cancel("cancelled")` the same way.

A child that waits for approval (its agent has no `on_approval` handler) cannot suspend its
caller: it is left suspended, its end not reached, and its call gets an error result saying
so (`suspended_result`), on both runtimes, as a handoff target that waits for approval ends
its handoff cancelled (helikon.run.loop, `handoff_result`).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from helikon.core.errors import FatalToolError, RunError
from helikon.core.items import FinalOutput
from helikon.core.state import Cancel
from helikon.durable.records import StoreError
from helikon.run.driver import Run, RunToolContext
from helikon.run.effects import RunEffects
from helikon.run.loop import too_deep
from helikon.run.results import RunResultStreaming
from helikon.run.spec import AgentSpec
from helikon.tools import Tool, ToolContext, tool


def agent_tool(agent: AgentSpec, name: str | None, description: str | None) -> Tool:
    """A tool that runs `agent` on an `input` text and returns its final output.

    The child run has depth+1, shares the parent's context, config and remaining token
    budget, and its usage counts toward the parent. A failed child gives an error result, so
    does one that waits for approval (`suspended_result`); exceeding `max_agent_depth` fails
    the parent run with `MaxAgentDepthExceeded`.
    """

    async def run_agent(input: str, context: ToolContext[Any]) -> str:
        parent = context.run if isinstance(context, RunToolContext) else None
        config = parent.config if parent is not None else agent.config
        depth = (parent.depth if parent is not None else 0) + 1
        refused = too_deep(depth - 1, config, agent.name)
        if refused is not None:
            raise FatalToolError(f"{agent.name} would run at depth {depth}", error=refused)
        # The step's seq keeps two calls that reuse a call id in different turns apart.
        run_id = f"{context.run_id}/{context.seq}:{context.call_id}"
        child: Any
        if parent is not None:  # resumed where it stopped when the run's store holds it
            try:
                child = await parent.nested(agent, input, run_id)
            except StoreError as exc:
                return f"error: {agent.name} cannot run: {exc}"
        else:  # the tool called outside a run: a run of its own, one level down
            child = Run(agent, input=input, config=config, run_id=run_id, depth=depth)
        try:
            output = await _to_its_end(child, parent)
        except RunError as exc:
            return f"error: {agent.name} failed: {exc}"
        finally:
            if isinstance(context, RunToolContext):
                context.spent.append(child.usage)
        if output is None:
            return suspended_result(agent.name)
        return json.dumps(output.value) if output.value is not None else output.text or ""

    run_agent.__doc__ = f"""{description or agent.description or f"Ask {agent.name}."}

    Args:
        input: what to ask {agent.name}.
    """
    # Calling it again resumes its child run from the store rather than starting another,
    # so a crash that left the call in flight may run it again: it is idempotent.
    tool_name = name or agent.name.replace("-", "_").replace(" ", "_")
    run_agent.helikon_agent = agent  # type: ignore[attr-defined]  # read by agent_of
    return tool(name=tool_name, idempotent=True)(run_agent)


def suspended_result(agent: str) -> str:
    """The result of a call of `agent` as a tool whose run waited for approval (it has no
    `on_approval` handler): left suspended, it cannot suspend its caller."""
    return (
        f"error: {agent} waited for approval; an agent run as a tool cannot suspend: "
        "give it an on_approval handler"
    )


def agent_of(made: Tool) -> AgentSpec | None:
    """The agent a tool runs, when it is an agent as a tool (`agent_tool`); else None. A
    runtime that nests runs itself (helikon.temporal, as child workflows) asks this."""
    found = getattr(made.fn, "helikon_agent", None)
    return found if isinstance(found, AgentSpec) else None


async def _to_its_end(child: Run, parent: RunEffects | None) -> FinalOutput | None:
    """The child's final output (`_output`); a stop of `parent` reaches the child the
    moment it is made (`nesting`), as it reaches a handoff target."""
    if parent is None:
        return await _in_own_task(child, None)
    with parent.nesting(child):
        return await _in_own_task(child, parent)


async def _in_own_task(child: Run, parent: RunEffects | None) -> FinalOutput | None:
    """`_output` in a task of its own, so that a cancel of the call does not cut the child
    short: it stops the child with the parent's stop (`Cancel("cancelled")` when the parent
    has none, as when a fatal call of the batch cancels it), waits for its end, and then
    cuts the call short.

    Raises:
        RunError: the child failed.
        asyncio.CancelledError: the call was cancelled; the child ended (or was cancelled
            outright, when the call was cancelled again while the child ended).
    """
    running = asyncio.ensure_future(_output(child))
    try:
        return await asyncio.shield(running)
    except asyncio.CancelledError:
        stop = parent.stopping if parent is not None else None
        child.halt(stop if stop is not None else Cancel("cancelled"))
        try:
            await asyncio.wait([running])
        finally:
            if not running.done():
                running.cancel()
            elif not running.cancelled():
                running.exception()  # its end is not the call's result: retrieved, dropped
        raise


async def _output(child: Run) -> FinalOutput | None:
    """The child's final output: run it to its end, or take it as it ended before; None
    when it suspended for approval."""
    if child.finished:  # resumed after a crash that came after the child had ended
        state = child.state
        if state.phase == "Failed":
            raise RunError(state.error, state.usage)
        output: FinalOutput = state.output
        return output
    result = await RunResultStreaming(child).collect()
    return result.output if result.output is not None else None
