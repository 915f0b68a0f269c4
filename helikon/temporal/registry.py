"""The worker's agents by name: what a workflow looks its agent up in.

A workflow is started with an agent's name and the digest of the chart the caller expects;
the worker that runs it finds the agent here and refuses a digest that differs (the loop
changed: start it on a new task queue, docs/howto/temporal.md). Agents reachable from a
registered one (handoff targets, agents as tools) are registered with it, so child
workflows find theirs.

Registries are kept per task queue (`register`, `registry_for`): workflow code runs in
Temporal's sandbox, which re-imports workflow modules but passes helikon through (see
helikon.temporal.worker), so a workflow reaches the registry of the worker it runs on by the
task queue in its info.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from helikon.core.context import TransitionCtx
from helikon.core.errors import HelikonError
from helikon.core.tool_spec import ToolSpec
from helikon.run.config import RunConfig
from helikon.run.journal import toolset_digest
from helikon.run.prepare import tool_specs, tools_and_handoffs, transition_ctx
from helikon.run.spec import AgentSpec, HandoffTo, joined, reachable_agents
from helikon.run.subagent import agent_of
from helikon.temporal.options import TemporalOptions
from helikon.tools import Tool


class UnknownAgent(HelikonError, LookupError):
    """The worker has no agent of that name, or it runs another chart than asked for."""


@dataclass(frozen=True)
class AgentFacts:
    """What a workflow derives from its agent: tools, handoffs, transition context, the
    specs the model is offered, and the tool-set digest its store header records."""

    agent: AgentSpec
    config: RunConfig
    tools: Mapping[str, Tool]
    handoffs: Mapping[str, HandoffTo]
    ctx: TransitionCtx
    specs: tuple[ToolSpec, ...]
    toolset: str

    @property
    def digest(self) -> str:
        return self.ctx.table.digest

    def nested(self, name: str) -> AgentSpec | None:
        """The agent a tool of this agent runs (an agent as a tool), if it is one."""
        found = self.tools.get(name)
        return agent_of(found) if found is not None else None


def _with_nested(agent: AgentSpec) -> dict[str, AgentSpec]:
    """`agent`, every agent it reaches by handoff, and the agents its tools run, by name."""
    found: dict[str, AgentSpec] = {}
    todo = [agent]
    while todo:
        current = todo.pop()
        if found.get(current.name) is current:
            continue
        reached = reachable_agents(current)
        found = joined(found, reached)
        for each in reached.values():
            todo.extend(a for tool in each.tools if (a := agent_of(tool)) is not None)
    return found


class AgentRegistry:
    """Agents by name, with the facts each workflow derives from its agent.

    Raises:
        ValueError: two different agents share a name, or an agent has tool sources
            (`mcp_servers`: listing them is IO a workflow cannot do; give their tools as
            tools).
    """

    def __init__(self, agents: Iterable[AgentSpec], options: TemporalOptions | None = None) -> None:
        self.options = options or TemporalOptions()
        found: dict[str, AgentSpec] = {}
        for agent in agents:
            found = joined(found, _with_nested(agent))
        for agent in found.values():
            if agent.mcp_servers:
                raise ValueError(
                    f"agent {agent.name!r} has tool sources (mcp_servers), which a Temporal "
                    "workflow cannot list: give their tools to the agent as tools"
                )
        self.agents = found
        self._facts: dict[tuple[str, int | None], AgentFacts] = {}

    def __contains__(self, name: object) -> bool:
        return name in self.agents

    def facts(self, name: str, token_budget: int | None = None, *, chart: str = "") -> AgentFacts:
        """The facts of agent `name`, with `token_budget` in place of its own when a nested
        run has only that much left; `chart`, when given, must be its chart's digest.

        Raises:
            UnknownAgent: no such agent here, or another chart.
        """
        agent = self.agents.get(name)
        if agent is None:
            known = ", ".join(sorted(self.agents)) or "(none)"
            raise UnknownAgent(f"this worker has no agent {name!r} (it has: {known})")
        key = (name, token_budget)
        facts = self._facts.get(key)
        if facts is None:
            facts = self._facts[key] = _facts_of(agent, self.agents, token_budget)
        if chart and chart != facts.digest:
            raise UnknownAgent(
                f"agent {name!r} runs chart {facts.digest[:12]} on this worker, but the run "
                f"asks for chart {chart[:12]}: the loop changed, so this worker refuses it "
                "(run the new chart on a new task queue)"
            )
        return facts


def _facts_of(
    agent: AgentSpec, agents: Mapping[str, AgentSpec], token_budget: int | None
) -> AgentFacts:
    config = agent.config
    if token_budget is not None:
        config = config.with_token_budget(token_budget)
    tools, handoffs = tools_and_handoffs(agent, agents)
    ctx = transition_ctx(agent, config, tools, handoffs)
    specs = tool_specs(tools, handoffs)
    return AgentFacts(agent, config, tools, handoffs, ctx, specs, toolset_digest(specs))


_REGISTRIES: dict[str, AgentRegistry] = {}


def register(task_queue: str, registry: AgentRegistry) -> None:
    """Make `registry` the one workflows on `task_queue` in this process look agents up in.

    Raises:
        ValueError: another registry serves that task queue in this process already.
    """
    known = _REGISTRIES.get(task_queue)
    if known is not None and known is not registry:
        raise ValueError(
            f"task queue {task_queue!r} already has other agents in this process: one "
            "registry per task queue"
        )
    _REGISTRIES[task_queue] = registry


def unregister(task_queue: str, registry: AgentRegistry) -> None:
    if _REGISTRIES.get(task_queue) is registry:
        del _REGISTRIES[task_queue]


def registry_for(task_queue: str) -> AgentRegistry:
    """The registry of `task_queue`.

    Raises:
        UnknownAgent: no worker of this process serves it.
    """
    found = _REGISTRIES.get(task_queue)
    if found is None:
        raise UnknownAgent(f"no helikon worker in this process serves task queue {task_queue!r}")
    return found
