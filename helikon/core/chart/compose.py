"""Composing charts: start from a chart's spec, change a few rows, get a new `ChartSpec`.

python-statemachine fixes a chart's initial state where its states are declared, and a
subclass shares its parent's `State` objects (rows added to an inherited state change the
parent too), so a chart that starts elsewhere, or adds a phase in front of the loop, cannot
be a subclass. `extend(base)` reads the base chart's spec (`ChartSpec`, plain data) instead;
the draft's methods change it, and `build()` returns the new spec, which `compile_chart`
checks and compiles like any chart (`compile()` does both; no class is declared):

    PlanActChart = (
        extend(AGENT_LOOP, "PlanActChart")
        .phase("Planning", initial=True, prompt="Write a short plan first.")
        .rows("Planning", "start", "fail_budget", to("Planning", on="start_planning"))
        .rows("Planning", "model_response", "fail_empty", to("CallingModel", on="record_plan"))
        .actions(start_planning="enter_phase", record_plan="keep_reply")
        .build()
    )

A row is named by its action within its (phase, input kind), or as "action -> Target" when
several of its rows run that action: `retarget("CallingModel", "start", "start_turn ->
CallingModel", to="Retrieving")` sends the default loop's `start` fallback to Retrieving.
The rows the base states for every non-terminal phase (`ChartSpec.everywhere`: `cancel` and
`fail` in the default loop) are given to every phase of the draft, new ones included, after
the phase's own rows.

The built spec lists its phases in the draft's order (an initial phase first, then the
base's phases, a new phase before the terminal ones) and, within a phase, its rows in the
draft's order: so a draft that changes nothing is the base's spec again, with its digest.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any

from helikon.core.chart.actions import ACTIONS
from helikon.core.chart.compile import compile_chart, read_chart
from helikon.core.chart.guards import GUARDS
from helikon.core.chart.spec import ChartSpec
from helikon.core.errors import ChartDefinitionError
from helikon.core.state import BUILTIN_PHASES
from helikon.core.table import GuardRef, Phase, Row, TransitionTable


@dataclass(frozen=True, slots=True)
class RowSpec:
    """A row without its source and input kind: where it goes, when, and what it does."""

    target: str
    guards: tuple[GuardRef, ...]
    action: str


def to(
    target: str,
    *,
    cond: str | tuple[str, ...] = (),
    unless: str | tuple[str, ...] = (),
    on: str,
) -> RowSpec:
    """A row to `target`: `cond` names guards that must hold, `unless` guards that must
    not, `on` the one action (as in `state.to(target, cond=..., unless=..., on=...)`)."""
    held = (cond,) if isinstance(cond, str) else cond
    refused = (unless,) if isinstance(unless, str) else unless
    guards = (*(GuardRef(g) for g in held), *(GuardRef(g, False) for g in refused))
    return RowSpec(target, guards, on)


@dataclass(frozen=True, slots=True)
class _DraftRow:
    source: str
    input_kind: str
    spec: RowSpec


class ChartDraft:
    """A chart being composed from a base chart (see the module docstring); every method
    changes the draft and returns it, so the changes chain. Build one with `extend`."""

    def __init__(self, base: Any, name: str) -> None:
        spec = base if isinstance(base, ChartSpec) else read_chart(base)
        if not spec.flat:
            raise ChartDefinitionError(f"chart {spec.name}: only a flat chart can be extended")
        self.name = name
        self.initial = spec.initial
        self._phases = list(spec.phases)
        self._base = tuple(_DraftRow(r.source, r.input_kind, _spec(r)) for r in spec.table_rows)
        self._everywhere = spec.everywhere
        self._checks_input = spec.checks_input
        self._rows = [_DraftRow(r.source, r.input_kind, _spec(r)) for r in spec.rows]
        self.prompts: dict[str, str] = dict(spec.prompts)
        self.awaits: dict[str, tuple[str, ...]] = dict(spec.awaits)
        self.effects: dict[str, str] = dict(spec.effects)
        self.guard_fns: dict[str, Callable[..., Any]] = dict(spec.guards)
        self.action_fns: dict[str, Callable[..., Any]] = dict(spec.actions)

    # ------------------------------------------------------------ phases

    def phase(
        self,
        name: str,
        *,
        initial: bool = False,
        prompt: str | None = None,
        effect: str | None = None,
        awaits: tuple[str, ...] | None = None,
    ) -> ChartDraft:
        """Add a phase. Give it rows with `rows()`; it takes the common rows already.

        Args:
            name: the phase's name (unique in the chart).
            initial: the run starts here; the previous initial phase's `start` rows are
                dropped (`start` is only ever applied in the initial phase).
            prompt: the instructions of a model-calling phase (its request has no tools).
            effect: the registered effect the phase runs (an effect phase awaits
                `effect_result` instead of a model response; see `helikon.effect`).
            awaits: the input kinds the phase waits for, when not the default.
        """
        if any(p.name == name for p in self._phases):
            raise ChartDefinitionError(
                f"state {name}: the chart has this phase already", state=name
            )
        phase = Phase(name, False, name not in BUILTIN_PHASES)
        if initial:
            self._rows = [
                r for r in self._rows if (r.source, r.input_kind) != (self.initial, "start")
            ]
            self.initial = name
            self._phases.insert(0, phase)
        else:
            finals = [i for i, p in enumerate(self._phases) if p.final]
            self._phases.insert(finals[0] if finals else len(self._phases), phase)
        if prompt is not None:
            self.prompts[name] = prompt
        if effect is not None:
            self.effects[name] = effect
        if awaits is not None:
            self.awaits[name] = awaits
        return self

    # ------------------------------------------------------------ rows

    def rows(self, source: str, input_kind: str, *rows: RowSpec | str) -> ChartDraft:
        """Make `rows` (in priority order) the rows of `source` on `input_kind`, replacing
        any it had; a new (phase, input) pair's rows go after the phase's others.

        A row given as a string is the base chart's row on `input_kind` that runs that
        action, copied with its guards and target: `"fail_budget"` on `start` is the
        default loop's budget check.
        """
        at = self._positions(source, input_kind)
        new = [_DraftRow(source, input_kind, self._resolve(input_kind, row)) for row in rows]
        if at:
            kept = [r for i, r in enumerate(self._rows) if i not in set(at)]
            self._rows = [*kept[: at[0]], *new, *kept[at[0] :]]
        else:
            self._rows.extend(new)
        return self

    def insert(
        self, source: str, input_kind: str, *rows: RowSpec | str, before: str | None = None
    ) -> ChartDraft:
        """Add `rows` (as in `rows()`) to the rows of `source` on `input_kind`: before the
        row named `before` (as `retarget` names rows), or by default before the unguarded
        fallback."""
        at = self._positions(source, input_kind)
        if not at:
            return self.rows(source, input_kind, *rows)
        if before is not None:
            where = self._named(source, input_kind, before)
        else:
            fallback = [i for i in at if not self._rows[i].spec.guards]
            where = fallback[-1] if fallback else at[-1] + 1
        new = [_DraftRow(source, input_kind, self._resolve(input_kind, row)) for row in rows]
        self._rows[where:where] = new
        return self

    def retarget(
        self, source: str, input_kind: str, action: str, *, to: str, on: str | None = None
    ) -> ChartDraft:
        """The row of `source` on `input_kind` named `action` (its action, or "action ->
        Target" when several rows there run it) now goes `to` another phase, running action
        `on` when given; its guards stay."""
        self._phase(to)
        where = self._named(source, input_kind, action)
        row = self._rows[where]
        spec = replace(row.spec, target=to, action=on or row.spec.action)
        self._rows[where] = replace(row, spec=spec)
        return self

    def drop(self, source: str, input_kind: str, action: str | None = None) -> ChartDraft:
        """Remove the row named by `action` (or, without one, every row) of `source` on
        `input_kind`."""
        if action is None:
            at = set(self._positions(source, input_kind))
            if not at:
                raise self._missing(source, input_kind, "has no rows")
        else:
            at = {self._named(source, input_kind, action)}
        self._rows = [r for i, r in enumerate(self._rows) if i not in at]
        return self

    # ------------------------------------------------------------ guards and actions

    def guards(self, *fns: Callable[..., Any], **named: Callable[..., Any] | str) -> ChartDraft:
        """Register guards, by their function names or as name=function; name="other" runs
        the default guard `other` under this name. The built chart carries them, so
        `compile_chart(chart)` finds them."""
        self.guard_fns.update({fn.__name__: fn for fn in fns}, **_resolved(named, GUARDS, "guard"))
        return self

    def actions(self, *fns: Callable[..., Any], **named: Callable[..., Any] | str) -> ChartDraft:
        """Register actions, as `guards` does: `record_plan="keep_reply"` runs the default
        action `keep_reply` in the rows that name `record_plan`."""
        self.action_fns.update(
            {fn.__name__: fn for fn in fns}, **_resolved(named, ACTIONS, "action")
        )
        return self

    # ------------------------------------------------------------ building

    def build(self) -> ChartSpec:
        """The chart's spec: the draft's phases, and each phase's rows in the draft's order.

        Raises:
            ChartDefinitionError: a row names a phase the draft does not have. (The other
                checks are `compile_chart`'s.)
        """
        names = {p.name for p in self._phases}
        for row in self._rows:
            if row.spec.target not in names:
                raise self._missing(
                    row.source, row.input_kind, f"names {row.spec.target!r}, which is not a phase"
                )
        rows = tuple(
            Row(at, r.source, r.input_kind, r.spec.guards, r.spec.target, r.spec.action)
            for at, r in enumerate(self._rows)
        )
        return ChartSpec(
            self.name,
            self.initial,
            tuple(self._phases),
            rows,
            MappingProxyType(dict(self.awaits)),
            MappingProxyType(dict(self.prompts)),
            MappingProxyType(dict(self.effects)),
            self._everywhere,
            self._checks_input,
            guards=MappingProxyType(dict(self.guard_fns)),
            actions=MappingProxyType(dict(self.action_fns)),
        )

    def compile(
        self,
        guards: Mapping[str, Callable[..., Any]] | None = None,
        actions: Mapping[str, Callable[..., Any]] | None = None,
    ) -> TransitionTable:
        """The built spec, compiled: `compile_chart(self.build(), guards, actions)`.

        Raises:
            ChartDefinitionError: as `build` and `compile_chart` do.
        """
        return compile_chart(self.build(), guards, actions)

    # ------------------------------------------------------------ finding rows

    def _phase(self, name: str) -> None:
        if not any(p.name == name for p in self._phases):
            phases = ", ".join(p.name for p in self._phases)
            raise ChartDefinitionError(
                f"state {name}: chart {self.name} has no such phase (its phases: {phases}); "
                "add it with .phase()",
                state=name,
            )

    def _positions(self, source: str, input_kind: str) -> list[int]:
        self._phase(source)
        return [
            i for i, r in enumerate(self._rows) if (r.source, r.input_kind) == (source, input_kind)
        ]

    def _named(self, source: str, input_kind: str, name: str) -> int:
        """The position of the row of (source, input_kind) named `name`: its action, or
        "action -> Target" when several rows of the pair run that action."""
        action, _, target = (part.strip() for part in name.partition("->"))
        at = [
            i
            for i in self._positions(source, input_kind)
            if self._rows[i].spec.action == action and target in ("", self._rows[i].spec.target)
        ]
        if len(at) != 1:
            rows = [self._rows[i].spec for i in self._positions(source, input_kind)]
            found = ", ".join(f"{r.action} -> {r.target}" for r in rows) or "none"
            count = "no row" if not at else f"{len(at)} rows"
            raise self._missing(
                source,
                input_kind,
                f"{count} named {name!r} (its rows: {found}; name one as 'action -> Target')",
            )
        return at[0]

    def _resolve(self, input_kind: str, row: RowSpec | str) -> RowSpec:
        """A row as given, or the base's row on `input_kind` that runs action `row`."""
        if isinstance(row, RowSpec):
            return row
        found = {r.spec for r in self._base if r.input_kind == input_kind and r.spec.action == row}
        if len(found) == 1:
            return found.pop()
        named = sorted({r.spec.action for r in self._base if r.input_kind == input_kind})
        count = "no row" if not found else f"{len(found)} different rows"
        raise ChartDefinitionError(
            f"input {input_kind}: the base chart has {count} named {row!r} on this input "
            f"(its rows on it run: {', '.join(named) or 'nothing'}); give the row with to()",
            input_kind=input_kind,
        )

    def _missing(self, source: str, input_kind: str, what: str) -> ChartDefinitionError:
        return ChartDefinitionError(
            f"state {source}, input {input_kind}: {what}", state=source, input_kind=input_kind
        )


def extend(base: Any, name: str) -> ChartDraft:
    """A draft of chart `name`, starting from the rows of `base`: a chart class (for example
    `AGENT_LOOP`, helikon's default loop) or a `ChartSpec` (a chart built before); see
    `ChartDraft`."""
    return ChartDraft(base, name)


def _resolved(
    named: Mapping[str, Callable[..., Any] | str], defaults: Mapping[str, Any], what: str
) -> dict[str, Callable[..., Any]]:
    """Functions by name, a string standing for the default function of that name."""
    found: dict[str, Callable[..., Any]] = {}
    for name, fn in named.items():
        if isinstance(fn, str):
            if fn not in defaults:
                raise ChartDefinitionError(
                    f"{name}={fn!r}: helikon has no default {what} {fn!r} "
                    f"(its {what}s: {', '.join(sorted(defaults))})"
                )
            fn = defaults[fn]
        found[name] = fn
    return found


def _spec(row: Row) -> RowSpec:
    return RowSpec(row.target, row.guards, row.action)


__all__ = ["ChartDraft", "RowSpec", "extend", "to"]
