"""Extract a compiled chart into `ChartGraph`, the plain form every chart renderer reads.

Theory of operation: `extract` is the only code that reads a `TransitionTable`; the DOT,
Mermaid and Markdown renderers read only the `ChartGraph` it returns, so each renderer can be
tested from a graph built by hand and none of them can drift from the table. The graph holds:

- `nodes`: an `initial` pseudo-node (the arrow into the first phase), then one node per phase,
  in the chart's order, of kind `normal`, `custom` (a phase helikon does not define), `done`
  or `failed`.
- `transitions`: one per row shown, in table order, each labelled with its row's id
  (`Row.index`, the number `helikon table`, traces, the debugger and the studio show too)
  and knowing its priority among the alternatives for its (phase, input). Rows the chart
  states once for every non-terminal phase (cancel, fail: `TransitionTable.everywhere`)
  become one transition from `group`, a stand-in for "any non-terminal phase", so a diagram
  draws them once. Implicit rows (a
  terminal absorbing an input, a phase refusing one) are left out unless asked for, or
  unless the overlay visited them.
- `edges`: the transitions grouped by (source, target), for diagrams.
- an optional trace overlay: visit counts on nodes and transitions, and the current phase;
  a coverage overlay (many runs merged) also counts each transition's rows no run took.
  An overlay may also mark rows and phases with class names (`marks`, `phase_marks`), which
  an SVG drawing carries on their elements, so a page can tell several paths apart (the
  studio's fork comparison); a transition has the marks of all its rows.

Pure: no IO, no graphviz, no jinja2. Ordering follows the table, so output is byte-stable.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from helikon.core.table import Phase, Row, TransitionTable

if TYPE_CHECKING:
    from helikon.trace import Trace

NodeKind = Literal["initial", "normal", "custom", "done", "failed"]
Layout = Literal["overview", "detailed"]
"""How a diagram draws its edges: `detailed` lists every row on its edge (input, guards,
action); `overview` draws one edge per source and target labelled with its row ids, the
rows themselves going into a table beside the picture (`to_markdown`)."""
LAYOUTS: tuple[Layout, ...] = ("overview", "detailed")

INITIAL_ID = "__initial__"
GROUP_ID = "Running"
GROUP_LABEL = "any non-terminal phase"


@dataclass(frozen=True, slots=True)
class TraceOverlay:
    """What a run did, to draw over its chart.

    Attributes:
        phases: phase name -> times the run was in that phase.
        rows: row index (`Row.index`) -> times that row fired.
        current: the phase the run is in now, if any.
        coverage: the rows of many runs merged (`for_coverage`): rows none took are drawn
            as uncovered.
        marks: row index -> class names for the edge that draws it (a marked row is
            drawn even if implicit and not taken).
        phase_marks: phase name -> class names for its node.
    """

    phases: Mapping[str, int] = field(default_factory=dict)
    rows: Mapping[int, int] = field(default_factory=dict)
    current: str | None = None
    coverage: bool = False
    marks: Mapping[int, tuple[str, ...]] = field(default_factory=dict)
    phase_marks: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @classmethod
    def for_coverage(cls, table: TransitionTable, rows: Mapping[int, int]) -> TraceOverlay:
        """The coverage of runs that took `rows` (row index -> times, over all runs): a
        phase counts once for each row into it, the initial phase also once per run start."""
        phases: dict[str, int] = {table.initial: 1}
        for index, times in rows.items():
            target = table.rows[index].target
            phases[target] = phases.get(target, 0) + times
        return cls(phases, dict(rows), None, coverage=True)

    @classmethod
    def from_rows(cls, table: TransitionTable, fired: Iterable[int]) -> TraceOverlay:
        """The overlay of a run that started in `table.initial` and fired `fired` in order.

        Each fired row counts once. A phase counts once each time the run enters it from
        another phase (the initial phase once for the start): a row that stays in its phase
        (start, record_decisions) is a count on its edge, not another visit. The current
        phase is the last row's target.
        """
        phases: dict[str, int] = {table.initial: 1}
        rows: dict[int, int] = {}
        current = table.initial
        for index in fired:
            target = table.rows[index].target
            rows[index] = rows.get(index, 0) + 1
            if target != current:
                phases[target] = phases.get(target, 0) + 1
            current = target
        return cls(phases, rows, current)

    @classmethod
    def from_trace(cls, table: TransitionTable, trace: Trace) -> TraceOverlay:
        """The overlay of the root run a trace recorded, on the chart it ran on.

        Raises:
            ValueError: the trace was recorded on another chart (its digest differs).
        """
        header = trace.header
        if header.chart_digest != table.digest:
            raise ValueError(
                f"the trace was recorded on chart {header.chart} ({header.chart_digest[:12]}), "
                f"not on this chart ({table.digest[:12]})"
            )
        return cls.from_rows(table, [line.row.index for line in trace.transitions(header.run_id)])


@dataclass(frozen=True, slots=True)
class ChartNode:
    """A phase (or the initial pseudo-node) with its overlay counts."""

    id: str
    kind: NodeKind
    label: str
    visits: int = 0
    current: bool = False
    marks: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ChartTransition:
    """One row as a diagram shows it (or one row shared by every member of the group).

    `rows` are the ids (`Row.index`) of the rows it stands for: one, or one per group member.
    `priority` is 1-based among the `alternatives` rows tried for the same (phase, input);
    within a phase and input, a lower row id is tried first.
    """

    rows: tuple[int, ...]
    source: str
    target: str
    input_kind: str
    guards: tuple[str, ...]
    action: str
    priority: int = 1
    alternatives: int = 1
    implicit: bool = False
    visits: int = 0
    uncovered: int = 0
    marks: tuple[str, ...] = ()

    @property
    def ids(self) -> str:
        """The row ids, `#7` for one row, `#11,17,21` for a row every group member has."""
        return "#" + ",".join(map(str, self.rows))

    @property
    def label(self) -> str:
        """`#id input [guards] / action`."""
        guards = f" [{' and '.join(self.guards)}]" if self.guards else ""
        return f"{self.ids} {self.input_kind}{guards} / {self.action}"

    @property
    def coverage_note(self) -> str:
        """What a coverage overlay says of this transition's rows: "" when all were taken."""
        if not self.uncovered:
            return ""
        if self.uncovered == len(self.rows):
            return "  (uncovered)"
        return f"  ({self.uncovered} of {len(self.rows)} uncovered)"


@dataclass(frozen=True, slots=True)
class ChartEdge:
    """The transitions from `source` to `target`, in priority order. The edge from the
    initial pseudo-node has none."""

    source: str
    target: str
    transitions: tuple[ChartTransition, ...] = ()

    @property
    def visits(self) -> int:
        return sum(t.visits for t in self.transitions)

    @property
    def rows(self) -> tuple[int, ...]:
        """The ids of every row the edge stands for, in order."""
        return tuple(sorted(i for t in self.transitions for i in t.rows))

    @property
    def marks(self) -> tuple[str, ...]:
        """The class names of its transitions, each once, sorted."""
        return tuple(sorted({m for t in self.transitions for m in t.marks}))


@dataclass(frozen=True, slots=True)
class ChartGroup:
    """Phases drawn together so the rows they all share are drawn once, from `id`."""

    id: str
    label: str
    members: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Doc:
    name: str
    doc: str


@dataclass(frozen=True, slots=True)
class ChartGraph:
    """A chart as renderers see it; see the module docstring."""

    name: str
    initial: str
    nodes: tuple[ChartNode, ...]
    transitions: tuple[ChartTransition, ...]
    edges: tuple[ChartEdge, ...]
    group: ChartGroup | None = None
    guards: tuple[Doc, ...] = ()
    actions: tuple[Doc, ...] = ()
    digest: str = ""
    overlaid: bool = False
    coverage: bool = False
    effects: tuple[tuple[str, str], ...] = ()
    """(effect phase, the effect it runs), in phase order."""

    def node(self, node_id: str) -> ChartNode:
        for node in self.nodes:
            if node.id == node_id:
                return node
        raise KeyError(node_id)

    def kind_of(self, node_id: str) -> NodeKind | None:
        """The kind of node `node_id`; None for the group, which is not a node."""
        return next((node.kind for node in self.nodes if node.id == node_id), None)


def extract(
    table: TransitionTable,
    overlay: TraceOverlay | None = None,
    *,
    implicit: bool = False,
    group_shared: bool = True,
) -> ChartGraph:
    """Turn a compiled table (and optionally a trace overlay) into a `ChartGraph`.

    Args:
        table: the compiled chart.
        overlay: visit counts and the current phase of a run of this chart.
        implicit: include every implicit row; without it only the ones `overlay` visited.
        group_shared: draw the rows the chart states for every non-terminal phase once, from
            a group.

    Raises:
        ValueError: the overlay names a phase or row index this table does not have.
    """
    if overlay is not None:
        _check_overlay(table, overlay)
    hits = overlay or TraceOverlay()
    shown = [
        r
        for r in table.rows
        if implicit or not r.implicit or hits.rows.get(r.index) or r.index in hits.marks
    ]
    members = tuple(p.name for p in table.phases if not p.final)
    shared = _shared_rows(table, members) if group_shared and len(members) > 1 else {}
    group = ChartGroup(_unique_id(table), GROUP_LABEL, members) if shared else None
    transitions = _transitions(table, shown, shared, group, hits)
    nodes = (
        ChartNode(INITIAL_ID, "initial", "start"),
        *(_node(phase, hits) for phase in table.phases),
    )
    used_guards = sorted({g.name for r in shown for g in r.guards})
    used_actions = sorted({r.action for r in shown})
    return ChartGraph(
        name=table.name,
        initial=table.initial,
        nodes=nodes,
        transitions=transitions,
        edges=(ChartEdge(INITIAL_ID, table.initial), *group_edges(transitions)),
        group=group,
        guards=tuple(Doc(n, table.guard_docs.get(n, "")) for n in used_guards),
        actions=tuple(Doc(n, table.action_docs.get(n, "")) for n in used_actions),
        digest=table.digest,
        overlaid=overlay is not None,
        coverage=hits.coverage,
        effects=tuple(
            (p.name, table.effects[p.name]) for p in table.phases if p.name in table.effects
        ),
    )


def compact_ids(ids: Iterable[int], per_line: int = 0) -> tuple[str, ...]:
    """Row ids as short text, runs of three or more as ranges: `0, 3-5, 9`.

    With `per_line`, the text is split into lines of at most that many items.
    """
    items: list[str] = []
    for start, end in _runs(sorted(set(ids))):
        if end - start >= 2:
            items.append(f"{start}-{end}")
        else:
            items += [str(i) for i in range(start, end + 1)]
    size = per_line or max(len(items), 1)
    return tuple(", ".join(items[i : i + size]) for i in range(0, len(items), size)) or ("",)


def _runs(ids: list[int]) -> Iterable[tuple[int, int]]:
    start = previous = None
    for index in ids:
        if previous is not None and index == previous + 1:
            previous = index
            continue
        if start is not None and previous is not None:
            yield start, previous
        start = previous = index
    if start is not None and previous is not None:
        yield start, previous


def group_edges(transitions: Iterable[ChartTransition]) -> tuple[ChartEdge, ...]:
    """Transitions grouped by (source, target), edges in order of their first transition."""
    by_pair: dict[tuple[str, str], list[ChartTransition]] = {}
    for t in transitions:
        by_pair.setdefault((t.source, t.target), []).append(t)
    return tuple(ChartEdge(s, d, tuple(ts)) for (s, d), ts in by_pair.items())


def _check_overlay(table: TransitionTable, overlay: TraceOverlay) -> None:
    names = {p.name for p in table.phases}
    for name in (*overlay.phases, *([overlay.current] if overlay.current else [])):
        if name not in names:
            raise ValueError(f"overlay names phase {name!r}, which chart {table.name} lacks")
    for name in overlay.phase_marks:
        if name not in names:
            raise ValueError(f"overlay marks phase {name!r}, which chart {table.name} lacks")
    for index in (*overlay.rows, *overlay.marks):
        if not 0 <= index < len(table.rows):
            raise ValueError(f"overlay names row {index}, which chart {table.name} lacks")


def _node(phase: Phase, hits: TraceOverlay) -> ChartNode:
    if phase.final:
        kind: NodeKind = "failed" if phase.name == "Failed" else "done"
    else:
        kind = "custom" if phase.custom else "normal"
    visits = hits.phases.get(phase.name, 0)
    current = hits.current == phase.name
    marks = tuple(sorted(set(hits.phase_marks.get(phase.name, ()))))
    return ChartNode(phase.name, kind, phase.name, visits, current, marks)


def _unique_id(table: TransitionTable) -> str:
    taken = {p.name for p in table.phases}
    group_id = GROUP_ID
    while group_id in taken:
        group_id += "_"
    return group_id


SharedKey = tuple[str, tuple[str, ...], str, str, bool]


def _key(row: Row) -> SharedKey:
    return (row.input_kind, tuple(map(str, row.guards)), row.target, row.action, row.implicit)


def _shared_rows(
    table: TransitionTable, members: tuple[str, ...]
) -> dict[SharedKey, tuple[int, ...]]:
    """The rows the chart states once for every non-terminal phase (`table.everywhere`),
    aimed outside the group: key -> the indices of the rows it stands for."""
    found: dict[SharedKey, tuple[int, ...]] = {}
    for indices in table.everywhere:
        first = table.rows[indices[0]]
        if len(indices) == len(members) and first.target not in members:
            found[_key(first)] = indices
    return found


def _transitions(
    table: TransitionTable,
    shown: list[Row],
    shared: dict[SharedKey, tuple[int, ...]],
    group: ChartGroup | None,
    hits: TraceOverlay,
) -> tuple[ChartTransition, ...]:
    grouped = {index for indices in shared.values() for index in indices}
    own = [_transition(table, row, hits) for row in shown if row.index not in grouped]
    common = [
        ChartTransition(
            rows=indices,
            source=group.id,
            target=key[2],
            input_kind=key[0],
            guards=key[1],
            action=key[3],
            implicit=key[4],
            visits=sum(hits.rows.get(i, 0) for i in indices),
            uncovered=_uncovered(indices, hits),
            marks=_marks(indices, hits),
        )
        for key, indices in shared.items()
        if group is not None
    ]
    # Declared rows first, then the shared ones (as SEMANTICS.md lists them), implicit last.
    group_id = group.id if group else None
    ordered = sorted([*own, *common], key=lambda t: (t.implicit, t.source == group_id, t.rows))
    return tuple(ordered)


def _transition(table: TransitionTable, row: Row, hits: TraceOverlay) -> ChartTransition:
    rivals = table.dispatch[row.source][row.input_kind]
    priority = next(i for i, c in enumerate(rivals, 1) if c.row.index == row.index)
    return ChartTransition(
        rows=(row.index,),
        source=row.source,
        target=row.target,
        input_kind=row.input_kind,
        guards=tuple(map(str, row.guards)),
        action=row.action,
        priority=priority,
        alternatives=len(rivals),
        implicit=row.implicit,
        visits=hits.rows.get(row.index, 0),
        uncovered=_uncovered((row.index,), hits),
        marks=_marks((row.index,), hits),
    )


def _marks(indices: tuple[int, ...], hits: TraceOverlay) -> tuple[str, ...]:
    """The class names an overlay gives any of `indices`, each once, sorted."""
    return tuple(sorted({m for i in indices for m in hits.marks.get(i, ())}))


def _uncovered(indices: tuple[int, ...], hits: TraceOverlay) -> int:
    """How many of `indices` a coverage overlay says no run took (0 for any other overlay)."""
    return sum(1 for i in indices if not hits.rows.get(i)) if hits.coverage else 0
