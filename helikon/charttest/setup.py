"""`Setup`: how a path varies the agent's context to reach rows its own setup cannot.

A setup is plain data: the agent's own limits (max turns, token budget, compaction
threshold), which output type it has (its own, none, or the probe type `ProbeAnswer`),
whether its own tools and handoffs are kept, which probe tools are added (one that is
allowed, one that asks for approval), whether the synthetic handoff target is added, whether
it has an output guardrail (the probe guardrail, in place of its own), whether it has an
input guardrail (the probe guardrail again, on a chart that checks its input as rows), and
how many tokens
the run has spent when it starts. `Setup.of(agent)` is the agent as written;
witnesses change a copy (`Draft.with_setup`), and every step of a path runs under the one
setup the path chose.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal

from pydantic import BaseModel, JsonValue

from helikon.core.errors import ModelCallFailed
from helikon.core.items import Usage

OutputChoice = Literal["own", "none", "probe"]
Probe = Literal["allow", "ask"]

PROBE_TOOL = "helikon_probe"
"""A tool every call of which is allowed; it returns what the path planned for the call."""
PROBE_ASK_TOOL = "helikon_probe_ask"
"""The same tool, asking for approval before every call."""
PROBE_BLOCK_TOOL = "helikon_probe_block"
"""The synthetic handoff target's tool: it arms the root run's deadline and waits for it."""
PROBE_TARGET = "helikon-probe-target"
"""The synthetic handoff target's agent name; its handoff tool is `PROBE_HANDOFF`."""
PROBE_HANDOFF = "transfer_to_helikon_probe_target"
PROBE_GUARDRAIL = "helikon_probe_guardrail"
"""The guardrail a setup gives an agent (output, and input on a chart that checks its input as
rows): it returns the verdict the path planned."""
GUARDRAIL_MESSAGE = "helikon test: the guardrail trips here"
PROBE_OUTPUT = "probe: ok"
"""What a probe tool returns unless a witness planned another result."""
PROBE_EFFECT_OUTPUT: JsonValue = {"probe": "ok"}
"""What a chart's effect returns in a path (its effects are probes, as its tools are)."""
PROBE_TOOLS: dict[Probe, str] = {"allow": PROBE_TOOL, "ask": PROBE_ASK_TOOL}
CHILD_TEXT = "handled"
"""The synthetic handoff target's answer when a path has it succeed."""
CHILD_USAGE = Usage(8, 4, 12, 1)
"""What the synthetic handoff target's one model call reports."""
CHILD_ERROR = ModelCallFailed("unavailable", "helikon test: the handoff target's model fails")
"""How the synthetic handoff target fails when a path has it fail."""


class ProbeAnswer(BaseModel):
    """The output type a setup gives an agent whose own type cannot be built from text."""

    answer: str


VALID_PROBE_ANSWER = '{"answer": "ok"}'
INVALID_ANSWER = "not json"


@dataclass(frozen=True, slots=True)
class Setup:
    """The context one path runs its agent in (see the module docstring).

    `probes` are sorted names from `PROBE_TOOLS`, so equal setups compare and hash equal.
    """

    max_turns: int = 16
    token_budget: int | None = None
    compaction_threshold: int | None = None
    output: OutputChoice = "none"
    bare: bool = False
    probes: tuple[Probe, ...] = ()
    handoff: bool = False
    guarded: bool = False
    input_guarded: bool = False
    spent: int = 0

    @classmethod
    def of(cls, agent: Any) -> Setup:
        """The setup of `agent` as written: its limits and its output type, nothing added."""
        config = agent.config
        return cls(
            max_turns=config.max_turns,
            token_budget=config.token_budget,
            compaction_threshold=config.compaction_threshold,
            output="own" if agent.output_type is not None else "none",
            guarded=bool(agent.output_guardrails),
            input_guarded=bool(agent.input_guardrails),
        )

    def with_probe(self, probe: Probe) -> Setup:
        """This setup with probe tool `probe` added (and its own tools kept, unless bare)."""
        return replace(self, probes=tuple(sorted({*self.probes, probe})))

    def changes(self, base: Setup) -> tuple[str, ...]:
        """What this setup changes from `base`, in words, for the coverage table."""
        said: list[str] = []
        for name in ("max_turns", "token_budget", "compaction_threshold"):
            if getattr(self, name) != getattr(base, name):
                said.append(f"{name}={getattr(self, name)}")
        if self.output != base.output:
            said.append(f"output={self.output}")
        if self.bare:
            said.append("no own tools")
        said += [f"+{PROBE_TOOLS[probe]}" for probe in self.probes]
        if self.handoff:
            said.append(f"+{PROBE_HANDOFF}")
        if self.guarded != base.guarded:
            said.append(f"+{PROBE_GUARDRAIL}" if self.guarded else "no output guardrails")
        if self.input_guarded != base.input_guarded:
            input_said = (
                f"+{PROBE_GUARDRAIL} (input)" if self.input_guarded else "no input guardrails"
            )
            said.append(input_said)
        if self.spent:
            said.append(f"spent={self.spent}")
        return tuple(said)
