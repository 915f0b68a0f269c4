"""`Coverage`: which targets and rows a set of runs hit, from chart tests or recorded traces.

Chart tests credit a target with the transitions their runs took: `driver` when a run through
the driver took it, else `transition` when only a path checked over `transition` did (the
note says why the driver cannot deliver it). Implicit rows (a terminal phase absorbing an
input, a phase refusing one it never waits for) are covered by table tests over `transition`:
one reached state of the phase and one input of the kind. An implicit turn-limit check has a
guard: it is a target, reached by a path like a declared row. Traces credit every transition they
recorded on the chart; implicit rows they did not hit are not gaps.

A gap is a target no run hit, a target no witness can build, a path that failed, or (for
chart tests) an implicit row no table test could cover.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from helikon.charttest.drive import Hit, PathRun
from helikon.charttest.inputs import phase_state, stray_input
from helikon.charttest.paths import Plan, Unwitnessed
from helikon.charttest.targets import Target, targets_of
from helikon.core.context import TransitionCtx
from helikon.core.errors import HelikonError
from helikon.core.table import TransitionTable
from helikon.core.transition import match_row
from helikon.trace import Trace


@dataclass(frozen=True, slots=True)
class TargetCoverage:
    """One target: how often it was hit, how (`driver`, `transition`, `trace`), and why
    only over `transition` or why never (`note`); `context` is how its path varied the
    agent's setup."""

    target: Target
    hits: int = 0
    via: str = ""
    note: str = ""
    context: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ImplicitCoverage:
    row: int
    hits: int = 0
    via: str = ""
    note: str = ""


@dataclass(frozen=True)
class Coverage:
    """What runs of one chart covered (see the module docstring)."""

    subject: str
    table: TransitionTable
    source: str
    targets: tuple[TargetCoverage, ...]
    implicit: tuple[ImplicitCoverage, ...]
    unwitnessed: tuple[Unwitnessed, ...] = ()
    contradictory: tuple[Target, ...] = ()
    failures: tuple[str, ...] = ()
    paths: int = 0
    from_traces: bool = False

    @property
    def declared(self) -> tuple[int, ...]:
        return tuple(row.index for row in self.table.rows if not row.implicit)

    @property
    def rows_hit(self) -> tuple[int, ...]:
        return tuple(sorted({t.target.row for t in self.targets if t.hits}))

    @property
    def gaps(self) -> tuple[str, ...]:
        """Every gap, one line each (empty when the chart is covered)."""
        rows = self.table.rows
        found = [
            f"row {t.target.row} ({_where(rows[t.target.row])}, {t.target.outcome()}): "
            + (t.note or "no run took it")
            for t in self.targets
            if not t.hits
        ]
        selectable = {t.target.row for t in self.targets}
        found += [
            f"row {row}: no guard outcomes select it"
            for row in self.declared
            if row not in selectable
        ]
        found += list(self.failures)
        if not self.from_traces:
            found += [
                f"row {i.row} ({_where(rows[i.row])}, implicit): {i.note or 'not covered'}"
                for i in self.implicit
                if not i.hits
            ]
        return tuple(found)


def _where(row: Any) -> str:
    return f"{row.source} {row.input_kind}"


# ---------------------------------------------------------------- from chart tests


def implicit_cases(plan: Plan) -> list[tuple[int, Any, Any]]:
    """(row, state, input): a table test for each implicit row, with a state a path reached
    in its phase (one built by hand when no path reached it) and an input of its kind."""
    states = {state.phase: state for state in plan.samples}
    return [
        (row.index, states.get(row.source) or phase_state(row.source), stray_input(row.input_kind))
        for row in plan.table.rows
        if row.implicit and not row.guards
    ]


def check_implicit(
    table: TransitionTable, cases: Iterable[tuple[int, Any, Any]], ctx: TransitionCtx
) -> tuple[list[ImplicitCoverage], list[str]]:
    """Run each implicit row's table test; the rows covered, and the tests that failed."""
    covered: list[ImplicitCoverage] = []
    failures: list[str] = []
    for index, state, inp in cases:
        row = match_row(state, inp, ctx).row
        if row.index == index:
            covered.append(ImplicitCoverage(index, 1, "transition"))
        else:
            failures.append(
                f"implicit row {index}: {state.phase} + {inp.kind} took row {row.index}"
            )
    return covered, failures


def coverage_of_runs(
    plan: Plan,
    runs: Sequence[PathRun],
    implicit: Sequence[ImplicitCoverage],
    failures: Sequence[str],
) -> Coverage:
    """The coverage of a plan's runs (and of its implicit rows' table tests)."""
    driven: Counter[Hit] = Counter()
    checked: Counter[Hit] = Counter()
    for run in runs:
        (driven if run.via == "driver" else checked).update(run.hits)
    paths = {path.target: path for path in plan.paths}
    unreached = set(plan.unreached)
    missing = {gap.target: gap for gap in plan.unwitnessed}
    targets = []
    for target in targets_of(plan.table).reachable:
        key = (target.row, target.checked)
        path = paths.get(target)
        context = path.setup.changes(plan.base) if path is not None else ()
        if driven[key]:
            targets.append(TargetCoverage(target, driven[key], "driver", "", context))
        elif checked[key]:
            note = (path.blocked or "") if path is not None else "hit by paths over transition"
            targets.append(TargetCoverage(target, checked[key], "transition", note, context))
        else:
            targets.append(TargetCoverage(target, 0, "", _why_not(target, missing, unreached)))
    implicit_rows = _implicit_rows(plan.table, implicit)
    failed = [f"path to row {r.path.target.row} failed: {r.failure}" for r in runs if r.failure]
    return Coverage(
        subject=plan.subject,
        table=plan.table,
        source=f"{len(runs)} paths",
        targets=tuple(targets),
        implicit=implicit_rows,
        unwitnessed=plan.unwitnessed,
        contradictory=plan.contradictory,
        failures=(*failed, *failures),
        paths=len(runs),
    )


def _why_not(target: Target, missing: dict[Target, Unwitnessed], unreached: set[Target]) -> str:
    gap = missing.get(target)
    if gap is not None:
        return f"no witness makes {gap.guard} {'true' if gap.value else 'false'}"
    if target in unreached:
        return "no path reaches it"
    return "no run took it"


def _implicit_rows(
    table: TransitionTable, covered: Sequence[ImplicitCoverage]
) -> tuple[ImplicitCoverage, ...]:
    done = {entry.row: entry for entry in covered}
    missed = "its table test took another row"
    return tuple(
        done.get(row.index, ImplicitCoverage(row.index, 0, "", missed))
        for row in table.rows
        if row.implicit and not row.guards
    )


# ---------------------------------------------------------------- from traces


class ChartMismatch(HelikonError, ValueError):
    """A trace was recorded on another chart than the one its coverage is asked for."""


def trace_hits(
    table: TransitionTable, traces: Sequence[Trace], names: Sequence[str]
) -> Counter[Hit]:
    """Every transition the traces recorded on `table`'s chart, counted.

    A trace's root run must have run on that chart; runs nested in it (handoff targets,
    agents as tools) count when they ran on it too.

    Raises:
        ChartMismatch: a trace's run was recorded on another chart.
    """
    hits: Counter[Hit] = Counter()
    for trace, name in zip(traces, names, strict=True):
        header = trace.header
        if header.chart_digest != table.digest:
            raise ChartMismatch(
                f"{name} was recorded on chart {header.chart} ({header.chart_digest[:12]}), "
                f"not on chart {table.name} ({table.digest[:12]})"
            )
        for line in trace.transitions():
            if trace.chart_of.get(line.run_id) == table.digest:
                hits[(line.row.index, tuple(line.row.checked))] += 1
    return hits


def coverage_of_traces(
    table: TransitionTable, traces: Sequence[Trace], names: Sequence[str], subject: str
) -> Coverage:
    """The coverage of recorded runs of `table`'s chart.

    Raises:
        ChartMismatch: a trace was recorded on another chart.
    """
    hits = trace_hits(table, traces, names)
    found = targets_of(table)
    targets = tuple(
        TargetCoverage(t, hits[(t.row, t.checked)], "trace" if hits[(t.row, t.checked)] else "")
        for t in found.reachable
    )
    by_row = Counter[int]()
    for (row, _), count in hits.items():
        by_row[row] += count
    implicit = tuple(
        ImplicitCoverage(row.index, by_row[row.index], "trace" if by_row[row.index] else "")
        for row in table.rows
        if row.implicit and not row.guards
    )
    return Coverage(
        subject=subject,
        table=table,
        source=f"{len(traces)} trace{'s' if len(traces) != 1 else ''}",
        targets=targets,
        implicit=implicit,
        contradictory=found.contradictory,
        from_traces=True,
    )
