"""`ChartSpec`: a chart as plain data, the one form every way of writing a chart produces.

Theory of operation: a chart class (`read_chart`), the composer (`extend(...).build()`) and,
later, chart documents (JSON, YAML, SCXML) all produce a `ChartSpec`; `compile_chart` checks
it (`helikon.core.chart.validate`) and builds the table from it, and nothing downstream reads
a chart class. Names in a spec (guards, actions, effects) resolve against registries, so the
data holds no code; `guards` and `actions` carry the functions a chart registers itself, bound
by name, outside the data a digest is taken of.

A row every non-terminal phase has alike (cancel, fail) is stated once, in `everywhere`, and
each phase takes it after its own rows: the composer gives it to new phases and diagrams draw
it once, both by reading this field. `table_rows` is the rows as the compiled table numbers
them: each phase's own rows, then the `everywhere` ones, phase by phase.

A chart that checks its input guardrails as rows says so once (`checks_input`): its spec
gains the CheckingInput phase, a guarded twin in front of each start row and the phase's
verdict rows (helikon.core.chart.input_check), in `table_rows`, never in `rows`.

Hierarchy (`parents`, `regions`, `history`) has its fields now and is empty for every flat
chart; compiling refuses a spec that fills them until nested charts are supported, and a flat
chart's digest does not depend on them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Literal

from helikon.core.chart.input_check import CHECKING_INPUT, guarded_start, verdict_rows
from helikon.core.errors import ChartDefinitionError
from helikon.core.state import EFFECT_RESULT, GUARDRAIL_VERDICT
from helikon.core.table import GuardRef, Phase, Row

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
    "CheckingOutput": (GUARDRAIL_VERDICT,),
    "CheckingInput": (GUARDRAIL_VERDICT,),
}
ALWAYS_AWAITED = ("cancel", "fail")

History = Literal["shallow", "deep"]


def _empty() -> Mapping[str, Any]:
    return MappingProxyType({})


@dataclass(frozen=True, slots=True)
class EverywhereRow:
    """A row from any non-terminal phase, declared once (`failed.from_.any(on="cancel_run")`):
    on `input_kind`, if all `guards` hold, run `action` and go to `target`."""

    input_kind: str
    guards: tuple[GuardRef, ...]
    target: str
    action: str


@dataclass(frozen=True, slots=True)
class ChartSpec:
    """A chart as plain data: what a chart class, the composer or a chart document declares.

    Attributes:
        name: the chart's name (a class's name).
        initial: the phase a run starts in.
        phases: every phase, in the chart's order (the terminal Done and Failed included).
        rows: each phase's own rows, in priority order within a (phase, input kind);
            their `index` is ignored (`table_rows` numbers them).
        awaits: phase -> the input kinds it waits for, where not the default.
        prompts: phase -> the instructions of a model-calling custom phase.
        effects: effect phase -> the name of the registered effect it runs.
        everywhere: rows every non-terminal phase has after its own (see the module
            docstring).
        checks_input: whether the input guardrails are checked as rows, at the run's
            start (see the module docstring); the CheckingInput phase is added to
            `phases`, after the initial phase, when it is not there.
        parents: phase -> the compound phase it is inside. Empty for a flat chart.
        regions: parallel phase -> its regions (compound phases run side by side). Empty
            for a flat chart.
        history: history pseudo-phase -> "shallow" or "deep". Empty for a flat chart.
        guards: guard functions the chart registers itself, by the names its rows use.
        actions: action functions the chart registers itself, likewise.
        table_rows: derived: the rows as the table numbers them.
    """

    name: str
    initial: str
    phases: tuple[Phase, ...]
    rows: tuple[Row, ...]
    awaits: Mapping[str, tuple[str, ...]] = field(default_factory=_empty)
    prompts: Mapping[str, str] = field(default_factory=_empty)
    effects: Mapping[str, str] = field(default_factory=_empty)
    everywhere: tuple[EverywhereRow, ...] = ()
    checks_input: bool = False
    parents: Mapping[str, str] = field(default_factory=_empty)
    regions: Mapping[str, tuple[str, ...]] = field(default_factory=_empty)
    history: Mapping[str, History] = field(default_factory=_empty)
    guards: Mapping[str, Callable[..., Any]] = field(default_factory=_empty, compare=False)
    actions: Mapping[str, Callable[..., Any]] = field(default_factory=_empty, compare=False)
    table_rows: tuple[Row, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.checks_input and all(p.name != CHECKING_INPUT for p in self.phases):
            at = next(i for i, p in enumerate(self.phases) if p.name == self.initial) + 1
            phases = (*self.phases[:at], Phase(CHECKING_INPUT), *self.phases[at:])
            object.__setattr__(self, "phases", phases)
        object.__setattr__(self, "table_rows", _numbered(self))

    @property
    def flat(self) -> bool:
        """True when the chart has no nested, parallel or history phases."""
        return not (self.parents or self.regions or self.history)

    def everywhere_rows(self) -> tuple[tuple[int, ...], ...]:
        """For each `everywhere` row, the indices of the table rows it becomes, one per
        non-terminal phase, in phase order (each phase's last rows)."""
        count = len(self.everywhere)
        groups: list[list[int]] = [[] for _ in range(count)]
        for phase in self.phases:
            if count and not phase.final:
                mine = [row.index for row in self.table_rows if row.source == phase.name]
                for spot, index in enumerate(mine[-count:]):
                    groups[spot].append(index)
        return tuple(tuple(group) for group in groups)

    def awaited(self, phase: Phase) -> tuple[str, ...]:
        """The input kinds `phase` must have rows for."""
        if phase.final:
            return ()
        default = (EFFECT_RESULT,) if phase.name in self.effects else ("model_response",)
        own = self.awaits.get(phase.name) or BUILTIN_AWAITS.get(phase.name, default)
        start = ("start",) if phase.name == self.initial else ()
        declared = tuple(row.input_kind for row in self.table_rows if row.source == phase.name)
        return tuple(dict.fromkeys((*start, *own, *declared, *ALWAYS_AWAITED)))


def _numbered(spec: ChartSpec) -> tuple[Row, ...]:
    """Each phase's own rows then the `everywhere` rows, numbered in that order."""
    names = {phase.name for phase in spec.phases}
    for row in spec.rows:
        if row.source not in names:
            raise ChartDefinitionError(
                f"state {row.source}, input {row.input_kind}: chart {spec.name} has no such phase",
                state=row.source,
                input_kind=row.input_kind,
            )
    rows: list[Row] = []
    for phase in spec.phases:
        own = [row for row in spec.rows if row.source == phase.name]
        if spec.checks_input and phase.name == spec.initial:
            own = guarded_start(own, spec.initial)
        if spec.checks_input and phase.name == CHECKING_INPUT:
            own = verdict_rows(spec.rows, spec.initial)
        every = [
            Row(0, phase.name, e.input_kind, e.guards, e.target, e.action)
            for e in (() if phase.final else spec.everywhere)
        ]
        rows += [replace(row, index=len(rows) + at) for at, row in enumerate([*own, *every])]
    return tuple(rows)
