"""The compiled table and python-statemachine's own engine agree on every cell of the grid.

A cell is (state, event, valuation of the guards named in that state's rows). The table's
answer is the first row of `rows_for(phase, event)` whose guards all have their expected
values (implicit rows included). The engine's answer comes from instantiating the chart class
itself on a model object positioned in that state, whose attributes give each guard's value and
record which action ran, then `send(event)`.

The engine takes no transition where the table has an implicit row: a final state takes none
(the table absorbs: same phase), and a non-final state ignores an event it has no transition for
(`allow_event_without_transition`; the table fails closed with `reject_input`). Those cells are
compared to the implicit rows explicitly. The compiler's turn-limit checks (implicit rows
`[turn_limit_reached] -> Failed` before a row opening a turn) are no part of the chart class:
where one answers, the engine takes the row the table would take without it.
"""

from __future__ import annotations

import functools
import importlib.util
import itertools
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from statemachine import State

from helikon import AGENT_LOOP, DEFAULT_TABLE, ChartSpec, LoopChart, compile_chart
from helikon.core import TransitionTable
from helikon.core.chart.compile import read_chart
from helikon.core.state import INPUT_KINDS

PLAN_ACT_PATH = Path(__file__).resolve().parent.parent / "charts" / "plan_act.py"


@dataclass(frozen=True)
class Chart:
    name: str
    chart: Any
    table: Any  # a TransitionTable (or a stand-in with rows, phases and rows_for)


def default_chart() -> Chart:
    """The default chart, declared from its spec's rows: the class states the input
    guardrails' rows once (`checks_input`), and the spec derives them (twins, CheckingInput)."""
    return Chart("default", declared(read_chart(AGENT_LOOP)), DEFAULT_TABLE)


def plan_act_chart() -> Chart:
    """The custom chart in charts/plan_act.py, loaded by path; skipped while it is absent."""
    if not PLAN_ACT_PATH.exists():
        pytest.skip("charts/plan_act.py does not exist (yet)")
    spec = importlib.util.spec_from_file_location("differential_plan_act", PLAN_ACT_PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    (spec,) = [value for value in vars(module).values() if isinstance(value, ChartSpec)]
    tables = [
        value
        for value in vars(module).values()
        if isinstance(value, TransitionTable) and value.name == spec.name
    ]
    table = tables[0] if tables else compile_chart(spec)
    chart = declared(spec)
    assert compile_chart(chart, actions=spec.actions).digest == table.digest  # the same chart
    return Chart("plan_act", chart, table)


def declared(spec: ChartSpec) -> Any:
    """The spec as a python-statemachine chart class, for the engine to run: one `State` per
    phase, one transition per row of `table_rows`, in order (helikon itself never declares
    one: `compile_chart` reads the spec)."""
    states = {
        p.name: State(p.name, initial=p.name == spec.initial, final=p.final) for p in spec.phases
    }
    events: dict[str, Any] = {}
    for row in spec.table_rows:
        transition = states[row.source].to(
            states[row.target],
            cond=[g.name for g in row.guards if g.expected] or None,
            unless=[g.name for g in row.guards if not g.expected] or None,
            on=row.action,
        )
        found = events.get(row.input_kind)
        events[row.input_kind] = transition if found is None else found | transition
    attrs = {f"phase_{i}": states[p.name] for i, p in enumerate(spec.phases)}
    namespace = {"__module__": __name__, "__qualname__": spec.name, **attrs, **events}
    metaclass: Any = type(LoopChart)
    return metaclass(spec.name, (LoopChart,), namespace)


CHARTS: dict[str, Callable[[], Chart]] = {"default": default_chart, "plan_act": plan_act_chart}


# ---------------------------------------------------------------- the two answers


class Unasked(AssertionError):
    """The engine evaluated a guard that none of the state's rows names."""


class CellModel:
    """The engine's model: `state` positions it, guards read the valuation, actions record."""

    def __init__(
        self,
        state: str,
        valuation: dict[str, bool],
        guards: set[str],
        actions: set[str],
    ) -> None:
        self.state = state
        self.fired: list[str] = []
        for name in guards:
            setattr(self, name, self._guard(name, valuation))
        for name in actions:
            setattr(self, name, self._action(name))

    @staticmethod
    def _guard(name: str, valuation: dict[str, bool]) -> Callable[[], bool]:
        def guard() -> bool:
            if name not in valuation:
                raise Unasked(name)
            return valuation[name]

        return guard

    def _action(self, name: str) -> Callable[[], None]:
        def action() -> None:
            self.fired.append(name)

        return action


def strict_engine(chart: Any) -> Any:
    """The chart, with errors in callbacks raised rather than turned into events."""
    return type(f"Strict{chart.__name__}", (chart,), {"catch_errors_as_events": False})


def table_answer(
    table: TransitionTable, phase: str, kind: str, valuation: dict[str, bool], limits: bool = True
) -> Any:
    for row in table.rows_for(phase, kind):
        if not limits and is_limit_check(row):
            continue
        if all(valuation[ref.name] is ref.expected for ref in row.guards):
            return row
    raise AssertionError(f"no row of {phase} on {kind} matches {valuation}")


def is_limit_check(row: Any) -> bool:
    return bool(row.implicit and row.action == "fail_max_turns")


def engine_answer(
    engine: Any, state: Any, kind: str, model: CellModel
) -> tuple[str, tuple[str, ...]]:
    machine = engine(model=model)
    assert [s.name for s in machine.configuration] == [state.name]
    machine.send(kind)
    (current,) = machine.configuration
    return current.name, tuple(model.fired)


# ---------------------------------------------------------------- the grid


@dataclass
class Grid:
    cells: int = 0
    explicit: int = 0
    implicit: int = 0


@functools.cache
def default_grid() -> tuple[Grid, set[int]]:
    return check_grid(default_chart())


def check_grid(chart: Chart) -> tuple[Grid, set[int]]:
    """Compare the two answers on every cell; return the counts and the rows taken."""
    table, engine = chart.table, strict_engine(chart.chart)
    all_guards = {ref.name for row in table.rows for ref in row.guards}
    actions = {row.action for row in table.rows if not row.implicit}
    grid, taken = Grid(), set()
    # Every input kind the table has rows for: the common ones, and effect results and
    # guardrail verdicts where the chart has rows on them.
    kinds = tuple(dict.fromkeys((*INPUT_KINDS, *(row.input_kind for row in table.rows))))
    for state in chart.chart.states:
        phase = state.name
        names = sorted(
            {ref.name for row in table.rows if row.source == phase for ref in row.guards}
        )
        for values, kind in itertools.product(
            itertools.product((False, True), repeat=len(names)), kinds
        ):
            valuation = dict(zip(names, values, strict=True))
            row = table_answer(table, phase, kind, valuation)
            model = CellModel(state.value, valuation, all_guards, actions)
            target, fired = engine_answer(engine, state, kind, model)
            where = f"{chart.name}: {phase} on {kind} with {valuation}"
            grid.cells += 1
            taken.add(row.index)
            if is_limit_check(row):
                grid.implicit += 1
                declared = table_answer(table, phase, kind, valuation, limits=False)
                assert (target, fired) == (declared.target, (declared.action,)), where
                assert row.target == "Failed", where
            elif row.implicit:
                grid.implicit += 1
                assert (target, fired) == (phase, ()), f"{where}: the engine moved: {target}"
                if state.final:
                    assert (row.action, row.target) == ("absorb", phase), where
                else:
                    assert (row.action, row.target) == ("reject_input", "Failed"), where
            else:
                grid.explicit += 1
                assert (target, fired) == (row.target, (row.action,)), f"{where}: {row}"
    return grid, taken


@pytest.mark.parametrize("name", sorted(CHARTS))
def test_the_table_and_the_engine_agree_on_every_cell(name: str) -> None:
    chart = CHARTS[name]()
    grid, taken = default_grid() if name == "default" else check_grid(chart)
    table = chart.table
    states = len(chart.chart.states)
    assert {phase.name for phase in table.phases} == {s.name for s in chart.chart.states}
    assert grid.cells == grid.explicit + grid.implicit
    assert grid.cells >= states * len(INPUT_KINDS)
    assert grid.explicit > 0 and grid.implicit > 0
    assert taken == {row.index for row in table.rows}, "some row is the answer of no cell"


def test_the_default_grid_is_the_size_its_guards_say() -> None:
    """2**(guards named in a state's rows) valuations x every input kind, per state."""
    grid, _ = default_grid()
    kinds = len({row.input_kind for row in DEFAULT_TABLE.rows})
    assert kinds == len(INPUT_KINDS) + 1  # and guardrail_verdict
    expected = 0
    for phase in DEFAULT_TABLE.phases:
        rows = [row for row in DEFAULT_TABLE.rows if row.source == phase.name]
        names = {ref.name for row in rows for ref in row.guards}
        expected += 2 ** len(names) * kinds
    assert grid.cells == expected
    # CallingModel alone names 10 guards (start and model_response): 1024 x 8 cells.
    assert grid.cells > 1024 * kinds


class OneRowOff:
    """A table that answers like `table` except that row `index` names another target."""

    def __init__(self, table: TransitionTable, index: int, target: str) -> None:
        self.table, self.index, self.target = table, index, target
        self.rows, self.phases = table.rows, table.phases

    def rows_for(self, phase: str, kind: str) -> tuple[Any, ...]:
        return tuple(
            replace(row, target=self.target) if row.index == self.index else row
            for row in self.table.rows_for(phase, kind)
        )


def test_the_grid_can_fail() -> None:
    """A table that disagrees with the chart in one row is caught on that row's cells."""
    complete = next(row for row in DEFAULT_TABLE.rows if row.action == "complete")
    broken = Chart("broken", AGENT_LOOP, OneRowOff(DEFAULT_TABLE, complete.index, "Failed"))
    with pytest.raises(AssertionError, match="broken: CallingModel on model_response"):
        check_grid(broken)
