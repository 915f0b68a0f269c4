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

from helikon.chart.compile import ChartSpec
from helikon.chart.table import Row
from helikon.errors import ChartDefinitionError

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
        check_terminals,
        lambda s: check_names(s, guards, actions),
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


def check_terminals(spec: ChartSpec) -> Iterator[Problem]:
    """A loop chart ends in Done or Failed, both final states."""
    finals = {phase.name for phase in spec.phases if phase.final}
    for name in ("Done", "Failed"):
        if name not in finals:
            yield Problem(name, None, "a loop chart needs a final state with this name")
    for phase in spec.phases:
        if phase.final and phase.name not in ("Done", "Failed"):
            yield Problem(phase.name, None, "the only final states are Done and Failed")


def check_names(
    spec: ChartSpec, guards: Mapping[str, Any], actions: Mapping[str, Any]
) -> Iterator[Problem]:
    """Every guard and action name resolves to a registered function."""
    for row in spec.rows:
        for ref in row.guards:
            if ref.name not in guards:
                yield Problem(row.source, row.input_kind, f"unknown guard {ref.name!r}")
        if row.action not in actions:
            yield Problem(row.source, row.input_kind, f"unknown action {row.action!r}")


def _edges(spec: ChartSpec) -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {phase.name: set() for phase in spec.phases}
    for row in spec.rows:
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
    for row in spec.rows:
        backwards[row.target].add(row.source)
    finals = {phase.name for phase in spec.phases if phase.final}
    finishing = _closure(finals, backwards)
    for phase in spec.phases:
        if phase.name not in finishing:
            yield Problem(phase.name, None, "cannot reach Done or Failed")


def _pairs(spec: ChartSpec) -> dict[tuple[str, str], list[Row]]:
    pairs: dict[tuple[str, str], list[Row]] = {}
    for row in spec.rows:
        pairs.setdefault((row.source, row.input_kind), []).append(row)
    return pairs


def check_coverage(spec: ChartSpec) -> Iterator[Problem]:
    """Every reachable phase has rows, ending in an unguarded fallback, for what it awaits."""
    pairs = _pairs(spec)
    live = reachable(spec)
    for phase in spec.phases:
        if phase.final and any(row.source == phase.name for row in spec.rows):
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
                yield Problem(source, kind, _dead_reason(row, rows[:position]))


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


def _dead_reason(row: Row, earlier: list[Row]) -> str:
    shown = " and ".join(map(str, row.guards)) or "no guard"
    names = {ref.name for ref in row.guards}
    if any(
        ref.name == other.name and ref.expected != other.expected
        for ref in row.guards
        for other in row.guards
    ):
        return f"row -> {row.target} [{shown}] can never fire: its guards contradict"
    wins = next(
        (
            other
            for other in earlier
            if {ref.name for ref in other.guards} <= names or not other.guards
        ),
        earlier[-1] if earlier else None,
    )
    winner = " and ".join(map(str, wins.guards)) if wins and wins.guards else "no guard"
    target = wins.target if wins else "?"
    return (
        f"row -> {row.target} [{shown}] can never fire: "
        f"an earlier row -> {target} [{winner}] always wins"
    )
