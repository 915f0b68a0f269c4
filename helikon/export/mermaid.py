"""Render a `ChartGraph` as a Mermaid `stateDiagram-v2` (for Markdown docs that render it).

One arrow per row, labelled `#id input [guards] / action` (the id is `Row.index`);
`[*] --> <initial>` marks the start and `Done --> [*]`, `Failed --> [*]` the ends. Phases
that share rows (cancel, fail) are drawn inside a composite state, with the shared rows
leaving it once. classDefs style done, failed and custom phases, and, with a trace overlay,
visited phases (a count in their description, `x3`) and the current one; with a coverage
overlay, a row no run took says `(uncovered)` on its arrow. The `overview` layout draws one
arrow per source and target instead, labelled with its row ids.
"""

from __future__ import annotations

from collections.abc import Iterator

from helikon.export.ir import ChartEdge, ChartGraph, ChartNode, ChartTransition, Layout, compact_ids

CLASS_DEFS = (
    ("done", "fill:#d4f1d4,stroke:#2e7d32,stroke-width:2px"),
    ("failed", "fill:#f8d7d5,stroke:#c62828,stroke-width:2px"),
    ("custom", "fill:#fff1d0,stroke:#b7791f,stroke-dasharray:5 3"),
    ("visited", "stroke:#1565c0,stroke-width:3px"),
    ("current", "stroke:#1565c0,stroke-width:5px,font-weight:bold"),
)
INDENT = "    "


def to_mermaid(graph: ChartGraph, layout: Layout = "detailed") -> str:
    """The graph as Mermaid text, ending in a newline; `layout` as for `to_dot`."""
    lines = ["---", f"title: {graph.name}", "---", "stateDiagram-v2"]
    lines += [f"{INDENT}classDef {name} {style}" for name, style in CLASS_DEFS]
    members = set(graph.group.members) if graph.group else set()
    inner = [e for e in graph.edges if e.source in members and e.target in members]
    outer = [e for e in graph.edges if e not in inner]
    if graph.group:
        lines.append(f'{INDENT}state "{graph.group.label}" as {graph.group.id} {{')
        lines += [INDENT + line for line in _states(graph, graph.group.members)]
        lines += [INDENT + line for edge in inner for line in _arrows(edge, graph, layout)]
        lines.append(f"{INDENT}}}")
    others = tuple(n.id for n in graph.nodes if n.id not in members and n.kind != "initial")
    lines += _states(graph, others)
    lines += [line for edge in outer for line in _arrows(edge, graph, layout)]
    lines += [f"{INDENT}{n.id} --> [*]" for n in graph.nodes if n.kind in ("done", "failed")]
    lines += _classes(graph)
    return "\n".join(lines) + "\n"


def _states(graph: ChartGraph, ids: tuple[str, ...]) -> Iterator[str]:
    for node_id in ids:
        node = graph.node(node_id)
        yield f"{INDENT}{node.id}"
        if graph.overlaid and node.visits:
            yield f"{INDENT}{node.id} : {node.label} x{node.visits}"


def _endpoint(node_id: str, graph: ChartGraph) -> str:
    return "[*]" if graph.kind_of(node_id) == "initial" else node_id


def _arrows(edge: ChartEdge, graph: ChartGraph, layout: Layout) -> Iterator[str]:
    source, target = _endpoint(edge.source, graph), edge.target
    if not edge.transitions:
        yield f"{INDENT}{source} --> {target}"
    elif layout == "overview":
        count = f"  x{edge.visits}" if graph.overlaid and edge.visits else ""
        yield f"{INDENT}{source} --> {target} : {compact_ids(edge.rows)[0]}{count}"
        return
    for transition in edge.transitions:
        yield f"{INDENT}{source} --> {target} : {_label(transition, graph.overlaid)}"


def _label(transition: ChartTransition, overlaid: bool) -> str:
    # Mermaid reads `;` as the end of a statement and `#...;` as an entity: keep both out.
    text = transition.label.replace(";", ",")
    visits = f"  x{transition.visits}" if overlaid and transition.visits else ""
    return text + visits + transition.coverage_note


def _classes(graph: ChartGraph) -> Iterator[str]:
    by_class: dict[str, list[str]] = {}
    for node in graph.nodes:
        for name in _node_classes(node, graph.overlaid):
            by_class.setdefault(name, []).append(node.id)
    for name, _ in CLASS_DEFS:
        if name in by_class:
            yield f"{INDENT}class {','.join(by_class[name])} {name}"


def _node_classes(node: ChartNode, overlaid: bool) -> tuple[str, ...]:
    if node.kind == "initial":
        return ()
    # A state takes its kind's class and then its overlay class, which wins where both set
    # the same property (the later `class` statement applies last).
    kind = (node.kind,) if node.kind in ("done", "failed", "custom") else ()
    if overlaid and node.current:
        return (*kind, "current")
    if overlaid and node.visits:
        return (*kind, "visited")
    return kind
