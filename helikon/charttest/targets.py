"""Targets: every declared row, with every sequence of guard outcomes that can select it.

`transition` tries the rows of a (phase, input kind) in order and takes the first whose
guards all have their expected values; `match_row` records each guard it checked with its
value. A row is therefore selected by several *checked sequences*: for each earlier row, one
of its guards failed (the ones before it held), then all of this row's guards held. A
`Target` is one row with one such sequence; covering a chart means hitting every target.

A sequence that needs one guard both true and false (a guard named twice, once under `unless=`)
can never be checked: guards are pure, so within one transition a guard has one value. Such
targets are kept apart as contradictory, never searched for. (A row no sequence selects is a
dead row, which `compile_chart` refuses.)
"""

from __future__ import annotations

from dataclasses import dataclass

from helikon.core.table import GuardRef, Row, TransitionTable

Checked = tuple[tuple[str, bool], ...]
"""Guards in the order `match_row` checks them, each with its value."""


@dataclass(frozen=True, slots=True)
class Target:
    """Row `row` (its `Row.index`), selected with the guard outcomes `checked`."""

    row: int
    checked: Checked = ()

    def outcome(self) -> str:
        """`checked` as one letter a guard, T or F, in order (`-` when nothing is checked)."""
        return "".join("T" if value else "F" for _, value in self.checked) or "-"


@dataclass(frozen=True, slots=True)
class Targets:
    """A table's targets: the ones to cover, and the contradictory ones."""

    reachable: tuple[Target, ...]
    contradictory: tuple[Target, ...]


def targets_of(table: TransitionTable) -> Targets:
    """Every target of `table`'s declared rows and turn-limit checks (the only implicit rows
    with guards: a path reaches them like a declared row), in row order."""
    found: list[Target] = []
    for phase in table.phases:
        for compiled in table.dispatch[phase.name].values():
            rows = [entry.row for entry in compiled if not entry.row.implicit or entry.row.guards]
            _walk(rows, found)
    found.sort(key=lambda target: (target.row, target.checked))
    reachable = tuple(target for target in found if not contradicts(target.checked))
    contradictory = tuple(target for target in found if contradicts(target.checked))
    return Targets(reachable, contradictory)


def _walk(rows: list[Row], found: list[Target]) -> None:
    """The targets of one (phase, input kind)'s rows, tried in order."""
    failed_so_far: list[Checked] = [()]  # how every row tried so far can have failed
    for row in rows:
        holds = tuple((ref.name, ref.expected) for ref in row.guards)
        found.extend(Target(row.index, before + holds) for before in failed_so_far)
        failed_so_far = [
            before + fails for before in failed_so_far for fails in _failing(row.guards)
        ]


def _failing(guards: tuple[GuardRef, ...]) -> list[Checked]:
    """Each way a row's guards can fail: the ones before guard `p` hold, guard `p` does not."""
    ways: list[Checked] = []
    for position, ref in enumerate(guards):
        held = tuple((g.name, g.expected) for g in guards[:position])
        ways.append((*held, (ref.name, not ref.expected)))
    return ways


def contradicts(checked: Checked) -> bool:
    """True when `checked` needs one guard to have both values."""
    seen: dict[str, bool] = {}
    return any(seen.setdefault(name, value) != value for name, value in checked)
