"""Charts drawn into a documentation site's pages when the site is built.

Two front ends, one block: the mkdocs plugin (`helikon.docsite.mkdocs`, enabled as
`plugins: [helikon]`) replaces a fenced `helikon-chart` block, and the Sphinx directive
(`helikon.docsite.sphinx`, enabled with `extensions = ["helikon.docsite.sphinx"]`) a
`.. helikon-chart::` directive, with the chart a path names, drawn by Graphviz (inline SVG,
the overview layout unless told) and its rows as a table beneath, optionally with a
recorded run's path over it. So a page never holds a stale diagram.

Loading a chart imports the file or module that the page names, running its code, exactly
as `helikon diagram` does: the docs' author's own code, to be trusted like `conf.py`.
"""

from __future__ import annotations

from helikon.docsite.block import ChartBlock, DocsiteError, chart_block

__all__ = ["ChartBlock", "DocsiteError", "chart_block"]
