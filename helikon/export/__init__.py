"""Charts as diagrams and documents: DOT, Mermaid, Markdown and JSON, plus SVG and PNG.

Extract, then render: `extract` turns a compiled `TransitionTable` (and optionally a
`TraceOverlay` of a run) into a plain `ChartGraph`; `to_dot`, `to_mermaid` and `to_markdown`
each turn that graph into text. All of it is pure and byte-stable. Only `render` (DOT to SVG
or PNG) does IO: it runs Graphviz's `dot`, and imports the `graphviz` package when called.

    from helikon import DEFAULT_TABLE
    from helikon.export import chart_to_dot, render
    svg = render(chart_to_dot(DEFAULT_TABLE), "svg")
"""

from __future__ import annotations

from html import escape

from helikon.core.table import TransitionTable
from helikon.export.dot import to_dot
from helikon.export.ir import (
    LAYOUTS,
    ChartEdge,
    ChartGraph,
    ChartGroup,
    ChartNode,
    ChartTransition,
    Doc,
    Layout,
    TraceOverlay,
    compact_ids,
    extract,
)
from helikon.export.json import to_json
from helikon.export.markdown import to_markdown
from helikon.export.mermaid import to_mermaid
from helikon.export.render import ImageFormat, RenderError, render
from helikon.export.trace_ir import extract_trace
from helikon.export.trace_markdown import to_markdown as _trace_markdown
from helikon.export.trace_mermaid import to_mermaid as _trace_mermaid
from helikon.export.trace_view import TraceView
from helikon.trace import Trace

__all__ = [
    "LAYOUTS",
    "ChartEdge",
    "ChartGraph",
    "ChartGroup",
    "ChartNode",
    "ChartTransition",
    "ChartView",
    "Doc",
    "ImageFormat",
    "Layout",
    "RenderError",
    "TraceOverlay",
    "TraceView",
    "chart_to_dot",
    "chart_to_json",
    "chart_to_markdown",
    "chart_to_mermaid",
    "compact_ids",
    "extract",
    "extract_trace",
    "render",
    "to_dot",
    "to_json",
    "to_markdown",
    "to_mermaid",
    "trace_to_html",
    "trace_to_markdown",
    "trace_to_mermaid",
]


def chart_to_dot(
    table: TransitionTable,
    overlay: TraceOverlay | None = None,
    *,
    implicit: bool = False,
    layout: Layout = "detailed",
) -> str:
    """The chart as Graphviz DOT text.

    Args:
        table: the compiled chart.
        overlay: a run's visits to draw over it.
        implicit: add the implicit rows.
        layout: `detailed` (every row's input, guards and action on its edge) or `overview`
            (one edge per source and target, labelled with row ids: legible at a page's
            width, beside `chart_to_markdown`'s table of the rows).
    """
    return to_dot(extract(table, overlay, implicit=implicit), layout)


def chart_to_mermaid(
    table: TransitionTable,
    overlay: TraceOverlay | None = None,
    *,
    implicit: bool = False,
    layout: Layout = "detailed",
) -> str:
    """The chart as a Mermaid `stateDiagram-v2`; the arguments as for `chart_to_dot`."""
    return to_mermaid(extract(table, overlay, implicit=implicit), layout)


def chart_to_markdown(
    table: TransitionTable, overlay: TraceOverlay | None = None, *, implicit: bool = False
) -> str:
    """The chart's transition table and its guards' and actions' docs, as Markdown."""
    return to_markdown(extract(table, overlay, implicit=implicit))


def chart_to_json(table: TransitionTable) -> str:
    """The compiled table as JSON, with its digest."""
    return to_json(table)


def trace_to_html(trace: Trace, table: TransitionTable | None = None, *, svg: bool = True) -> str:
    """A recorded run as a self-contained HTML page: its timeline beside its chart.

    Args:
        trace: a trace read back with `helikon.trace.read_trace`.
        table: the run's chart; used only if its digest matches the trace header's.
            Without it (or when it does not match) the chart the trace recorded is drawn.
        svg: draw the chart with Graphviz's `dot`; when False, or without `dot`, the page
            shows its DOT text.

    Raises:
        RenderError: jinja2 (the `render` extra) is not installed; `missing` is "jinja2".
    """
    try:
        from helikon.export.trace_html import to_html  # jinja2 is needed only here
    except ModuleNotFoundError as exc:
        if exc.name not in ("jinja2", "markupsafe"):
            raise
        raise RenderError(
            "rendering HTML needs jinja2: pip install 'helikon[render]'", missing="jinja2"
        ) from exc
    return to_html(extract_trace(trace, table), svg=svg)


def trace_to_mermaid(trace: Trace) -> str:
    """A recorded run as a Mermaid `sequenceDiagram`."""
    return _trace_mermaid(extract_trace(trace))


def trace_to_markdown(trace: Trace) -> str:
    """A recorded run as a Markdown summary: outcome, usage, turns, tool calls, errors."""
    return _trace_markdown(extract_trace(trace))


class ChartView:
    """A chart (and optionally a run's overlay) that shows itself in a notebook.

    Jupyter calls `_repr_html_` (the SVG inline) or `_repr_svg_`; both need Graphviz's
    `dot`. Without it the HTML view falls back to the DOT text and `_repr_svg_` to None.
    `layout` is `detailed` or `overview`, as for `chart_to_dot`.
    """

    def __init__(
        self,
        table: TransitionTable,
        overlay: TraceOverlay | None = None,
        *,
        layout: Layout = "detailed",
    ) -> None:
        self.table = table
        self.overlay = overlay
        self.layout: Layout = layout

    def __repr__(self) -> str:
        overlay = ", overlay" if self.overlay else ""
        return f"ChartView({self.table.name}{overlay})"

    @property
    def dot(self) -> str:
        return chart_to_dot(self.table, self.overlay, layout=self.layout)

    @property
    def mermaid(self) -> str:
        return chart_to_mermaid(self.table, self.overlay, layout=self.layout)

    @property
    def markdown(self) -> str:
        return chart_to_markdown(self.table, self.overlay)

    def image(self, format: ImageFormat = "svg") -> bytes:
        """The diagram drawn by Graphviz; raises `RenderError` without `dot`."""
        return render(self.dot, format)

    def _repr_svg_(self) -> str | None:
        try:
            return self.image("svg").decode()
        except RenderError:
            return None

    def _repr_html_(self) -> str:
        svg = self._repr_svg_()
        if svg is None:
            note = "Graphviz's dot is not installed; the chart as DOT:"
            return f"<div><p>{note}</p><pre>{escape(self.dot)}</pre></div>"
        # Inline SVG in HTML takes no XML declaration or doctype: keep from `<svg` on.
        return f'<div class="helikon-chart">{svg[svg.find("<svg") :]}</div>'
