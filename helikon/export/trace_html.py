"""Render a `TraceView` as one self-contained HTML page: a timeline beside the run's chart.

The page needs nothing outside itself: CSS and a few lines of JS (fold all turns, switch the
chart between runs, and chart_view.js, the studio's too: the chart fitted to the window at
first, zoomed with the wheel or buttons and panned by dragging) are inline, and a
Content-Security-Policy allows no fetch at all and only the page's own script (by its hash),
so a page opened from disk makes no network request and runs nothing it did not ship with.

Every text that comes from the trace goes through jinja2's autoescaping; the template marks
nothing from the trace safe. The one markup inserted as is is the chart's SVG, made by
Graphviz's `dot` from the chart (phase, guard and action names), which escapes every label
(`<` as `&lt;`, `-` as `&#45;`, so a label cannot close a comment either); its comments, XML
declaration and doctype are dropped. The chart is the overview layout (row ids on the edges,
the timeline naming the rows), which stays legible at the page's first size. Without `dot`
(or with `svg=False`) the chart shows as DOT text, escaped like the rest. Output is
byte-stable for the same trace, Graphviz and helikon.
"""

from __future__ import annotations

import base64
import hashlib
import re
from dataclasses import dataclass

from jinja2 import Environment, PackageLoader
from markupsafe import Markup

from helikon.export.dot import to_dot
from helikon.export.ir import extract
from helikon.export.render import RenderError, render
from helikon.export.trace_view import RunSection, TraceView, usage_text
from helikon.trace.times import duration_text, time_text

_COMMENT = re.compile(r"<!--.*?-->\s*", re.DOTALL)


@dataclass(frozen=True, slots=True)
class ChartPanel:
    """One run's path over the chart: the SVG (None without `dot`) and the DOT text."""

    run_id: str
    agent: str
    path: tuple[str, ...]
    dot: str
    svg: Markup | None = None


def to_html(view: TraceView, *, svg: bool = True) -> str:
    """The trace as an HTML page, ending in a newline.

    Args:
        view: the extracted trace.
        svg: draw the chart with Graphviz's `dot`; when False, or when `dot` is missing,
            the page shows the chart's DOT text instead.
    """
    env = environment()
    script = env.get_template("chart_view.js").render() + env.get_template("trace.js").render()
    panels, note = chart_panels(view, svg)
    page = env.get_template("trace.html.j2").render(
        view=view,
        panels=panels,
        chart_note=note,
        script=Markup(script),  # our own file, not trace data
        script_hash=_csp_hash(script),
    )
    return page.rstrip("\n") + "\n"


def environment() -> Environment:
    env = Environment(
        loader=PackageLoader("helikon.export", "templates"),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["usage"] = usage_text
    env.filters["short"] = lambda text: text[:12]
    env.filters["anchor"] = run_anchor
    env.filters["clock"] = time_text
    env.filters["date"] = lambda at: time_text(at, date=True)
    env.filters["took"] = duration_text
    return env


def chart_panels(view: TraceView, svg: bool) -> tuple[list[ChartPanel], str]:
    """A panel per run recorded on the resolved chart, and a note to show above them."""
    table = view.table
    if table is None:
        return [], view.chart_note
    panels: list[ChartPanel] = []
    note = ""
    for run in view.runs:
        overlay = view.overlay(run)
        if overlay is None:
            continue
        dot = to_dot(extract(table, overlay), "overview")  # legible at its first size
        drawn = None
        if svg and not note:
            try:
                drawn = inline_svg(render(dot, "svg"))
            except RenderError as exc:
                note = f"The chart is shown as DOT text: {exc}"
        panels.append(ChartPanel(run.run_id, run.agent, run.path, dot, drawn))
    return panels, note or _skipped_note(view)


def inline_svg(image: bytes) -> Markup:
    """Graphviz's SVG, made fit to sit inside HTML: from `<svg` on, without comments."""
    text = image.decode("utf-8")
    text = _COMMENT.sub("", text[text.find("<svg") :])
    return Markup(text.strip())  # dot escaped every label (see the module docstring)


def _skipped_note(view: TraceView) -> str:
    off = [run.agent for run in view.runs if not run.on_chart and run.rows]
    if not off:
        return ""
    return "Not drawn (recorded on another chart): " + ", ".join(off) + "."


def _csp_hash(script: str) -> str:
    digest = hashlib.sha256(script.encode("utf-8")).digest()
    return "sha256-" + base64.b64encode(digest).decode("ascii")


def run_anchor(run: RunSection) -> str:
    return "run-" + re.sub(r"[^A-Za-z0-9_-]", "-", run.run_id)
