"""The input guardrails' check as rows: what `ChartSpec.checks_input` gives a chart.

Theory of operation: input guardrails are checked at the run's start, before anything else
the chart does (its first model call, or its first effect), whatever phase the chart starts
in. A chart states that once (`checks_input`), and its spec derives the rows:

- `guarded_start`: each start row of the initial phase whose target is not terminal gets a
  twin in front of it, with the same action, guarded by `input_guarded` and the row's own
  guards, to CheckingInput. The compiled twin runs its start row's action, to the start
  row's target, and holds the outcome there (`hold_input`; helikon.core.chart.compile):
  the start's events and appends stand, its action waits, and the run performs
  `CheckGuardrails(None)`. A start row that ends the run (`fail_budget`) has no twin:
  nothing runs before it.
- `verdict_rows`: CheckingInput's rows on the verdict mirror the twins: `passed` and the
  start row's own guards, to the start row's target, go on as it would (`resume_input`: the
  state and action held); the fallback fails the run (`fail_guardrail`). The start row's own
  guards are evaluated as they were, on the state and input the start row was chosen on
  (`on_start`), so a verdict row goes where its start row went; its action is not
  numbered again (`resumes`: the turn the start row opened is held).

A stop during the check is CheckingInput's input, like any phase's (the `everywhere` rows).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from helikon.core.state import TERMINAL_PHASES
from helikon.core.table import GuardFn, GuardRef, Row

CHECKING_INPUT = "CheckingInput"
INPUT_GUARDED = GuardRef("input_guarded")
PASSED = GuardRef("passed")

__all__ = [
    "CHECKING_INPUT",
    "compiled_checks",
    "guarded_start",
    "is_twin",
    "resumes",
    "verdict_rows",
]


def _checked(rows: Iterable[Row], initial: str) -> list[Row]:
    """The initial phase's start rows that get a twin: those that do not end the run."""
    return [
        row
        for row in rows
        if row.source == initial and row.input_kind == "start" and row.target not in TERMINAL_PHASES
    ]


def guarded_start(own: list[Row], initial: str) -> list[Row]:
    """The initial phase's own rows with each checked start row's twin in front of it."""
    checked = {id(row) for row in _checked(own, initial)}
    rows: list[Row] = []
    for row in own:
        if id(row) in checked:
            rows.append(
                Row(
                    0,
                    row.source,
                    row.input_kind,
                    (INPUT_GUARDED, *row.guards),
                    CHECKING_INPUT,
                    row.action,
                )
            )
        rows.append(row)
    return rows


def verdict_rows(rows: Iterable[Row], initial: str) -> list[Row]:
    """CheckingInput's rows on the verdict, one per checked start row, then the fallback."""
    kind = "guardrail_verdict"
    mirrored = [
        Row(0, CHECKING_INPUT, kind, (PASSED, *row.guards), row.target, "resume_input")
        for row in _checked(rows, initial)
    ]
    return [*mirrored, Row(0, CHECKING_INPUT, kind, (), "Failed", "fail_guardrail")]


def is_twin(row: Row) -> bool:
    """Whether `row` is a start row's twin (its action is the start row's, held)."""
    return row.input_kind == "start" and row.target == CHECKING_INPUT and not row.implicit


def resumes(row: Row) -> bool:
    """Whether `row` is a verdict row that goes on as its start row would (its state, turn
    numbered already, is held)."""
    return row.source == CHECKING_INPUT and row.action == "resume_input"


def on_start(guard: GuardFn) -> GuardFn:
    """`guard` as its start row evaluated it: on the state and input held in CheckingInput."""

    def as_at_start(state: Any, inp: Any, ctx: Any) -> bool:
        return guard(state.before, state.start, ctx)

    return as_at_start


def compiled_checks(
    row: Row, resolve: Callable[[GuardRef], tuple[GuardFn, bool]]
) -> tuple[tuple[GuardFn, bool], ...]:
    """A row's guards resolved (`resolve`); a verdict row's start-row guards `on_start`."""
    checks = tuple(resolve(ref) for ref in row.guards)
    if not resumes(row):
        return checks
    return tuple(
        check if ref == PASSED else (on_start(check[0]), check[1])
        for ref, check in zip(row.guards, checks, strict=True)
    )
