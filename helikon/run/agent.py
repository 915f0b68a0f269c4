"""`Agent`: a model, instructions, tools, handoffs and an output type, run by the loop chart."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from helikon.core.approvals import ApprovalDecision, ApprovalRequest
from helikon.core.chart.table import TransitionTable
from helikon.core.items import FinalOutput, Item
from helikon.models.base import Model
from helikon.run.config import RunConfig, RunContext

if TYPE_CHECKING:
    from pathlib import Path

    from helikon.run.results import RunResultStreaming
    from helikon.run.snapshot import RunSnapshot
    from helikon.tools import Tool
    from helikon.trace import TraceSink


@dataclass(frozen=True)
class GuardrailResult:
    """A guardrail's verdict: `tripwire` true stops the run."""

    tripwire: bool
    message: str = ""


GuardrailAnswer = GuardrailResult | bool | Awaitable[GuardrailResult | bool]


@dataclass(frozen=True)
class InputGuardrail:
    """Checked on the user's input before the first model call."""

    name: str
    check: Callable[[str, RunContext[Any]], GuardrailAnswer]


@dataclass(frozen=True)
class OutputGuardrail:
    """Checked on the final output before the run completes."""

    name: str
    check: Callable[[FinalOutput, RunContext[Any]], GuardrailAnswer]


ApprovalHandler = Callable[
    [ApprovalRequest, RunContext[Any]],
    "bool | ApprovalDecision | Awaitable[bool | ApprovalDecision]",
]


@dataclass(frozen=True)
class HandoffTo:
    """A handoff target: the model transfers control by calling `tool_name`."""

    agent: Agent
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
class Agent:
    """An agent: what it is told, what it can call, whom it can hand off to, what it returns.

    Args:
        name: the agent's name, shown in events and used for handoff tool names.
        model: anything with `stream(ModelInput)`, e.g. `OpenAIModel.chat(...)`,
            `ScriptedModel([...])`.
        instructions: the system instructions.
        tools: `Tool`s (from `@tool`), including agents as tools (`other.as_tool()`).
        handoffs: agents (or `HandoffTo`) this agent may transfer control to.
        output_type: a type (e.g. a pydantic model) the final answer must validate as.
        config: the default `RunConfig` for runs of this agent.
        chart: a compiled loop chart; helikon's default loop when None.
        input_guardrails: checks on the user's input, before the first model call.
        output_guardrails: checks on the final output, before the run completes.
        on_approval: decides calls that need approval in process; without it the run
            suspends with `RunSuspended` and resumes with `agent.resume(...)`.
        description: one line about the agent, offered to agents that hand off to it.
    """

    name: str
    model: Model
    instructions: str = ""
    tools: Sequence[Tool] = ()
    handoffs: Sequence[Agent | HandoffTo] = ()
    output_type: Any = None
    config: RunConfig = field(default_factory=RunConfig)
    chart: TransitionTable | None = None
    input_guardrails: Sequence[InputGuardrail] = ()
    output_guardrails: Sequence[OutputGuardrail] = ()
    on_approval: ApprovalHandler | None = None
    description: str = ""

    def handoff_targets(self) -> tuple[HandoffTo, ...]:
        return tuple(h if isinstance(h, HandoffTo) else HandoffTo(h) for h in self.handoffs)

    def run(
        self,
        input: str | Sequence[Item],
        *,
        context: RunContext[Any] | None = None,
        config: RunConfig | None = None,
        run_id: str | None = None,
        trace: TraceSink | str | Path | None = None,
    ) -> RunResultStreaming:
        """Start a run; iterate the result for its events, or `await result.collect()`.

        Args:
            input: the user's message, or items.
            context: carries `deps` to tools, guardrails and approval handlers.
            config: limits for this run (default: the agent's `config`).
            run_id: the run's id (default: a fresh random one).
            trace: a trace sink, or a path to write the run's JSONL trace to.

        Raises:
            ValueError: the agent cannot start (e.g. two tools share a name).
        """
        from helikon.run.driver import Run
        from helikon.run.results import RunResultStreaming, open_trace

        sink, owned = open_trace(trace)
        run = Run(self, input=input, context=context, config=config, run_id=run_id, trace=sink)
        return RunResultStreaming(run, closing=owned)

    def resume(
        self,
        snapshot: RunSnapshot,
        decisions: Sequence[ApprovalDecision] = (),
        *,
        context: RunContext[Any] | None = None,
        config: RunConfig | None = None,
    ) -> RunResultStreaming:
        """Continue a run from `snapshot`, e.g. one suspended for approval, with `decisions`.

        Raises:
            ApprovalMismatch: a decision is for a call that is not pending, or for other
                arguments than the pending call's.
            SnapshotMismatch: the snapshot was taken from another agent or chart.
        """
        from helikon.run.driver import Run
        from helikon.run.results import RunResultStreaming

        run = Run.from_snapshot(self, snapshot, decisions, context=context, config=config)
        return RunResultStreaming(run)

    def as_tool(self, name: str | None = None, description: str | None = None) -> Tool:
        """This agent as a tool another agent can call with an `input` text."""
        from helikon.run.subagent import agent_tool

        return agent_tool(self, name, description)
