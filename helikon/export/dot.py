"""Render a `ChartGraph` as Graphviz DOT text (pure: turning it into SVG or PNG is `render`).

The picture: phases are rounded boxes, custom phases dashed and amber; `Done` and `Failed`
are double circles, green and red, and so are the edges into them; a black dot points at
the initial phase. Each edge lists its rows, one line each, as `#id input [guards] / action`
(the id is the row's `Row.index`). Phases that share rows (cancel, fail) sit in a dashed
cluster with one edge from it. With a trace overlay, visited phases and edges turn blue
with their counts (`x3`), the rest turn grey, and the current phase is drawn bold. With a
coverage overlay, an edge with a row no run took is dashed and orange, and that row's line
says so. The overlay's marks become `class` attributes, which Graphviz puts on the SVG
elements of their nodes and edges (and other formats ignore).

That is the `detailed` layout. The `overview` layout draws the same phases with one edge
per source and target, labelled only with its row ids (`0, 3-5`), in larger type and closer
together, so the picture stays legible at a documentation page's width; the rows go into a
table beside it (`to_markdown`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from helikon.export.ir import (
    ChartEdge,
    ChartGraph,
    ChartNode,
    ChartTransition,
    Layout,
    compact_ids,
)

FONT = "Helvetica"
INK = "#3c4a5c"
VISITED = "#1565c0"
UNVISITED = "#a0a7b0"
UNCOVERED = "#e65100"

NODE_STYLE: dict[str, dict[str, str]] = {
    "initial": {"shape": "point", "width": "0.18", "color": "black", "label": ""},
    "normal": {"fillcolor": "#e8eef7", "color": INK},
    "custom": {"fillcolor": "#fff1d0", "color": "#b7791f", "style": "rounded,filled,dashed"},
    "done": {"shape": "doublecircle", "fillcolor": "#d4f1d4", "color": "#2e7d32"},
    "failed": {"shape": "doublecircle", "fillcolor": "#f8d7d5", "color": "#c62828"},
}
EDGE_COLOR = {"done": "#2e7d32", "failed": "#c62828"}


@dataclass(frozen=True, slots=True)
class Look:
    """The sizes a layout draws with (points, and inches for the gaps)."""

    node_font: str
    edge_font: str
    group_font: str
    nodesep: str
    ranksep: str


LOOKS: dict[Layout, Look] = {
    "detailed": Look("12", "9", "10", "0.5", "0.7"),
    "overview": Look("14", "14", "14", "0.3", "0.45"),
}
# An overview label holds at most this many ids a line, so a shared edge stays narrow.
IDS_PER_LINE = 5


def to_dot(graph: ChartGraph, layout: Layout = "detailed") -> str:
    """The graph as a DOT `digraph`, top to bottom, ending in a newline.

    Args:
        graph: what `extract` returned.
        layout: `detailed` (every row on its edge) or `overview` (row ids only).
    """
    look = LOOKS[layout]
    lines = [f"digraph {quote(graph.name)} {{", *_defaults(graph, look)]
    members = set(graph.group.members) if graph.group else set()
    lines += [_node(node, graph) for node in graph.nodes if node.id not in members]
    if graph.group:
        lines += _cluster(graph, look)
    terminals = [n.id for n in graph.nodes if n.kind in ("done", "failed")]
    if terminals:
        # Outcomes sit on the bottom rank, so the picture reads as a flow down to them.
        lines.append("  { rank=sink; " + " ".join(f"{quote(t)};" for t in terminals) + " }")
    lines += [_edge(edge, graph, layout) for edge in graph.edges]
    return "\n".join([*lines, "}"]) + "\n"


class Escaped(str):
    """Text already escaped for a DOT string (it holds `\\l` line ends)."""


def quote(text: str) -> str:
    """A DOT double-quoted string."""
    if isinstance(text, Escaped):
        return f'"{text}"'
    return '"' + escape(text).replace("\n", "\\n") + '"'


def escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def _attrs(attrs: dict[str, str]) -> str:
    return "[" + ", ".join(f"{key}={quote(value)}" for key, value in attrs.items()) + "]"


def _defaults(graph: ChartGraph, look: Look) -> Iterator[str]:
    overlay = " (coverage)" if graph.coverage else " (trace overlay)"
    title = graph.name + (overlay if graph.overlaid else "")
    yield (
        "  graph "
        + _attrs(
            {
                "label": title,
                "labelloc": "t",
                "fontname": FONT,
                "fontsize": "16",
                "rankdir": "TB",
                "compound": "true",
                "nodesep": look.nodesep,
                "ranksep": look.ranksep,
                "newrank": "true",
            }
        )
        + ";"
    )
    yield (
        "  node "
        + _attrs(
            {
                "fontname": FONT,
                "fontsize": look.node_font,
                "shape": "box",
                "style": "rounded,filled",
            }
        )
        + ";"
    )
    yield (
        "  edge "
        + _attrs(
            {
                "fontname": FONT,
                "fontsize": look.edge_font,
                "color": INK,
                "fontcolor": INK,
                "arrowsize": "0.7",
            }
        )
        + ";"
    )


def _node(node: ChartNode, graph: ChartGraph, indent: str = "  ") -> str:
    attrs = dict(NODE_STYLE[node.kind])
    if node.kind != "initial":
        attrs["label"] = node.label
        if graph.overlaid:
            attrs.update(_node_overlay(node, attrs))
    if node.marks:
        attrs["class"] = " ".join(node.marks)
    return f"{indent}{quote(node.id)} {_attrs(attrs)};"


def _node_overlay(node: ChartNode, attrs: dict[str, str]) -> dict[str, str]:
    if not node.visits and not node.current:
        return {"color": UNVISITED, "fontcolor": UNVISITED}
    extra = {"color": VISITED, "penwidth": "2.5"}
    if node.visits:
        extra["label"] = f"{node.label}\nx{node.visits}"
    if node.current:
        style = attrs.get("style", "rounded,filled")
        extra.update({"penwidth": "4", "fontname": f"{FONT}-Bold", "style": style + ",bold"})
    return extra


def _cluster(graph: ChartGraph, look: Look) -> Iterator[str]:
    assert graph.group is not None
    yield f"  subgraph {quote('cluster_' + graph.group.id)} {{"
    yield (
        "    graph "
        + _attrs(
            {
                "label": graph.group.label,
                "labeljust": "l",
                "style": "rounded,dashed",
                "color": UNVISITED,
                "fontcolor": "#5a6470",
                "fontsize": look.group_font,
            }
        )
        + ";"
    )
    for member in graph.group.members:
        yield _node(graph.node(member), graph, indent="    ")
    yield "  }"


def _edge(edge: ChartEdge, graph: ChartGraph, layout: Layout) -> str:
    source, attrs = edge.source, {}
    if graph.group and source == graph.group.id:
        # An edge leaves a cluster from one of its nodes, clipped at the cluster's border.
        source = graph.group.members[-1]
        attrs["ltail"] = "cluster_" + graph.group.id
    if edge.transitions and layout == "overview":
        attrs["label"] = _ids_label(edge, graph.overlaid)
    elif edge.transitions:
        attrs["label"] = _label(edge.transitions, graph.overlaid)
    color = _edge_color(edge, graph)
    if color:
        attrs.update({"color": color, "fontcolor": color})
    if graph.overlaid and edge.visits:
        attrs["penwidth"] = "2"
    if any(t.uncovered for t in edge.transitions):
        attrs.update({"color": UNCOVERED, "fontcolor": UNCOVERED, "style": "dashed"})
    if edge.marks:
        attrs["class"] = " ".join(edge.marks)
    body = f"  {quote(source)} -> {quote(edge.target)}"
    return f"{body} {_attrs(attrs)};" if attrs else f"{body};"


def _edge_color(edge: ChartEdge, graph: ChartGraph) -> str | None:
    if edge.source == graph.nodes[0].id and graph.nodes[0].kind == "initial":
        return None
    if graph.overlaid:
        return VISITED if edge.visits else UNVISITED
    return EDGE_COLOR.get(graph.node(edge.target).kind)


def _label(transitions: tuple[ChartTransition, ...], overlaid: bool) -> Escaped:
    # `\l` ends a left-justified line, so the lines are escaped here, not by `quote`.
    lines = [
        t.label + (f"  x{t.visits}" if overlaid and t.visits else "") + t.coverage_note
        for t in transitions
    ]
    return Escaped("".join(escape(line) + "\\l" for line in lines))


def _ids_label(edge: ChartEdge, overlaid: bool) -> str:
    lines = list(compact_ids(edge.rows, IDS_PER_LINE))
    if overlaid and edge.visits:
        lines.append(f"x{edge.visits}")
    return "\n".join(lines)
