"""`AgentSpec`: an agent's parts (model, instructions, tools, handoffs, output type, chart,
guardrails, approval handler, tool sources), and `HandoffTo`, a handoff target.

The driver reads these; `helikon.run.agent.Agent` extends `AgentSpec` with `run`, `resume` and
`as_tool`, which build runs. Keeping the parts here, below the driver, is what lets the
driver and the agent import in one direction only.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from helikon.core.approvals import ApprovalDecision, ApprovalRequest
from helikon.core.table import TransitionTable
from helikon.models.base import Model
from helikon.models.names import model_named
from helikon.run.chart_effects import Effect, effects_by_name, missing_effects
from helikon.run.config import RunConfig, RunContext
from helikon.run.guardrails import InputGuardrail, OutputGuardrail
from helikon.tools import Tool, ToolSource

ApprovalHandler = Callable[
    [ApprovalRequest, RunContext[Any]],
    "bool | ApprovalDecision | Awaitable[bool | ApprovalDecision]",
]


@dataclass(frozen=True)
class HandoffTo:
    """A handoff target: the model transfers control by calling `tool_name`.

    `agent` is the target, or its name: a name (for a cycle, `Agent("billing",
    handoffs=["triage"])` beside `Agent("triage", handoffs=[billing])`) is resolved when a
    run starts, among the agents reachable from the run's agent (`resolve`).
    """

    agent: AgentSpec | str
    tool_name: str = ""
    description: str = ""

    @property
    def agent_name(self) -> str:
        return self.agent if isinstance(self.agent, str) else self.agent.name

    @property
    def name(self) -> str:
        return self.tool_name or f"transfer_to_{slug(self.agent_name)}"

    @property
    def purpose(self) -> str:
        about = "" if isinstance(self.agent, str) else self.agent.description
        return self.description or (
            f"Hand the conversation to {self.agent_name}" + (f": {about}" if about else ".")
        )

    @property
    def target(self) -> AgentSpec:
        """The target agent; a name must be resolved first (`resolve`)."""
        if isinstance(self.agent, str):
            raise ValueError(f"handoff to {self.agent!r} has not been resolved to an agent")
        return self.agent

    def resolve(self, agents: Mapping[str, AgentSpec]) -> HandoffTo:
        """This target with a named agent looked up in `agents` (name -> agent).

        Raises:
            ValueError: no agent of that name is reachable.
        """
        if not isinstance(self.agent, str):
            return self
        found = agents.get(self.agent)
        if found is None:
            known = ", ".join(sorted(agents)) or "(none)"
            raise ValueError(
                f"handoff to {self.agent!r}: no agent of that name is reachable from the run's "
                f"agent (reachable: {known})"
            )
        return HandoffTo(found, self.tool_name, self.description)


def slug(name: str) -> str:
    """`transfer_to_<slug>`'s slug: lowercase letters, digits and underscores."""
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_") or "agent"


@dataclass(frozen=True, eq=False)
class AgentSpec:
    """An agent's parts, as a run reads them; `Agent` adds the ways to start it (its
    docstring describes each field).

    A model string is resolved here, once, when the agent is built (`model_named`): from
    then on `model` is the `Model` it names, shared by every run of the agent.
    """

    name: str
    model: Model | str
    instructions: str = ""
    tools: Sequence[Tool] = ()
    handoffs: Sequence[AgentSpec | HandoffTo | str] = ()
    output_type: Any = None
    config: RunConfig = field(default_factory=RunConfig)
    chart: TransitionTable | None = None
    input_guardrails: Sequence[InputGuardrail] = ()
    output_guardrails: Sequence[OutputGuardrail] = ()
    on_approval: ApprovalHandler | None = None
    description: str = ""
    mcp_servers: Sequence[ToolSource] = ()
    effects: Sequence[Effect] = ()

    def __post_init__(self) -> None:
        if isinstance(self.model, str):
            object.__setattr__(self, "model", model_named(self.model))
        registered = effects_by_name(self.effects)
        runs = self.chart is not None and self.chart.runnable  # not a table only drawn
        missing = missing_effects(self.chart.effects if runs and self.chart else {}, registered)
        if missing:
            raise ValueError(
                f"agent {self.name!r}: its chart's {'; '.join(missing)}, which the agent does "
                "not register: pass it in effects=[...]"
            )

    def handoff_targets(self) -> tuple[HandoffTo, ...]:
        """The handoffs as `HandoffTo`s; a target given by name stays a name until a run
        resolves it (`reachable_agents`)."""
        return tuple(h if isinstance(h, HandoffTo) else HandoffTo(h) for h in self.handoffs)


def model_of(agent: AgentSpec) -> Model:
    """The agent's model: a `Model`, since a model string is resolved when it is built."""
    return cast(Model, agent.model)


def reachable_agents(root: AgentSpec) -> dict[str, AgentSpec]:
    """Every agent reachable from `root` through handoffs given as agents, by name; the
    registry that handoffs given by name resolve in.

    Raises:
        ValueError: two different agents reachable from `root` share a name (a handoff by
            that name would be ambiguous).
    """
    found: dict[str, AgentSpec] = {}
    todo = [root]
    while todo:
        agent = todo.pop()
        known = found.get(agent.name)
        if known is agent:
            continue
        if known is not None:
            raise ValueError(
                f"two different agents named {agent.name!r} are reachable from "
                f"{root.name!r}: a handoff by that name would be ambiguous"
            )
        found[agent.name] = agent
        todo.extend(h.agent for h in agent.handoff_targets() if not isinstance(h.agent, str))
    return found


def check_handoff_names(agents: Mapping[str, AgentSpec]) -> None:
    """Every handoff by name of every agent in the registry resolves in it: checked when a
    run starts, not when a handoff first reaches the name.

    Raises:
        ValueError: naming the agent and the name no reachable agent has.
    """
    for agent in agents.values():
        for target in agent.handoff_targets():
            try:
                target.resolve(agents)
            except ValueError as exc:
                raise ValueError(f"agent {agent.name!r}: {exc}") from None


def joined(known: Mapping[str, AgentSpec], more: Mapping[str, AgentSpec]) -> dict[str, AgentSpec]:
    """Two registries of reachable agents as one (a nested run sees its parent's agents and
    its own); the same name for two different agents is refused.

    Raises:
        ValueError: a name in both stands for two different agents.
    """
    for name, agent in more.items():
        if name in known and known[name] is not agent:
            raise ValueError(
                f"two different agents named {name!r} are reachable: a handoff by that name "
                "would be ambiguous"
            )
    return {**known, **more}
