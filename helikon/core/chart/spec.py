"""`ChartSpec`: what a chart class declares, as plain data, before it is checked and compiled.

`compile_chart` reads a chart class into a spec (`read_chart`), checks it
(`helikon.core.chart.validate`) and builds the table from it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from helikon.core.state import EFFECT_RESULT
from helikon.core.table import Phase, Row

# What each built-in phase waits for; a custom phase waits for a model response (an effect
# phase for its effect's result) unless the chart's `awaits` says otherwise. Every
# non-terminal phase also takes cancel and fail.
BUILTIN_AWAITS: Mapping[str, tuple[str, ...]] = {
    "CallingModel": ("model_response",),
    "ExecutingTools": ("tool_results",),
    "NeedsApproval": ("approval_decisions",),
    "ApplyingHandoff": ("handoff_result",),
    "Finalizing": ("model_response",),
    "RepairingOutput": ("model_response",),
    "Compacting": ("model_response",),
}
ALWAYS_AWAITED = ("cancel", "fail")


@dataclass(frozen=True, slots=True)
class ChartSpec:
    """What a chart class declares, as plain data; `rows` are in declaration order."""

    name: str
    initial: str
    phases: tuple[Phase, ...]
    rows: tuple[Row, ...]
    awaits: Mapping[str, tuple[str, ...]]
    prompts: Mapping[str, str]
    effects: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    def awaited(self, phase: Phase) -> tuple[str, ...]:
        """The input kinds `phase` must have rows for."""
        if phase.final:
            return ()
        default = (EFFECT_RESULT,) if phase.name in self.effects else ("model_response",)
        own = self.awaits.get(phase.name) or BUILTIN_AWAITS.get(phase.name, default)
        start = ("start",) if phase.name == self.initial else ()
        declared = tuple(row.input_kind for row in self.rows if row.source == phase.name)
        return tuple(dict.fromkeys((*start, *own, *declared, *ALWAYS_AWAITED)))
