"""`TransitionTable`: a compiled chart, frozen rows and their dispatch by (phase, input kind).

Theory of operation: `rows` are plain data, in priority order within each (source, input
kind), and are what exporters, traces and the debugger show. `dispatch` holds the same rows
with their guards and actions resolved to functions, keyed phase -> input kind -> rows, so
`transition` does two dictionary lookups and walks a short tuple (plain dicts, read-only by
contract: a mapping proxy costs a call per lookup). The table is total: every phase has rows
for every input kind, the implicit ones (a terminal phase absorbing an input, a phase
refusing an input it never waits for) marked `implicit`. `everywhere` groups the rows the
chart states once for every non-terminal phase (`ChartSpec.everywhere`), which diagrams draw
once; a table rebuilt from a trace's data, which does not say, recovers them from its rows
(`recorded_everywhere`), the one place that rule is inferred.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, NamedTuple

from helikon.core.errors import HelikonError
from helikon.core.quoting import quoted
from helikon.core.state import TransitionOutcome

# A resolved guard and action, as the table holds them: (state, input, ctx) -> bool and
# (state, input, ctx, target) -> outcome. Their ctx is a `TransitionCtx`, which names this
# table, so the context's type is left open here (helikon.core.chart.guards and .actions
# type it exactly).
GuardFn = Callable[[Any, Any, Any], bool]
ActionFn = Callable[[Any, Any, Any, str], TransitionOutcome]


@dataclass(frozen=True, slots=True)
class GuardRef:
    """A guard in a row: its name, and the value it must have (False for `unless=`)."""

    name: str
    expected: bool = True

    def __str__(self) -> str:
        return self.name if self.expected else f"not {self.name}"


@dataclass(frozen=True, slots=True)
class Row:
    """One row of the table: from `source` on `input_kind`, if all `guards` hold, run
    `action` and go to `target`. `index` is the row's position in `TransitionTable.rows`."""

    index: int
    source: str
    input_kind: str
    guards: tuple[GuardRef, ...]
    target: str
    action: str
    implicit: bool = False


class CompiledRow(NamedTuple):
    """A row with its guards and action resolved to functions (a tuple: unpacks fast)."""

    checks: tuple[tuple[GuardFn, bool], ...]
    action: ActionFn
    target: str
    row: Row


@dataclass(frozen=True, slots=True)
class Phase:
    name: str
    final: bool = False
    custom: bool = False


@dataclass(frozen=True, slots=True)
class TransitionTable:
    """A compiled chart. Build one with `compile_chart`."""

    name: str
    initial: str
    phases: tuple[Phase, ...]
    rows: tuple[Row, ...]
    dispatch: Mapping[str, Mapping[str, tuple[CompiledRow, ...]]]
    guard_docs: Mapping[str, str]
    action_docs: Mapping[str, str]
    prompts: Mapping[str, str]
    effects: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    """Effect phase -> the name of the effect it runs (`LoopChart.effects`)."""
    everywhere: tuple[tuple[int, ...], ...] = ()
    """The rows the chart states once for every non-terminal phase (`ChartSpec.everywhere`):
    for each, the indices of its rows, one per non-terminal phase. Not in the digest: the
    rows themselves are."""

    def rows_for(self, phase: str, input_kind: str) -> tuple[Row, ...]:
        """The rows tried, in order, for `input_kind` in `phase` (implicit ones included)."""
        return tuple(compiled.row for compiled in self.dispatch[phase][input_kind])

    def phase(self, name: str) -> Phase:
        for phase in self.phases:
            if phase.name == name:
                return phase
        raise KeyError(name)

    @property
    def runnable(self) -> bool:
        """False for a table rebuilt from data (`ChartData.table()`): drawn, never run."""
        return not isinstance(self.dispatch, _DrawnDispatch)

    def as_data(self) -> dict[str, Any]:
        """The table as plain JSON-able data (stable key order)."""
        return _as_data(self.name, self.initial, self.phases, self.rows, self.effects)

    @property
    def digest(self) -> str:
        """SHA-256 of the table's data: two charts with equal rows have equal digests."""
        return _digest(self.as_data())

    def data(self) -> ChartData:
        """What drawing the table needs, as data a trace can record (`ChartData`)."""
        return ChartData(
            self.name,
            self.initial,
            self.phases,
            self.rows,
            dict(self.guard_docs),
            dict(self.action_docs),
            dict(self.prompts),
            dict(self.effects),
        )


def _as_data(
    name: str,
    initial: str,
    phases: tuple[Phase, ...],
    rows: tuple[Row, ...],
    effects: Mapping[str, str],
) -> dict[str, Any]:
    """The data a digest is taken of. `effects` is there only when a chart has effect
    phases, so every chart without one kept the digest it had before they existed."""
    data: dict[str, Any] = {
        "name": name,
        "initial": initial,
        "phases": [{"name": p.name, "final": p.final, "custom": p.custom} for p in phases],
        "rows": [
            {
                "index": r.index,
                "source": r.source,
                "input": r.input_kind,
                "guards": [str(g) for g in r.guards],
                "target": r.target,
                "action": r.action,
                "implicit": r.implicit,
            }
            for r in rows
        ],
    }
    if effects:
        data["effects"] = dict(sorted(effects.items()))
    return data


def _digest(data: dict[str, Any]) -> str:
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()


class TableNotRunnable(HelikonError, RuntimeError):
    """A table rebuilt from data (a trace's record of its chart) was asked to run a row."""


class _DrawnDispatch(dict[str, dict[str, tuple[CompiledRow, ...]]]):
    """The dispatch of a table rebuilt from data: its rows grouped, its functions absent."""


@dataclass(frozen=True, slots=True)
class ChartData:
    """A compiled chart as data: its phases and rows, and the docs of its guards and actions.

    A trace records this in its header, so the chart it ran on can be drawn and its rows
    shown without importing anything (`table()`); running the chart needs the chart itself.
    `digest` equals the compiled table's.
    """

    name: str
    initial: str
    phases: tuple[Phase, ...]
    rows: tuple[Row, ...]
    guard_docs: dict[str, str]
    action_docs: dict[str, str]
    prompts: dict[str, str]
    effects: dict[str, str] = field(default_factory=dict)

    @property
    def digest(self) -> str:
        return _digest(_as_data(self.name, self.initial, self.phases, self.rows, self.effects))

    def problems(self) -> list[str]:
        """What makes this data no chart: unknown phases, misnumbered rows (empty if none)."""
        names = [phase.name for phase in self.phases]
        found = []
        if len(set(names)) != len(names):
            found.append("two phases share a name")
        if self.initial not in names:
            found.append(f"the initial phase {quoted(self.initial)} is not a phase")
        for position, row in enumerate(self.rows):
            if row.index != position:
                found.append(f"row {position} is numbered {row.index}")
            for end in (row.source, row.target):
                if end not in names:
                    found.append(f"row {position} names {quoted(end)}, which is not a phase")
        for phase in self.effects:
            if phase not in names:
                found.append(f"effect phase {quoted(phase)} is not a phase")
        return found

    def table(self) -> TransitionTable:
        """A `TransitionTable` to draw and inspect; running it raises `TableNotRunnable`.

        Raises:
            ValueError: the data is not a chart (`problems()` says why).
        """
        problems = self.problems()
        if problems:
            raise ValueError(f"chart {quoted(self.name)}: " + "; ".join(problems[:3]))
        dispatch = _DrawnDispatch()
        for row in self.rows:
            compiled = CompiledRow(
                tuple((_not_here(self.name), ref.expected) for ref in row.guards),
                _not_here(self.name),
                row.target,
                row,
            )
            by_kind = dispatch.setdefault(row.source, {})
            by_kind[row.input_kind] = (*by_kind.get(row.input_kind, ()), compiled)
        return TransitionTable(
            self.name,
            self.initial,
            self.phases,
            self.rows,
            dispatch,
            dict(self.guard_docs),
            dict(self.action_docs),
            dict(self.prompts),
            dict(self.effects),
            recorded_everywhere(self.phases, self.rows),
        )


def recorded_everywhere(
    phases: tuple[Phase, ...], rows: tuple[Row, ...]
) -> tuple[tuple[int, ...], ...]:
    """The `everywhere` rows of a chart known only from its recorded rows (a trace's, a stored
    run's), which do not say how the chart declared them: the declared rows that every
    non-terminal phase has alike, each the phase's sole row for its input, aimed outside
    those phases. A compiled table takes them from its spec instead."""
    members = [phase.name for phase in phases if not phase.final]
    if len(members) < 2:
        return ()
    pairs: dict[tuple[str, str], int] = {}
    for row in rows:
        pairs[row.source, row.input_kind] = pairs.get((row.source, row.input_kind), 0) + 1
    found: dict[tuple[str, tuple[GuardRef, ...], str, str], list[int]] = {}
    for row in rows:
        sole = pairs[row.source, row.input_kind] == 1
        if sole and not row.implicit and row.source in members and row.target not in members:
            key = (row.input_kind, row.guards, row.target, row.action)
            found.setdefault(key, []).append(row.index)
    return tuple(tuple(group) for group in found.values() if len(group) == len(members))


def _not_here(chart: str) -> Callable[..., Any]:
    def not_here(*args: Any) -> Any:
        raise TableNotRunnable(
            f"chart {quoted(chart)} was rebuilt from a trace's record: it can be drawn and stepped "
            "through as recorded, not run; load the chart itself to run it"
        )

    return not_here
