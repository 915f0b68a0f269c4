"""The worker's agents by name: what a workflow looks its agent up in.

A workflow is started with an agent's name and the digest of the chart the caller expects;
the worker that runs it finds the agent here and refuses a digest that differs (the loop
changed: start it on a new task queue, docs/howto/temporal.md). Agents reachable from a
registered one (handoff targets, agents as tools) are registered with it, so child
workflows find theirs.

A nested run (a handoff target, an agent as a tool) takes its root's `RunConfig`, as in
process (`facts(..., config_of=root)`): its policy, turns, limits and model settings, with
only the token budget its parent has left.

Registries are kept per task queue (`register`, `registry_for`): workflow code runs in
Temporal's sandbox, which re-imports workflow modules but passes helikon through (see
helikon.temporal.worker), so a workflow reaches the registry of the worker it runs on by the
task queue in its info.

An agent with tool sources (`mcp_servers`) gets its facts per listing: a run lists its
sources once, as an activity, and the workflow derives its facts from the agent's own
tools and the listed ones (`facts(..., listed=...)`). Those tools are stand-ins that are
never called in the workflow (helikon.run.prepare `recorded_tools`): the tool activity
binds each call to the worker's own connected source (`live_tools`).

An agent whose `RunConfig` sets `redact` is refused (`RedactionUnsupported`), here and so
wherever a registry is built (a worker, `start_run`'s chart check): on Temporal the run
store is also the run's memory and the workflow's history holds every text, so neither
can be redacted without changing what the run sees. Until that is designed (a payload
codec for the history, a raw source for the conversation), the runtime fails closed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from helikon.core.codec import dumps
from helikon.core.context import TransitionCtx
from helikon.core.errors import HelikonError
from helikon.core.tool_spec import ListedTool, ToolSpec
from helikon.run.chart_versions import on_recorded_chart
from helikon.run.config import RunConfig
from helikon.run.journal import chart_of, toolset_digest
from helikon.run.prepare import (
    recorded_tools,
    tool_specs,
    tools_and_handoffs,
    transition_ctx,
)
from helikon.run.spec import AgentSpec, HandoffTo, joined, reachable_agents
from helikon.run.subagent import agent_of
from helikon.temporal.options import TemporalOptions
from helikon.tools import Tool, ToolSource


class UnknownAgent(HelikonError, LookupError):
    """The worker has no agent of that name, it runs another chart than asked for, or the
    tools a run listed do not fit its agent here (another tool source)."""


class RedactionUnsupported(HelikonError, ValueError):
    """An agent whose `RunConfig` sets `redact`, or one it reaches (a handoff target, an
    agent as a tool), given to the Temporal runtime, which cannot apply it."""


LISTINGS_KEPT = 64
"""How many facts of agents with tool sources a registry keeps (one per agent, budget and
listing; a listing changes rarely, so a few per agent suffice); past it, they are built
again."""


@dataclass(frozen=True)
class AgentFacts:
    """What a workflow derives from its agent and the tools a run of it listed from its
    sources (`listed`, as the store header records them): tools, handoffs, transition
    context, the specs the model is offered, and the tool-set digest its header records."""

    agent: AgentSpec
    config: RunConfig
    tools: Mapping[str, Tool]
    handoffs: Mapping[str, HandoffTo]
    ctx: TransitionCtx
    specs: tuple[ToolSpec, ...]
    toolset: str
    listed: tuple[ListedTool, ...] = ()

    @property
    def digest(self) -> str:
        """The chart's digest, computed once per table (`chart_of`): every write and every
        chart check reads it."""
        return chart_of(self.ctx.table)[0]

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
        ValueError: two different agents share a name.
        RedactionUnsupported: an agent, or one it reaches, sets `RunConfig.redact`.
    """

    def __init__(self, agents: Iterable[AgentSpec], options: TemporalOptions | None = None) -> None:
        self.options = options or TemporalOptions()
        found: dict[str, AgentSpec] = {}
        for agent in agents:
            reached = _with_nested(agent)
            _refuse_redaction(agent, reached)
            found = joined(found, reached)
        self.agents = found
        self._facts: dict[tuple[str, int | None, str], AgentFacts] = {}
        self._listed: dict[tuple[str, int | None, str, str], AgentFacts] = {}

    def __contains__(self, name: object) -> bool:
        return name in self.agents

    @property
    def sources(self) -> tuple[ToolSource, ...]:
        """The tool sources of every agent here, each once (the worker connects them)."""
        found: dict[int, ToolSource] = {}
        for agent in self.agents.values():
            for source in agent.mcp_servers:
                found.setdefault(id(source), source)
        return tuple(found.values())

    def facts(
        self,
        name: str,
        token_budget: int | None = None,
        *,
        chart: str = "",
        listed: Sequence[ListedTool] = (),
        config_of: str = "",
    ) -> AgentFacts:
        """The facts of agent `name`, with `token_budget` in place of its own when a nested
        run has only that much left and `listed` the tools a run of it took from its
        sources (none before the listing, and for an agent without sources); `chart`, when
        given, must be its chart's digest; `config_of`, when given, names the agent whose
        `RunConfig` the run takes (a nested run takes its root's, as in process).

        Raises:
            UnknownAgent: no such agent here (nor `config_of`), another chart, or a listed
                tool that does not fit the agent (from a source it does not have, or not a
                valid tool).
        """
        agent = self._agent(name)
        config = self._agent(config_of).config if config_of else agent.config
        facts = self._facts_for(agent, config, token_budget, tuple(listed), config_of)
        if chart and chart != facts.digest:
            kept = on_recorded_chart(agent, chart)  # an older default chart (chart_versions)
            if kept is agent:
                raise UnknownAgent(
                    f"agent {name!r} runs chart {facts.digest[:12]} on this worker, but the "
                    f"run asks for chart {chart[:12]}: the loop changed, so this worker "
                    "refuses it (run the new chart on a new task queue)"
                )
            try:
                facts = _facts_of(kept, self.agents, config, token_budget, tuple(listed))
            except ValueError as exc:
                raise UnknownAgent(f"a run of agent {agent.name!r} here: {exc}") from None
        return facts

    def _agent(self, name: str) -> AgentSpec:
        agent = self.agents.get(name)
        if agent is None:
            known = ", ".join(sorted(self.agents)) or "(none)"
            raise UnknownAgent(f"this worker has no agent {name!r} (it has: {known})")
        return agent

    def _facts_for(
        self,
        agent: AgentSpec,
        config: RunConfig,
        token_budget: int | None,
        listed: tuple[ListedTool, ...],
        config_of: str,
    ) -> AgentFacts:
        if not listed:
            key = (agent.name, token_budget, config_of)
            found = self._facts.get(key)
            if found is None:
                made = _facts_of(agent, self.agents, config, token_budget, ())
                found = self._facts[key] = made
            return found
        keyed = (agent.name, token_budget, config_of, dumps(listed, tuple[ListedTool, ...]))
        found = self._listed.get(keyed)
        if found is None:
            try:
                found = _facts_of(agent, self.agents, config, token_budget, listed)
            except ValueError as exc:
                raise UnknownAgent(f"a run of agent {agent.name!r} here: {exc}") from None
            if len(self._listed) >= LISTINGS_KEPT:  # workflows and activities share it, in
                self._listed.clear()  # threads: clear() is atomic, an eviction by order is not
            self._listed[keyed] = found
        return found

    def live_tools(self, facts: AgentFacts) -> Mapping[str, Tool]:
        """The tools of a run of `facts`, each listed one bound to this process's source of
        its name while that source still offers the same tool (else a stand-in that answers
        with an error result saying why), for the tool activity to call.

        Raises:
            ValueError: a source has not listed its tools in this process, or a listed
                tool came from a source the agent does not have.
        """
        if not facts.listed:
            return facts.tools
        live = recorded_tools(facts.agent, facts.listed, live=True)
        tools, _ = tools_and_handoffs(facts.agent, self.agents, [tool for _, tool in live])
        return tools


def _refuse_redaction(agent: AgentSpec, reached: Mapping[str, AgentSpec]) -> None:
    """Fail closed on `redact` (see the module docstring): the first agent of `reached`
    (`agent` and what it reaches) that sets it is named, with the way out."""
    for name, each in sorted(reached.items()):
        if each.config.redact is None:
            continue
        where = "" if each is agent else f" (reached from agent {agent.name!r})"
        raise RedactionUnsupported(
            f"agent {name!r}{where} sets RunConfig.redact, which the Temporal runtime does "
            "not apply: its run store, which is also the run's memory, and the workflow's "
            "history would hold every text unredacted. Leave redact unset and protect the "
            "history with a Temporal payload codec (encryption) and the store by its own "
            "access rules, or run this agent in process, where redact is applied"
        )


def _facts_of(
    agent: AgentSpec,
    agents: Mapping[str, AgentSpec],
    config: RunConfig,
    token_budget: int | None,
    listed: tuple[ListedTool, ...],
) -> AgentFacts:
    if token_budget is not None:
        config = config.with_token_budget(token_budget)
    stand_ins = [tool for _, tool in recorded_tools(agent, listed, live=False)] if listed else []
    tools, handoffs = tools_and_handoffs(agent, agents, stand_ins)
    ctx = transition_ctx(agent, config, tools, handoffs)
    specs = tool_specs(tools, handoffs)
    return AgentFacts(agent, config, tools, handoffs, ctx, specs, toolset_digest(specs), listed)


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
