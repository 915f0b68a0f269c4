"""`compile_chart`: a chart (a `ChartSpec`, or a chart class read into one) in, a frozen
`TransitionTable` out, as small pure passes.

    read_chart    a class's states and transitions -> a `ChartSpec` of plain rows, a
                  `from_.any()` row read once (`ChartSpec.everywhere`)
    check_chart   every compile-time check (helikon.core.chart.validate), all problems at once
    build_table   resolve guard and action names, add the implicit rows (a turn-limit check
                  before each row opening a turn, helikon.core.chart.turns; a fallback
                  where a phase has no row for an input), freeze

The chart class is read, never instantiated.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from statemachine import StateChart
from statemachine.state import AnyState

from helikon.core.chart.actions import ACTIONS, IMPLICIT_ACTIONS, Action, hold_input
from helikon.core.chart.guards import GUARDS, Guard
from helikon.core.chart.input_check import compiled_checks, is_twin, resumes
from helikon.core.chart.spec import ChartSpec, EverywhereRow
from helikon.core.chart.turns import checked_phases, numbered, turn_phases, with_limit
from helikon.core.chart.validate import check_chart
from helikon.core.errors import ChartDefinitionError
from helikon.core.state import BUILTIN_PHASES, EFFECT_RESULT, GUARDRAIL_VERDICT, INPUT_KINDS
from helikon.core.table import CompiledRow, GuardRef, Phase, Row, TransitionTable


def compile_chart(
    chart: Any,
    guards: Mapping[str, Guard] | None = None,
    actions: Mapping[str, Action] | None = None,
) -> TransitionTable:
    """Compile a chart into a frozen `TransitionTable`.

    Args:
        chart: a `ChartSpec` (what `extend(...).build()` returns), or a `LoopChart`
            (python-statemachine `StateChart`) subclass, not an instance.
        guards: extra named guards, added to (and overriding) the default ones and the
            chart's own (`ChartSpec.guards`, a chart class's `guards` attribute).
        actions: extra named actions, added to (and overriding) the default ones and the
            chart's own (`ChartSpec.actions`, a chart class's `actions` attribute).

    Raises:
        ChartDefinitionError: the chart cannot be compiled; the message lists every
            problem, each naming its state and input.
    """
    spec = chart if isinstance(chart, ChartSpec) else read_chart(chart)
    guard_fns = {**GUARDS, **spec.guards, **(guards or {})}
    action_fns = {**ACTIONS, **spec.actions, **(actions or {})}
    check_chart(spec, guard_fns, action_fns)
    return build_table(spec, guard_fns, action_fns)


def _own(chart: Any, registry: str) -> Mapping[str, Any]:
    """The guards or actions a chart class carries (`LoopChart.guards`, `.actions`)."""
    found = getattr(chart, registry, None) or {}
    if not isinstance(found, Mapping):
        raise ChartDefinitionError(
            f"chart {chart.__name__}: {registry} must map names to functions, got {found!r}"
        )
    return MappingProxyType(dict(found))


def read_chart(chart: Any) -> ChartSpec:
    """Read a chart class into a `ChartSpec`, refusing what helikon cannot interpret.

    A `from_.any()` transition, which python-statemachine copies onto every non-final
    state, is read once, as an `everywhere` row.
    """
    if not (inspect.isclass(chart) and issubclass(chart, StateChart)):
        raise ChartDefinitionError(_not_a_chart(chart))
    if not chart.states or chart.initial_state is None:
        raise ChartDefinitionError(f"chart {chart.__name__} declares no states")
    phases = tuple(_phase(state) for state in chart.states)
    names = _unique_names(phases)
    copies = _everywhere_copies(chart)
    rows: list[Row] = []
    everywhere: dict[int, list[EverywhereRow]] = {}
    for state in chart.states:
        for transition in state.transitions:
            _check_transition(chart.__name__, state, transition, names)
            for event in transition.events:
                row = _row(len(rows), state, transition, str(event))
                if id(transition) in copies:
                    every = EverywhereRow(row.input_kind, row.guards, row.target, row.action)
                    everywhere.setdefault(id(state), []).append(every)
                else:
                    rows.append(row)
    return ChartSpec(
        chart.__name__,
        chart.initial_state.name,
        phases,
        tuple(rows),
        MappingProxyType(dict(getattr(chart, "awaits", {}))),
        MappingProxyType(dict(getattr(chart, "prompts", {}))),
        MappingProxyType(dict(getattr(chart, "effects", {}))),
        _one_everywhere(chart, everywhere),
        checks_input=bool(getattr(chart, "checks_input", False)),
        guards=_own(chart, "guards"),
        actions=_own(chart, "actions"),
    )


def _everywhere_copies(chart: Any) -> set[int]:
    """The ids of the transitions python-statemachine copied from a `from_.any()` one onto
    each non-final state (`AnyState._copies`)."""
    return {
        id(copy)
        for event in chart._events
        for transition in event._transitions
        if isinstance(transition.source, AnyState)
        for copy in transition.source._copies.values()
    }


def _one_everywhere(chart: Any, found: dict[int, list[EverywhereRow]]) -> tuple[EverywhereRow, ...]:
    """The `everywhere` rows, which every non-final state has alike, after its own rows."""
    lists = [found.get(id(state), []) for state in chart.states if not state.final]
    if any(rows != lists[0] for rows in lists):
        raise ChartDefinitionError(
            f"chart {chart.__name__}: its from_.any() transitions differ from state to state"
        )
    return tuple(lists[0]) if lists else ()


def _not_a_chart(chart: Any) -> str:
    if isinstance(chart, StateChart):
        name = type(chart).__name__
        return (
            f"expected a chart class, got an instance of {name}; "
            f"pass the class itself: compile_chart({name})"
        )
    return f"expected a LoopChart (python-statemachine StateChart) subclass, got {chart!r}"


def _unique_names(phases: tuple[Phase, ...]) -> frozenset[str]:
    names: set[str] = set()
    for phase in phases:
        if phase.name in names:
            raise ChartDefinitionError(
                f"state {phase.name}: two states have this name; a phase name must be unique",
                state=phase.name,
            )
        names.add(phase.name)
    return frozenset(names)


def _check_transition(chart: str, state: Any, transition: Any, names: frozenset[str]) -> None:
    """Refuse what a row would silently drop: no event, a foreign target, unread callbacks."""
    target = transition.target.name if transition.target is not None else "?"
    events = [str(event) for event in transition.events]
    if not events:
        raise ChartDefinitionError(
            f"state {state.name} -> {target}: a transition without an event is never taken "
            "in a loop chart; add it to an input kind's alternatives (model_response = ... | ...)",
            state=state.name,
        )
    where = f"state {state.name}, input {events[0]} -> {target}"
    located = {"state": state.name, "input_kind": events[0]}
    outside = [t.name for t in transition.targets if t.name not in names]
    if outside:
        raise ChartDefinitionError(
            f"{where}: {', '.join(outside)} is not a state of chart {chart}; python-statemachine "
            "shares State objects between a chart and its subclasses, so a subclass that adds "
            "a transition to an inherited state changes the parent chart too",
            **located,
        )
    unread = [
        f"{group}={spec.func!r}"
        for group in ("before", "after", "validators")
        for spec in getattr(transition, group)
        if not spec.is_convention
    ]
    if unread:
        raise ChartDefinitionError(
            f"{where}: {', '.join(unread)} would never run: a loop chart reads only cond=, "
            "unless= and on=; do the work in the row's action",
            **located,
        )


def _phase(state: Any) -> Phase:
    if state.is_compound or state.parallel:
        raise ChartDefinitionError(
            f"state {state.name}: nested and parallel states are not supported in loop charts",
            state=state.name,
        )
    return Phase(state.name, bool(state.final), state.name not in BUILTIN_PHASES)


def _row(index: int, state: Any, transition: Any, event: str) -> Row:
    where = f"state {state.name}, input {event}"
    if event not in INPUT_KINDS and event not in (EFFECT_RESULT, GUARDRAIL_VERDICT):
        raise ChartDefinitionError(
            f"{where}: unknown input kind {event!r}; "
            f"events must be one of {', '.join((*INPUT_KINDS, EFFECT_RESULT, GUARDRAIL_VERDICT))}",
            state=state.name,
            input_kind=event,
        )
    if len(transition.targets) != 1:
        raise ChartDefinitionError(
            f"{where}: a row needs exactly one target", state=state.name, input_kind=event
        )
    guards = tuple(_guard(spec, where, state.name, event) for spec in transition.cond)
    action = _action_name(transition, f"{where} -> {transition.target.name}", state.name, event)
    return Row(index, state.name, event, guards, transition.target.name, action)


def _action_name(transition: Any, where: str, state: str, event: str) -> str:
    actions = [spec.func for spec in transition.on if not spec.is_convention]
    if len(actions) == 1 and isinstance(actions[0], str) and actions[0].isidentifier():
        return actions[0]
    if not actions:
        found = "it has none"
    elif len(actions) > 1:
        found = f"it has {len(actions)}: {', '.join(map(repr, actions))}"
    else:
        found = f"{actions[0]!r} is not a registered action name"
    raise ChartDefinitionError(
        f'{where}: a row needs exactly one action, named with on="..."; {found}',
        state=state,
        input_kind=event,
    )


def _guard(spec: Any, where: str, state: str, event: str) -> GuardRef:
    if not isinstance(spec.func, str) or not spec.func.isidentifier():
        raise ChartDefinitionError(
            f"{where}: guard {spec.func!r} must be a single registered guard name; "
            "use cond= for guards that must hold and unless= for guards that must not",
            state=state,
            input_kind=event,
        )
    return GuardRef(spec.func, bool(spec.expected_value))


def build_table(
    spec: ChartSpec, guards: Mapping[str, Guard], actions: Mapping[str, Action]
) -> TransitionTable:
    """Freeze a checked spec: resolve names, count turns and make the table total with
    implicit rows."""
    declared = spec.table_rows
    rows = list(declared)
    turns = turn_phases(spec.phases, declared, spec.effects)
    checked = checked_phases(spec.phases, declared, turns)
    dispatch: dict[str, dict[str, tuple[CompiledRow, ...]]] = {}
    # A chart without effect phases has no effect_result rows at all, nor one without a
    # guardrail check guardrail_verdict rows: its table, and its digest, are what they were
    # before effect phases and guardrail phases existed.
    kinds = (*INPUT_KINDS, EFFECT_RESULT) if spec.effects else INPUT_KINDS
    if any(row.input_kind == GUARDRAIL_VERDICT for row in declared):
        kinds = (*kinds, GUARDRAIL_VERDICT)
    for phase in spec.phases:
        by_kind: dict[str, tuple[CompiledRow, ...]] = {}
        for kind in kinds:
            own = [row for row in declared if row.source == phase.name and row.input_kind == kind]
            own = with_limit(own, turns, checked, len(rows))
            rows.extend(row for row in own if row.implicit)
            if not own:
                action = "absorb" if phase.final else "reject_input"
                target = phase.name if phase.final else "Failed"
                own = [Row(len(rows), phase.name, kind, (), target, action, implicit=True)]
                rows.extend(own)
            by_kind[kind] = tuple(_compiled(row, guards, actions, turns, declared) for row in own)
        dispatch[phase.name] = by_kind
    used_guards = {ref.name for row in rows for ref in row.guards}
    used_actions = {row.action for row in rows}
    return TransitionTable(
        spec.name,
        spec.initial,
        spec.phases,
        tuple(rows),
        dispatch,
        MappingProxyType({name: _doc(guards[name]) for name in sorted(used_guards)}),
        MappingProxyType({name: _doc(_action(name, actions)) for name in sorted(used_actions)}),
        spec.prompts,
        spec.effects,
        spec.everywhere_rows(),
    )


def _compiled(
    row: Row,
    guards: Mapping[str, Guard],
    actions: Mapping[str, Action],
    turns: frozenset[str],
    declared: tuple[Row, ...],
) -> CompiledRow:
    checks = compiled_checks(row, lambda ref: (guards[ref.name], ref.expected))
    if is_twin(row):  # its start row's action, held: the start row is the next one
        start = _compiled(declared[row.index + 1], guards, actions, turns, declared)
        return CompiledRow(checks, hold_input(start.action, start.target), row.target, row)
    action = _action(row.action, actions)
    if row.target in turns and not row.implicit and not resumes(row):  # its turn is held
        action = numbered(action)
    return CompiledRow(checks, action, row.target, row)


def _action(name: str, actions: Mapping[str, Action]) -> Action:
    return actions[name] if name in actions else IMPLICIT_ACTIONS[name]


def _doc(function: Any) -> str:
    return inspect.getdoc(function) or ""
