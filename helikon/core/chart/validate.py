"""The compile-time checks of a chart, each a pure function from a `ChartSpec` to problems.

`check_chart` runs them all and raises one `ChartDefinitionError` listing every problem,
so a user fixes a broken chart in one pass. Each problem names its state and, where there
is one, its input kind.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from helikon.core.chart.builds import built
from helikon.core.chart.input_check import is_twin
from helikon.core.chart.spec import ChartSpec
from helikon.core.errors import ChartDefinitionError
from helikon.core.state import BUILTIN_PHASES, EFFECT_RESULT, GUARDRAIL_VERDICT, INPUT_KINDS
from helikon.core.table import GuardRef, Row

MAX_GUARDS_PER_PAIR = 16  # 2**16 valuations: the dead-row check stays instant


@dataclass(frozen=True, slots=True)
class Problem:
    state: str
    input_kind: str | None
    message: str

    def __str__(self) -> str:
        where = f"state {self.state}" + (f", input {self.input_kind}" if self.input_kind else "")
        return f"{where}: {self.message}"


def check_chart(spec: ChartSpec, guards: Mapping[str, Any], actions: Mapping[str, Any]) -> None:
    """Raise `ChartDefinitionError` listing every problem of `spec`; return if none."""
    checks: tuple[Callable[[ChartSpec], Iterator[Problem]], ...] = (
        check_flat,
        check_terminals,
        check_declarations,
        lambda s: check_names(s, guards, actions),
        lambda s: check_targets(s, actions),
        check_reachable,
        check_can_finish,
        check_coverage,
        check_dead_rows,
    )
    problems = [problem for check in checks for problem in check(spec)]
    if problems:
        lines = "\n".join(f"  - {problem}" for problem in problems)
        first = problems[0]
        raise ChartDefinitionError(
            f"chart {spec.name} cannot be compiled:\n{lines}",
            state=first.state,
            input_kind=first.input_kind,
        )


def check_flat(spec: ChartSpec) -> Iterator[Problem]:
    """No nested, parallel or history phases yet: the spec has their fields, empty."""
    for name in (*spec.parents, *spec.regions, *spec.history):
        yield Problem(name, None, "nested, parallel and history phases are not supported yet")


def check_terminals(spec: ChartSpec) -> Iterator[Problem]:
    """A loop chart ends in Done or Failed, both final states, and in nothing else."""
    finals = {phase.name for phase in spec.phases if phase.final}
    declared = {phase.name for phase in spec.phases}
    for name in ("Done", "Failed"):
        if name not in declared:
            yield Problem(name, None, f'missing: a loop chart needs State("{name}", final=True)')
        elif name not in finals:
            yield Problem(name, None, f'must be final: declare it State("{name}", final=True)')
    for phase in spec.phases:
        if phase.final and phase.name not in ("Done", "Failed"):
            yield Problem(phase.name, None, "the only final states are Done and Failed")


def check_declarations(spec: ChartSpec) -> Iterator[Problem]:
    """The chart's `awaits`, `prompts` and `effects` name its own phases and real input
    kinds; an effect phase is a custom, non-final phase without a prompt, and only effect
    phases have `effect_result` rows."""
    phases = {phase.name for phase in spec.phases}
    kinds_known = (*INPUT_KINDS, EFFECT_RESULT, GUARDRAIL_VERDICT)
    for name, kinds in spec.awaits.items():
        if name not in phases:
            yield Problem(name, None, "named in awaits, but the chart has no such state")
        for kind in kinds:
            if kind not in kinds_known:
                yield Problem(name, kind, f"awaits names an unknown input kind {kind!r}")
    for name in spec.prompts:
        if name not in phases:
            yield Problem(name, None, "named in prompts, but the chart has no such state")
    yield from _check_effects(spec, phases)


def _check_effects(spec: ChartSpec, phases: set[str]) -> Iterator[Problem]:
    finals = {phase.name for phase in spec.phases if phase.final}
    for name, effect in spec.effects.items():
        if name not in phases:
            yield Problem(name, None, "named in effects, but the chart has no such state")
        elif name in BUILTIN_PHASES or name in finals:
            yield Problem(name, None, "only a custom, non-final phase can run an effect")
        if not (isinstance(effect, str) and effect.isidentifier()):
            yield Problem(name, None, f"the effect's name {effect!r} must be an identifier")
        if name in spec.prompts:
            yield Problem(name, None, "an effect phase calls no model: it takes no prompt")
    for row in spec.table_rows:
        if row.input_kind == EFFECT_RESULT and row.source not in spec.effects:
            yield Problem(row.source, row.input_kind, "only an effect phase gets effect results")


def check_names(
    spec: ChartSpec, guards: Mapping[str, Any], actions: Mapping[str, Any]
) -> Iterator[Problem]:
    """Every guard and action name resolves to a registered function."""
    for row in spec.table_rows:
        for ref in row.guards:
            if ref.name not in guards:
                yield Problem(row.source, row.input_kind, f"unknown guard {ref.name!r}")
        if row.action not in actions:
            yield Problem(row.source, row.input_kind, f"unknown action {row.action!r}")


def check_targets(spec: ChartSpec, actions: Mapping[str, Any]) -> Iterator[Problem]:
    """Every row goes to the phase its action builds (helikon.core.chart.builds). A row
    into a terminal phase other than Done and Failed, or whose action builds a terminal the
    chart lacks, is left to `check_terminals`. A start row's twin (`checks_input`) builds
    what its start row builds, held in CheckingInput: the start row is checked."""
    custom = frozenset(phase.name for phase in spec.phases if phase.custom)
    finals = {phase.name for phase in spec.phases if phase.final}
    for row in spec.table_rows:
        action = None if is_twin(row) else actions.get(row.action)
        builds = built(action, row.target, custom, spec.effects) if action else None
        terminal = builds in ("Done", "Failed") and builds not in finals
        if builds is not None and not terminal and row.target not in finals - {"Done", "Failed"}:
            yield Problem(
                row.source,
                row.input_kind,
                f"row #{row.index} goes to {row.target}, but its action {row.action} builds "
                f"the state of {builds if ' ' in builds else 'phase ' + builds}: make the row "
                f"go there, or run an action that enters {row.target}",
            )


def _edges(spec: ChartSpec) -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {phase.name: set() for phase in spec.phases}
    for row in spec.table_rows:
        edges[row.source].add(row.target)
    return edges


def _closure(start: set[str], edges: Mapping[str, set[str]]) -> set[str]:
    seen, todo = set(start), list(start)
    while todo:
        for nxt in edges.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def reachable(spec: ChartSpec) -> set[str]:
    """Phases some path of rows leads to from the initial phase."""
    return _closure({spec.initial}, _edges(spec))


def check_reachable(spec: ChartSpec) -> Iterator[Problem]:
    """Every state is reachable from the initial one."""
    seen = reachable(spec)
    for phase in spec.phases:
        if phase.name not in seen:
            yield Problem(phase.name, None, f"unreachable from the initial state {spec.initial}")


def check_can_finish(spec: ChartSpec) -> Iterator[Problem]:
    """Every state has a path to Done or Failed."""
    backwards: dict[str, set[str]] = {phase.name: set() for phase in spec.phases}
    for row in spec.table_rows:
        backwards[row.target].add(row.source)
    finals = {phase.name for phase in spec.phases if phase.final}
    finishing = _closure(finals, backwards)
    for phase in spec.phases:
        if phase.name not in finishing:
            yield Problem(phase.name, None, "cannot reach Done or Failed")


def _pairs(spec: ChartSpec) -> dict[tuple[str, str], list[Row]]:
    pairs: dict[tuple[str, str], list[Row]] = {}
    for row in spec.table_rows:
        pairs.setdefault((row.source, row.input_kind), []).append(row)
    return pairs


def check_coverage(spec: ChartSpec) -> Iterator[Problem]:
    """Every reachable phase has rows, ending in an unguarded fallback, for what it awaits."""
    pairs = _pairs(spec)
    live = reachable(spec)
    for phase in spec.phases:
        if phase.final and any(row.source == phase.name for row in spec.table_rows):
            yield Problem(phase.name, None, "a final state cannot have rows")
        if phase.name not in live:
            continue
        for kind in spec.awaited(phase):
            rows = pairs.get((phase.name, kind))
            if not rows:
                yield Problem(phase.name, kind, "no row handles this input")
            elif all(row.guards for row in rows):
                guards = " | ".join(" and ".join(map(str, row.guards)) for row in rows)
                yield Problem(
                    phase.name,
                    kind,
                    f"no unguarded fallback row: when none of [{guards}] holds, nothing fires",
                )


def check_dead_rows(spec: ChartSpec) -> Iterator[Problem]:
    """No row is shadowed: for each row, some guard valuation makes it the first to match."""
    for (source, kind), rows in _pairs(spec).items():
        names = sorted({ref.name for row in rows for ref in row.guards})
        if len(names) > MAX_GUARDS_PER_PAIR:
            yield Problem(source, kind, f"more than {MAX_GUARDS_PER_PAIR} guards on one input")
            continue
        fired = _first_matches(rows, names)
        for position, row in enumerate(rows):
            if position not in fired:
                live = [other for at, other in enumerate(rows[:position]) if at in fired]
                yield Problem(source, kind, _dead_reason(row, live))


def _first_matches(rows: list[Row], names: list[str]) -> set[int]:
    """Positions of the rows that are the first match under some guard valuation."""
    fired: set[int] = set()
    for values in itertools.product((False, True), repeat=len(names)):
        valuation = dict(zip(names, values, strict=True))
        for position, row in enumerate(rows):
            if all(valuation[ref.name] == ref.expected for ref in row.guards):
                fired.add(position)
                break
    return fired


def _shown(row: Row) -> str:
    return f"-> {row.target} [{' and '.join(map(str, row.guards)) or 'no guard'}]"


def _dead_reason(row: Row, earlier: list[Row]) -> str:
    """Why `row` never fires: its own guards contradict, or earlier rows match first.

    `earlier` holds the earlier rows that can fire. One whose guards (name and expected
    value) are a subset of this row's matches whenever this row would; otherwise several
    cover it together, and those compatible with this row's guards are named.
    """
    dead = f"row {_shown(row)} can never fire"
    required = set(row.guards)
    if any(GuardRef(ref.name, not ref.expected) in required for ref in required):
        return f"{dead}: its guards contradict (a guard both required and refused)"
    when = "whenever its guards hold" if required else "in every case"
    single = next((other for other in earlier if set(other.guards) <= required), None)
    if single is not None:
        return f"{dead}: {when}, the earlier row {_shown(single)} also matches, and comes first"
    covering = [
        other
        for other in earlier
        if not any(GuardRef(ref.name, not ref.expected) in required for ref in other.guards)
    ]
    shown = " | ".join(map(_shown, covering))
    return f"{dead}: {when}, one of the earlier rows {shown} matches, and comes first"
