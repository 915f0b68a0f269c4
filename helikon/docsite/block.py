"""One chart block: a chart a page names, loaded, extracted and drawn, ready to embed.

Both the mkdocs plugin and the Sphinx directive turn their page's words into `chart_block`
arguments and the `ChartBlock` into their own markup; nothing here knows either tool.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from helikon.cli.loading import LoadError, load_table
from helikon.core.errors import ChartDefinitionError, HelikonError
from helikon.core.table import TransitionTable
from helikon.export import LAYOUTS, ChartGraph, RenderError, TraceOverlay, extract, render, to_dot
from helikon.export.ir import Layout
from helikon.trace import TraceError, read_trace


class DocsiteError(HelikonError):
    """A chart block cannot be drawn; the message names the block's chart and why."""


@dataclass(frozen=True, slots=True)
class ChartBlock:
    """A drawn chart: its table, the graph drawn, and the diagram as inline SVG markup."""

    table: TransitionTable
    graph: ChartGraph
    svg: str
    files: tuple[Path, ...]
    """The files the block was made from (chart file, trace), for rebuilds to watch."""


def chart_block(
    chart: str,
    *,
    root: Path,
    trace: str | None = None,
    layout: str = "overview",
    implicit: bool = False,
) -> ChartBlock:
    """Load, draw and tabulate the chart `chart` names.

    Args:
        chart: `default`, a chart file (`charts/triage.py`, `charts/triage.py:agent`) or a
            module (`myapp.charts:PLAN`), as `helikon diagram` takes it. The file or module
            is imported.
        root: the folder a relative chart or trace path starts from.
        trace: a trace file (JSONL) of a run on this chart, drawn over it.
        layout: `overview` or `detailed`.
        implicit: draw the implicit rows too.

    Raises:
        DocsiteError: the chart or trace cannot be loaded, or Graphviz cannot draw it.
    """
    if layout not in LAYOUTS:
        raise DocsiteError(f"layout {layout!r}: expected one of {', '.join(LAYOUTS)}")
    target, files = _located(chart, root)
    try:
        table: TransitionTable = load_table(target)
    except (LoadError, ChartDefinitionError) as exc:
        raise DocsiteError(f"chart {chart}: {exc}") from exc
    overlay = None
    if trace is not None:
        path = root / trace
        files = (*files, path)
        overlay = _overlay(table, path, trace)
    graph = extract(table, overlay, implicit=implicit)
    layout_: Layout = "overview" if layout == "overview" else "detailed"
    try:
        svg = render(to_dot(graph, layout_), "svg").decode()
    except RenderError as exc:
        raise DocsiteError(f"chart {chart}: {exc}") from exc
    return ChartBlock(table, graph, inline_svg(svg), files)


def _located(chart: str, root: Path) -> tuple[str, tuple[Path, ...]]:
    """The chart target with a relative file path made absolute from `root`."""
    where, colon, attr = chart.partition(":")
    if where.endswith(".py") or (root / where).is_file():
        path = (root / where).resolve()
        return f"{path}{colon}{attr}", (path,)
    return chart, ()


def _overlay(table: TransitionTable, path: Path, named: str) -> TraceOverlay:
    try:
        return TraceOverlay.from_trace(table, read_trace(path))
    except OSError as exc:
        raise DocsiteError(f"trace {named}: cannot read it: {exc.strerror}") from exc
    except (TraceError, ValueError) as exc:
        raise DocsiteError(f"trace {named}: {exc}") from exc


_SIZE = re.compile(r'<svg width="([0-9.]+)pt" height="[0-9.]+pt"')


def inline_svg(svg: str) -> str:
    """Graphviz's SVG as markup to put in a page: from `<svg` on, no blank line, as wide as
    the page allows up to its own width, its height to scale."""
    svg = svg[svg.index("<svg") :]
    svg = _SIZE.sub(
        lambda found: f'<svg width="100%" style="max-width: {found.group(1)}pt; height: auto"',
        svg,
        count=1,
    )
    return "\n".join(line for line in svg.splitlines() if line.strip())
