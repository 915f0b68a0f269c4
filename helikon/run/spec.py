"""`AgentSpec`: an agent's parts (model, instructions, tools, handoffs, output type, chart,
guardrails, approval handler), and `HandoffTo`, a handoff target.

The driver reads these; `helikon.run.agent.Agent` extends `AgentSpec` with `run`, `resume` and
`as_tool`, which build runs. Keeping the parts here, below the driver, is what lets the
driver and the agent import in one direction only.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from helikon.core.approvals import ApprovalDecision, ApprovalRequest
from helikon.core.table import TransitionTable
from helikon.models.base import Model
from helikon.run.config import RunConfig, RunContext
from helikon.run.guardrails import InputGuardrail, OutputGuardrail
from helikon.tools import Tool

ApprovalHandler = Callable[
    [ApprovalRequest, RunContext[Any]],
    "bool | ApprovalDecision | Awaitable[bool | ApprovalDecision]",
]


@dataclass(frozen=True)
class HandoffTo:
    """A handoff target: the model transfers control by calling `tool_name`."""

    agent: AgentSpec
    tool_name: str = ""
    description: str = ""

    @property
    def name(self) -> str:
        return self.tool_name or f"transfer_to_{slug(self.agent.name)}"

    @property
    def purpose(self) -> str:
        return self.description or (
            f"Hand the conversation to {self.agent.name}"
            + (f": {self.agent.description}" if self.agent.description else ".")
        )


def slug(name: str) -> str:
    """`transfer_to_<slug>`'s slug: lowercase letters, digits and underscores."""
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_") or "agent"


@dataclass(frozen=True, eq=False)
class AgentSpec:
    """An agent's parts, as a run reads them; `Agent` adds the ways to start it (its
    docstring describes each field)."""

    name: str
    model: Model
    instructions: str = ""
    tools: Sequence[Tool] = ()
    handoffs: Sequence[AgentSpec | HandoffTo] = ()
    output_type: Any = None
    config: RunConfig = field(default_factory=RunConfig)
    chart: TransitionTable | None = None
    input_guardrails: Sequence[InputGuardrail] = ()
    output_guardrails: Sequence[OutputGuardrail] = ()
    on_approval: ApprovalHandler | None = None
    description: str = ""

    def handoff_targets(self) -> tuple[HandoffTo, ...]:
        return tuple(h if isinstance(h, HandoffTo) else HandoffTo(h) for h in self.handoffs)
