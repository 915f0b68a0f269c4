"""Turns: which phases' model calls count against `max_turns`, and the rows that open them.

Theory of operation: a turn is one model call made in CallingModel or in a custom phase that
calls the model (a custom phase with `model_response` rows that runs no effect). Entering
such a phase opens a turn, whichever row enters it, so counting is a property of the phase,
not of rows a custom chart could forget:

- `build_table` puts an implicit row `[turn_limit_reached] -> Failed` (`fail_max_turns`)
  before the first row of a pair that enters a turn phase, unless the turn it opens was
  checked already: by an earlier row of the pair, or before the run entered the pair's phase
  (`checked_phases`: Compacting in the default loop, entered only after ExecutingTools'
  check). `start` is exempt: it opens the first turn, and `max_turns` >= 1. So the default
  loop and every chart that was bounded before keep their rows and digest;
- the action of a row entering a turn phase is `numbered`: the state it enters carries the
  turn's number (`guards.opening_turn`), whatever number the action chose.

Finalizing, RepairingOutput and Compacting call the model without making a turn (they are
bounded: see docs/semantics.md). `unbounded_cycles` finds the parts of a chart that loop
with neither a turn nor a budget check, for `helikon validate` to warn about.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from helikon.core.chart.guards import opening_turn
from helikon.core.table import GuardRef, Phase, Row

EXEMPT = frozenset({"Finalizing", "RepairingOutput", "Compacting"})
LIMIT = GuardRef("turn_limit_reached")
CHECKS = frozenset({"turn_limit_reached", "budget_exhausted"})


def turn_phases(
    phases: tuple[Phase, ...], rows: tuple[Row, ...], effects: Mapping[str, str]
) -> frozenset[str]:
    """The phases whose model calls are turns: CallingModel and model-calling custom ones."""
    answered = {row.source for row in rows if row.input_kind == "model_response"}
    return frozenset(
        p.name
        for p in phases
        if p.name == "CallingModel" or (p.custom and p.name in answered and p.name not in effects)
    )


def opens_turn(row: Row, turns: frozenset[str]) -> bool:
    """The row enters a turn phase after the first turn (`start` opens the first)."""
    return row.target in turns and row.input_kind != "start" and not row.implicit


def with_limit(
    rows: list[Row], turns: frozenset[str], checked: frozenset[str], index: int
) -> list[Row]:
    """A pair's rows, with the implicit limit check (numbered `index`) before the first that
    opens a turn, unless an earlier row, or the pair's phase, checks the limit already."""
    if rows and rows[0].source in checked:
        return rows
    for position, row in enumerate(rows):
        if row.guards == (LIMIT,):
            return rows
        if opens_turn(row, turns):
            check = Row(
                index, row.source, row.input_kind, (LIMIT,), "Failed", "fail_max_turns", True
            )
            return [*rows[:position], check, *rows[position:]]
    return rows


def checked_phases(
    phases: tuple[Phase, ...], rows: tuple[Row, ...], turns: frozenset[str]
) -> frozenset[str]:
    """The phases, making no turn, that a run only ever enters with its next turn checked:
    every row into one is a `start` row, follows a limit check in its pair, or leaves another
    such phase (which carries the turn number checked)."""
    after = _after_checks(rows)
    checked = {p.name for p in phases if p.name not in turns and not p.final}
    while True:
        dropped = {
            row.target
            for row in rows
            if row.target in checked
            and not (row.input_kind == "start" or row.index in after or row.source in checked)
        }
        if not dropped:
            return frozenset(checked)
        checked -= dropped


def _after_checks(rows: tuple[Row, ...]) -> set[int]:
    """The rows that follow a limit check in their pair: tried only below the limit."""
    seen: set[tuple[str, str]] = set()
    after: set[int] = set()
    for row in rows:
        pair = (row.source, row.input_kind)
        if pair in seen:
            after.add(row.index)
        elif row.guards == (LIMIT,):
            seen.add(pair)
    return after


def numbered(action: Any) -> Any:
    """`action`, entering a turn phase in the state numbered with the turn it opens."""

    @functools.wraps(action)
    def entering(state: Any, inp: Any, ctx: Any, target: str) -> Any:
        outcome = action(state, inp, ctx, target)
        entered = outcome.next_state
        turn = opening_turn(state, inp, ctx)
        if entered.phase != target or getattr(entered, "turn", turn) == turn:
            return outcome
        return replace(outcome, next_state=replace(entered, turn=turn))

    return entering


# ---------------------------------------------------------------- cycles nothing counts


def unbounded_cycles(
    phases: tuple[Phase, ...], rows: tuple[Row, ...], effects: Mapping[str, str]
) -> list[tuple[str, ...]]:
    """The strongly connected parts of the chart (its declared rows, `start` aside) that loop,
    hold a model-calling or effect phase, and have no row that opens a turn or checks a
    budget: each a run could go round forever. A self-loop on `approval_decisions` waits for
    a person, so it is no loop here."""
    turns = turn_phases(phases, rows, effects)
    callers = turns | EXEMPT | {row.source for row in rows if row.input_kind == "model_response"}
    edges = [row for row in rows if _loops(row)]
    found = []
    for part in _components([p.name for p in phases], edges):
        inside = [row for row in edges if row.source in part and row.target in part]
        if inside and (set(part) & (callers | set(effects))) and not _bounded(rows, part, turns):
            found.append(part)
    return found


def _loops(row: Row) -> bool:
    outside = row.input_kind == "approval_decisions" and row.source == row.target
    return not (row.implicit or row.input_kind == "start" or outside)


def _bounded(rows: tuple[Row, ...], part: tuple[str, ...], turns: frozenset[str]) -> bool:
    """Some declared row of `part` opens a turn in it, or checks the turn limit or budget."""
    for row in rows:
        if row.implicit or row.source not in part:
            continue
        if (row.target in part and opens_turn(row, turns)) or {r.name for r in row.guards} & CHECKS:
            return True
    return False


def _components(names: list[str], edges: list[Row]) -> list[tuple[str, ...]]:
    """Strongly connected components, each in the chart's phase order (charts are small: a
    phase's part is what it reaches and what reaches it)."""
    forward: dict[str, set[str]] = {name: set() for name in names}
    backward: dict[str, set[str]] = {name: set() for name in names}
    for row in edges:
        forward[row.source].add(row.target)
        backward[row.target].add(row.source)
    parts, left = [], list(names)
    while left:
        part = _reach(left[0], forward) & _reach(left[0], backward)
        parts.append(tuple(name for name in left if name in part))
        left = [name for name in left if name not in part]
    return parts


def _reach(start: str, edges: Mapping[str, set[str]]) -> set[str]:
    seen, todo = {start}, [start]
    while todo:
        for nxt in edges[todo.pop()] - seen:
            seen.add(nxt)
            todo.append(nxt)
    return seen
