"""`TransitionTable`: a compiled chart, frozen rows and their dispatch by (phase, input kind).

Theory of operation: `rows` are plain data, in priority order within each (source, input
kind), and are what exporters, traces and the debugger show. `dispatch` holds the same rows
with their guards and actions resolved to functions, keyed phase -> input kind -> rows, so
`transition` does two dictionary lookups and walks a short tuple (plain dicts, read-only by
contract: a mapping proxy costs a call per lookup). The table is total: every phase has rows
for every input kind, the implicit ones (a terminal phase absorbing an input, a phase
refusing an input it never waits for) marked `implicit`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

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

    def rows_for(self, phase: str, input_kind: str) -> tuple[Row, ...]:
        """The rows tried, in order, for `input_kind` in `phase` (implicit ones included)."""
        return tuple(compiled.row for compiled in self.dispatch[phase][input_kind])

    def phase(self, name: str) -> Phase:
        for phase in self.phases:
            if phase.name == name:
                return phase
        raise KeyError(name)

    def as_data(self) -> dict[str, Any]:
        """The table as plain JSON-able data (stable key order)."""
        return {
            "name": self.name,
            "initial": self.initial,
            "phases": [{"name": p.name, "final": p.final, "custom": p.custom} for p in self.phases],
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
                for r in self.rows
            ],
        }

    @property
    def digest(self) -> str:
        """SHA-256 of the table's data: two charts with equal rows have equal digests."""
        text = json.dumps(self.as_data(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()
