"""`Subject`: what chart tests run, an agent built around the model a path scripts.

A subject is an agent factory (`agent(model)`, as a chart module defines it), the input its
runs start with, what its tools get as `deps`, and the witnesses of the chart's own guards.
`Subject.of_module` reads a chart module (`agent`, `EXAMPLE_INPUT`, `deps`, `WITNESSES`);
`Subject.of_table` is a bare agent on a compiled chart.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from pydantic import JsonValue

from helikon.charttest.draft import Witness
from helikon.charttest.setup import PROBE_EFFECT_OUTPUT
from helikon.core.table import TransitionTable
from helikon.run.agent import Agent
from helikon.run.chart_effects import Effect, EffectContext

DEFAULT_INPUT = "Hello."


async def _probe_output(context: EffectContext) -> JsonValue:
    return PROBE_EFFECT_OUTPUT


@dataclass(frozen=True)
class Subject:
    """An agent to test its chart through (see the module docstring).

    Args:
        name: how reports name it (a chart file, `default`).
        agent: builds the agent around a model: the path's `ScriptedModel`.
        input: the user's message each run starts with.
        deps: builds what the agent's tools get as `context.deps`, once per run.
        witnesses: witnesses of the chart's own guards, by guard name (added to, and
            overriding, helikon's).
    """

    name: str
    agent: Callable[[Any], Agent]
    input: str = DEFAULT_INPUT
    deps: Callable[[], Any] | None = None
    witnesses: Mapping[str, Witness] = field(default_factory=dict)

    @classmethod
    def of_table(
        cls,
        table: TransitionTable,
        *,
        name: str | None = None,
        witnesses: Mapping[str, Witness] | None = None,
    ) -> Subject:
        """A bare agent (no tools, no instructions) running `table`; the chart's effects
        are probes returning `PROBE_EFFECT_OUTPUT` (a path plans their results anyway)."""
        effects = tuple(Effect(name, _probe_output) for name in sorted(set(table.effects.values())))

        def agent(model: Any) -> Agent:
            return Agent(name="agent", model=model, chart=table, effects=effects)

        return cls(name or table.name, agent, witnesses=dict(witnesses or {}))

    @classmethod
    def of_module(cls, module: ModuleType, *, name: str | None = None) -> Subject:
        """The agent a chart module defines: its `agent(model)`, `EXAMPLE_INPUT`, `deps()`
        and `WITNESSES`.

        Raises:
            ValueError: the module defines no `agent(model)`.
        """
        factory = getattr(module, "agent", None)
        if not callable(factory):
            raise ValueError(f"{module.__name__} defines no agent(model)")
        deps = getattr(module, "deps", None)
        return cls(
            name or module.__name__,
            factory,
            input=getattr(module, "EXAMPLE_INPUT", None) or DEFAULT_INPUT,
            deps=deps if callable(deps) else None,
            witnesses=witnesses_in(module),
        )


def witnesses_in(module: ModuleType) -> dict[str, Witness]:
    """The witnesses a chart module registers: dicts named `WITNESSES` or `<X>_WITNESSES`."""
    found: dict[str, Witness] = {}
    for name, obj in vars(module).items():
        if (name == "WITNESSES" or name.endswith("_WITNESSES")) and isinstance(obj, dict):
            found.update(obj)
    return found
