"""The Sphinx directive: `.. helikon-chart:: PATH` draws the chart and tabulates its rows.

In conf.py: `extensions = ["helikon.docsite.sphinx"]`. In a page:

    .. helikon-chart:: ../charts/triage.py
       :trace: ../runs/triage.jsonl
       :layout: detailed
       :implicit:
       :no-table:

The path is relative to the page, or to the source folder when it starts with `/` (as for
`literalinclude`); `default` is helikon's default loop, and `module:attr` a chart in an
importable module. The diagram is inline SVG for HTML builders (other builders leave it
out); the rows are a real table every builder writes. A chart file and a trace are noted
as dependencies, so editing them rebuilds the page. Loading a chart imports its file,
running its code.
"""

from __future__ import annotations

from typing import Any, ClassVar

from docutils import nodes  # type: ignore[import-untyped]
from docutils.parsers.rst import directives  # type: ignore[import-untyped]
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective

from helikon._version import __version__
from helikon.docsite.block import ChartBlock, DocsiteError, chart_block
from helikon.export.markdown import headers, row_cells


class HelikonChart(SphinxDirective):
    """`.. helikon-chart::`; see the module docstring."""

    required_arguments = 1
    has_content = False
    option_spec: ClassVar[dict[str, Any]] = {
        "trace": directives.unchanged_required,
        "layout": lambda value: directives.choice(value, ("overview", "detailed")),
        "implicit": directives.flag,
        "no-table": directives.flag,
    }

    def run(self) -> list[Any]:
        chart = self.arguments[0]
        try:
            block = chart_block(
                self._path(chart),
                root=self.env.srcdir,
                trace=self._path(self.options["trace"]) if "trace" in self.options else None,
                layout=self.options.get("layout", "overview"),
                implicit="implicit" in self.options,
            )
        except DocsiteError as exc:
            raise self.error(f"helikon-chart: {exc}") from exc
        for path in block.files:
            self.env.note_dependency(str(path))
        html = f'<div class="helikon-chart">{block.svg}</div>'
        made: list[Any] = [nodes.raw("", html, format="html")]
        if "no-table" not in self.options:
            made.append(rows_table(block))
        return made

    def _path(self, named: str) -> str:
        """A page-relative (or `/`-rooted) file path as a path from the source folder."""
        where, colon, attr = named.partition(":")
        if where == "default" or not (where.endswith((".py", ".jsonl")) or "/" in where):
            return named  # helikon's default loop, or an importable module
        relative, _ = self.env.relfn2path(where)
        return f"{relative}{colon}{attr}"


def rows_table(block: ChartBlock) -> Any:
    """The chart's rows as a docutils table (the Markdown export's columns)."""
    columns = headers(block.graph)
    group = nodes.tgroup(cols=len(columns))
    group += [nodes.colspec(colwidth=1) for _ in columns]
    group += nodes.thead("", _line(columns))
    body = nodes.tbody()
    body += [_line(row_cells(t, block.graph)) for t in block.graph.transitions]
    group += body
    table = nodes.table("", group, classes=["helikon-chart-rows"])
    return table


def _line(cells: list[str]) -> Any:
    row = nodes.row()
    for text in cells:
        row += nodes.entry("", nodes.paragraph(text=text))
    return row


def setup(app: Sphinx) -> dict[str, Any]:
    """Register the directive (Sphinx calls this for `extensions = [...]`)."""
    app.add_directive("helikon-chart", HelikonChart)
    return {"version": __version__, "parallel_read_safe": True, "parallel_write_safe": True}
