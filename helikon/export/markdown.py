"""Render a `ChartGraph` as Markdown: the transition table by row id, then what each guard and
action does (their docstrings), so a chart documents itself."""

from __future__ import annotations

from collections.abc import Iterator

from helikon.export.ir import ChartGraph, ChartTransition, Doc

PREAMBLE = (
    "For the phase and input at hand, rows are tried in the order of their ids; the first whose "
    "guards all hold fires: it runs its action and moves to its target. A row's id is the "
    "number the diagrams, `helikon table`, traces, the debugger and the studio show."
)


def to_markdown(graph: ChartGraph) -> str:
    """The graph as a Markdown document, ending in a newline."""
    lines = [f"# {graph.name}", "", *_summary(graph), "", "## Transitions", "", PREAMBLE, ""]
    lines += _table(graph)
    lines += ["", "## Guards", "", *_docs(graph.guards, "No guards.")]
    lines += ["", "## Actions", "", *_docs(graph.actions, "No actions.")]
    return "\n".join(lines) + "\n"


def _code(text: str) -> str:
    return f"`{text}`"


def _summary(graph: ChartGraph) -> Iterator[str]:
    outcome = {"done": "success", "failed": "failure"}
    terminals = [f"{_code(n.id)} ({outcome[n.kind]})" for n in graph.nodes if n.kind in outcome]
    custom = [n.id for n in graph.nodes if n.kind == "custom"]
    yield f"- Initial phase: {_code(graph.initial)}"
    if terminals:
        yield f"- Terminal phases: {', '.join(terminals)}"
    if custom:
        yield f"- Custom phases: {', '.join(map(_code, custom))}"
    if graph.effects:
        runs = [f"{_code(phase)} runs {_code(effect)}" for phase, effect in graph.effects]
        yield f"- Effect phases: {', '.join(runs)}"
    if graph.digest:
        yield f"- Table digest: {_code(graph.digest)}"
    current = next((n.id for n in graph.nodes if n.current), None)
    if graph.overlaid and current:
        yield f"- Current phase (trace overlay): {_code(current)}"


def rows_table(graph: ChartGraph) -> str:
    """Just the transition table: one line per row shown, by id (no heading, no docs)."""
    return "\n".join(_table(graph)) + "\n"


def row_cells(transition: ChartTransition, graph: ChartGraph) -> list[str]:
    """A table line's cells as plain text: row ids, from, input, guards, to, action[, fired]."""
    return [cell.replace("`", "") for cell in _cells(transition, graph)]


def headers(graph: ChartGraph) -> list[str]:
    """The table's column names."""
    return ["row", "from", "input", "guards", "to", "action"] + (
        ["fired"] if graph.overlaid else []
    )


def _table(graph: ChartGraph) -> Iterator[str]:
    header = headers(graph)
    yield "| " + " | ".join(header) + " |"
    yield "|" + "---|" * len(header)
    for transition in graph.transitions:
        yield "| " + " | ".join(_cells(transition, graph)) + " |"


def _cells(transition: ChartTransition, graph: ChartGraph) -> list[str]:
    grouped = graph.group is not None and transition.source == graph.group.id
    source = graph.group.label if graph.group and grouped else _code(transition.source)
    guards = " and ".join(map(_code, transition.guards))
    if not guards and transition.alternatives > 1:
        guards = "otherwise"
    ids = ", ".join(map(str, transition.rows))
    cells = [ids, source, _code(transition.input_kind), guards or "—", _code(transition.target)]
    cells.append(_code(transition.action) + (" (implicit)" if transition.implicit else ""))
    if graph.overlaid:
        cells.append(str(transition.visits) if transition.visits else "")
    return cells


def _docs(docs: tuple[Doc, ...], empty: str) -> Iterator[str]:
    if not docs:
        yield empty
    for doc in docs:
        text = " ".join(doc.doc.split()) or "(no docstring)"
        yield f"- {_code(doc.name)}: {text}"
