"""`Bench`: a subject's agent under a setup, with its probe tools, and the context it runs in.

The probe tools, the probe guardrail and the synthetic handoff target do what the path
being run asks of them (`Effects`): a probe returns the result the path planned for its
call, or fails the run; the guardrail gives the verdict planned (or arms the root run's
deadline and waits for it); the target's blocking tool arms the deadline and waits for it.
While planning, nothing runs (`NO_EFFECTS`). The context of a setup is the one the driver
itself derives, read off a `Run` that is built and never started, so the planner and the
driver cannot disagree on it.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any, Protocol

from pydantic import JsonValue

from helikon.charttest.setup import (
    PROBE_ASK_TOOL,
    PROBE_BLOCK_TOOL,
    PROBE_EFFECT_OUTPUT,
    PROBE_GUARDRAIL,
    PROBE_OUTPUT,
    PROBE_TARGET,
    PROBE_TOOL,
    ProbeAnswer,
    Setup,
)
from helikon.charttest.subject import Subject
from helikon.core.approvals import ApprovalRequest
from helikon.core.chart.default import DEFAULT_TABLE
from helikon.core.context import TransitionCtx
from helikon.core.table import TransitionTable
from helikon.models.scripted import ScriptedModel
from helikon.run.agent import Agent
from helikon.run.chart_effects import Effect, EffectContext
from helikon.run.config import RunContext
from helikon.run.driver import Run
from helikon.run.guardrails import GuardrailResult, InputGuardrail, OutputGuardrail
from helikon.tools import Tool, ToolContext, tool


class Effects(Protocol):
    """What the probes ask of the path being run."""

    def tool_output(self, call_id: str) -> str:
        """The planned result of probe call `call_id`; raises `FatalToolError` to fail."""
        ...

    def block(self) -> None:
        """Arm the root run's deadline (the synthetic target then waits for it)."""
        ...

    def approve(self, request: ApprovalRequest, context: RunContext[Any]) -> bool:
        """The planned decision on `request`; raises to fail the run."""
        ...

    def effect_output(self, effect: str) -> JsonValue:
        """The planned result of the chart's effect `effect`; raises to fail the run."""
        ...

    async def verdict(self) -> GuardrailResult:
        """The planned verdict of the probe guardrail; raises for a check that fails."""
        ...


class _Planning:
    def tool_output(self, call_id: str) -> str:
        return PROBE_OUTPUT

    def block(self) -> None:
        return None

    def approve(self, request: ApprovalRequest, context: RunContext[Any]) -> bool:
        return True

    def effect_output(self, effect: str) -> JsonValue:
        return PROBE_EFFECT_OUTPUT

    async def verdict(self) -> GuardrailResult:
        return GuardrailResult(False)


NO_EFFECTS: Effects = _Planning()


def probe_tools(effects: Effects) -> dict[str, Tool]:
    """The probe tools, by setup name (`allow`, `ask`), doing what `effects` says."""

    async def probe(context: ToolContext[Any]) -> str:
        """A probe of `helikon test`: it returns what the test planned for this call."""
        return effects.tool_output(context.call_id)

    return {
        "allow": tool(name=PROBE_TOOL, read_only=True)(probe),
        "ask": tool(name=PROBE_ASK_TOOL, needs_approval=True)(probe),
    }


def probe_target(model: Any, effects: Effects) -> Agent:
    """The synthetic handoff target: it answers, fails or blocks as the path scripts it."""

    async def block(context: ToolContext[Any]) -> str:
        """Wait until the run that handed off is stopped."""
        effects.block()
        await asyncio.Event().wait()
        return ""

    return Agent(
        name=PROBE_TARGET,
        model=model,
        instructions="A handoff target of `helikon test`.",
        tools=[tool(name=PROBE_BLOCK_TOOL)(block)],
        description="A handoff target of helikon test.",
    )


def probe_effects(agent: Agent, effects: Effects) -> tuple[Effect, ...]:
    """The agent's effects, each replaced by a probe of its name that returns (or raises)
    what the path planned: the test plans effect results as it plans model responses."""

    def probe(name: str, idempotent: bool) -> Effect:
        async def run(context: EffectContext) -> JsonValue:
            return effects.effect_output(name)

        return Effect(name, run, idempotent)

    return tuple(probe(each.name, each.idempotent) for each in agent.effects)


def variant(
    agent: Agent, setup: Setup, effects: Effects = NO_EFFECTS, *, approvals: bool = False
) -> Agent:
    """`agent` (built around the path's model) changed as `setup` says.

    Args:
        approvals: decide approvals in process with `effects.approve` (else the run
            suspends for them).
    """
    probes = probe_tools(effects)
    tools = [*(() if setup.bare else agent.tools), *(probes[name] for name in setup.probes)]
    handoffs = [*(() if setup.bare else agent.handoffs)]
    if setup.handoff:
        handoffs.append(probe_target(agent.model, effects))
    output = {"own": agent.output_type, "none": None, "probe": ProbeAnswer}[setup.output]
    config = replace(
        agent.config,
        max_turns=setup.max_turns,
        token_budget=setup.token_budget,
        compaction_threshold=setup.compaction_threshold,
    )
    handler = effects.approve if approvals else None
    guardrails = (probe_guardrail(effects),) if setup.guarded else ()
    return replace(
        _input_guarded(agent, setup, effects),
        tools=tuple(tools),
        handoffs=tuple(handoffs),
        output_type=output,
        config=config,
        on_approval=handler,
        effects=probe_effects(agent, effects),
        output_guardrails=guardrails,
    )


def _input_guarded(agent: Agent, setup: Setup, effects: Effects) -> Agent:
    """`agent` with the probe input guardrail as `setup` says, on a chart that checks its
    input as rows; on any other, its own input guardrails run as the loop's rule says."""
    if "CheckingInput" not in (agent.chart or DEFAULT_TABLE).dispatch:
        return agent
    guardrails = (probe_input_guardrail(effects),) if setup.input_guarded else ()
    return replace(agent, input_guardrails=guardrails)


def probe_guardrail(effects: Effects) -> OutputGuardrail:
    """The output guardrail a guarded setup gives: its verdict is the one the path planned."""

    async def check(output: Any, context: RunContext[Any]) -> GuardrailResult:
        return await effects.verdict()

    return OutputGuardrail(PROBE_GUARDRAIL, check)


def probe_input_guardrail(effects: Effects) -> InputGuardrail:
    """The input guardrail a setup gives: its verdict is the one the path planned."""

    async def check(text: str, context: RunContext[Any]) -> GuardrailResult:
        return await effects.verdict()

    return InputGuardrail(PROBE_GUARDRAIL, check)


class SetupRefused(Exception):
    """A setup makes an agent the driver refuses (two tools of one name, ...)."""


class Bench:
    """A subject's agent as written (`agent`, `base`) and the context of each setup."""

    def __init__(self, subject: Subject) -> None:
        self.subject = subject
        self.agent = subject.agent(ScriptedModel([]))
        self.base = Setup.of(self.agent)
        self._contexts: dict[Setup, TransitionCtx | SetupRefused] = {}
        self.table: TransitionTable = self.ctx(self.base).table

    def ctx(self, setup: Setup) -> TransitionCtx:
        """The context the driver gives a run under `setup`.

        Raises:
            SetupRefused: the driver refuses the agent `setup` makes.
        """
        found = self._contexts.get(setup)
        if found is None:
            try:
                found = Run(variant(self.agent, setup)).ctx
            except ValueError as exc:
                found = SetupRefused(f"{self.subject.name}: {exc}")
            self._contexts[setup] = found
        if isinstance(found, SetupRefused):
            raise found
        return found
