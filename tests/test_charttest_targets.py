"""Targets of a compiled chart: every declared row with every guard outcome that selects it.

Table-driven, no fixtures: the default chart's rows (one guard each at most) and a small
chart whose rows hold two guards, where one way of failing an earlier row contradicts the
later row's own guard.
"""

from __future__ import annotations

from typing import Any

import pytest
from statemachine import State

from helikon import DEFAULT_TABLE, LoopChart, compile_chart
from helikon.charttest import BUILTIN_WITNESSES, Target, targets_of
from helikon.core.chart.guards import GUARDS


def flag(name: str) -> Any:
    def guard(state: Any, inp: Any, ctx: Any) -> bool:
        return name in "".join(getattr(item, "content", "") for item in inp.items)

    guard.__doc__ = f"The answer says {name}."
    return guard


class TwoGuards(LoopChart):
    """model_response: [a and b] -> Failed, [a] -> Done, else Done."""

    calling_model = State("CallingModel", initial=True)
    done = State("Done", final=True)
    failed = State("Failed", final=True)
    start = calling_model.to.itself(on="start_turn")
    model_response = (
        calling_model.to(failed, cond=["a", "b"], on="fail_empty")
        | calling_model.to(done, cond="a", on="complete")
        | calling_model.to(done, on="complete")
    )
    cancel = calling_model.to(failed, on="cancel_run")
    fail = calling_model.to(failed, on="fail_run")


TWO_GUARDS = compile_chart(TwoGuards, guards={"a": flag("a"), "b": flag("b")})
T, F = True, False


def rows_named(table: Any, source: str, kind: str) -> list[int]:
    return [r.index for r in table.rows if (r.source, r.input_kind) == (source, kind)]


def test_every_declared_row_of_the_default_chart_has_exactly_one_target() -> None:
    found = targets_of(DEFAULT_TABLE)
    declared = [row.index for row in DEFAULT_TABLE.rows if not row.implicit]
    assert sorted(target.row for target in found.reachable) == declared
    # The input guardrails' rows name a guard twice: a start row's twin repeats its guards
    # (input_guarded, output_only), and CheckingInput's verdict rows repeat `passed`; a
    # sequence failing one and holding the other is never checked.
    assert [(t.row, t.outcome()) for t in found.contradictory] == [
        (2, "FTFT"),
        (3, "FFFT"),
        (4, "FTFFF"),
        (17, "FT"),
        (18, "TFF"),
    ]
    rows = {DEFAULT_TABLE.rows[t.row].source for t in found.contradictory}
    assert rows == {"CallingModel", "CheckingInput"}


@pytest.mark.parametrize(
    ("position", "checked"),
    [
        (0, (("truncated", T),)),
        (2, (("truncated", F), ("empty", F), ("duplicate_call_ids", T))),
        (
            8,
            (
                ("truncated", F),
                ("empty", F),
                ("duplicate_call_ids", F),
                ("has_handoff", F),
                ("needs_approval", F),
                ("has_tool_calls", F),
                ("has_output_type", F),
                ("output_guarded", F),
            ),
        ),
    ],
)
def test_a_row_is_selected_when_every_earlier_row_failed(
    position: int, checked: tuple[tuple[str, bool], ...]
) -> None:
    row = rows_named(DEFAULT_TABLE, "CallingModel", "model_response")[position]
    assert [t for t in targets_of(DEFAULT_TABLE).reachable if t.row == row] == [
        Target(row, checked)
    ]


def test_each_way_an_earlier_row_fails_is_a_target_of_its_own() -> None:
    both, only_a, neither = rows_named(TWO_GUARDS, "CallingModel", "model_response")
    found = targets_of(TWO_GUARDS)
    assert [t for t in found.reachable if t.row in (both, only_a, neither)] == [
        Target(both, (("a", T), ("b", T))),
        Target(only_a, (("a", T), ("b", F), ("a", T))),
        Target(neither, (("a", F), ("a", F))),
    ]
    # A guard has one value a step: failing [a and b] on a, then holding [a], cannot be.
    assert found.contradictory == (
        Target(only_a, (("a", F), ("a", T))),
        Target(neither, (("a", T), ("b", F), ("a", F))),
    )


def test_the_outcome_is_one_letter_a_guard() -> None:
    assert Target(3, (("a", T), ("b", F))).outcome() == "TF"
    assert Target(3).outcome() == "-"


def test_helikon_ships_both_witnesses_of_every_guard_it_defines() -> None:
    assert set(BUILTIN_WITNESSES) == set(GUARDS)
    for name, witness in BUILTIN_WITNESSES.items():
        assert witness.true is not None and witness.false is not None, name
