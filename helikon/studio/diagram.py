"""The chart drawn with a run's path over it, for the studio page.

`helikon.export` does the drawing: the rows fired so far become a `TraceOverlay` (visited
phases and edges in blue with their counts, the current phase bold), Graphviz's `dot` turns
its DOT into SVG. It is the overview layout (row ids on the edges, the step panels naming
the rows), which the page fits whole and legible into the window (chart_view.js). Drawing
takes a subprocess, so drawings are cached by path, current phase and comparison, and the
HTTP threads draw, never the debugger's loop. Without `dot` the page gets the DOT text and a
note saying why.

A fork shown beside its original (`ThreadedDebugger._comparison`) is drawn with both paths marked
(`compare_marks`): the steps the two share before they diverge, the original's steps from
there and the fork's, each a class on the SVG elements of its edges and the phases they
enter (`COMPARE_CLASSES`), the step where they part and the phase it left marked too; the
page's style sheet colours them and its legend names them.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from helikon.core.table import TransitionTable
from helikon.export import RenderError, TraceOverlay, chart_to_dot, render

CACHE_SIZE = 64
_COMMENT = re.compile(r"<!--.*?-->\s*", re.DOTALL)

SHARED, ORIGINAL, FORK = "path-shared", "path-original", "path-fork"
DIVERGES, DIVERGED_HERE = "diverges", "diverged-here"
COMPARE_CLASSES = {
    SHARED: "a step both runs took, before they diverge",
    ORIGINAL: "a step of the original from the divergence on",
    FORK: "a step of the fork from the divergence on",
    DIVERGES: "the step where the two runs part (on an edge)",
    DIVERGED_HERE: "the phase the diverging step left (on a phase)",
}
"""The classes a comparison puts on the SVG, and what each means."""

Marks = tuple[tuple[tuple[int, tuple[str, ...]], ...], tuple[tuple[str, tuple[str, ...]], ...]]
"""A comparison's row marks and phase marks, as sorted pairs (hashable, for the cache)."""


def compare_marks(compare: Mapping[str, Any] | None) -> Marks:
    """The classes each row and phase gets in a drawing of `compare` (a snapshot's
    `compare`: steps with the `original` and `fork` row each took, `diverged_at`); no
    marks without one. A row both runs took after the divergence has both path classes."""
    if not compare:
        return (), ()
    rows: dict[int, set[str]] = {}
    phases: dict[str, set[str]] = {}
    diverged = compare["diverged_at"]
    for step in compare["steps"]:
        before = diverged is None or step["step"] < diverged
        for side, role in (("original", ORIGINAL), ("fork", FORK)):
            taken = step[side]
            if taken is None:
                continue
            mark = SHARED if before else role
            rows.setdefault(taken["row"], set()).add(mark)
            phases.setdefault(taken["to"], set()).add(mark)
            if step["step"] == diverged:
                rows[taken["row"]].add(DIVERGES)
                phases.setdefault(taken["from"], set()).add(DIVERGED_HERE)
    return (
        tuple(sorted((row, tuple(sorted(m))) for row, m in rows.items())),
        tuple(sorted((phase, tuple(sorted(m))) for phase, m in phases.items())),
    )


class Diagram:
    """Draws one chart with overlays; safe to call from several threads."""

    def __init__(self, table: TransitionTable) -> None:
        self.table = table
        self._lock = threading.Lock()
        self._drawn: dict[tuple[tuple[int, ...], str, Marks], dict[str, Any]] = {}

    def overlay(self, path: Sequence[int], current: str, marks: Marks = ((), ())) -> TraceOverlay:
        """The overlay of a run that fired the rows `path` and is now in phase `current`,
        with `marks` (`compare_marks`) on its rows and phases.

        The current phase is the state's own, not the last row's target: an output
        guardrail, say, can end a step in another phase than its row names.
        """
        rows, phases = marks
        return replace(
            TraceOverlay.from_rows(self.table, path),
            current=current,
            marks=dict(rows),
            phase_marks=dict(phases),
        )

    def draw(
        self, path: Sequence[int], current: str, compare: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """`{"svg": ..., "dot": None, "note": None}`, or without `dot`: svg None, the DOT
        text and a note. `compare`: a fork's comparison with its original, drawn marked."""
        marks = compare_marks(compare)
        key = (tuple(path), current, marks)
        with self._lock:
            found = self._drawn.get(key)
        if found is not None:
            return found
        dot = chart_to_dot(
            self.table, self.overlay(path, current, marks), layout="overview"
        )  # row ids on the edges: legible at the page's first size (the rows are in the step)
        try:
            svg = inline_svg(render(dot, "svg"))
            drawn: dict[str, Any] = {"svg": svg, "dot": None, "note": None}
        except RenderError as exc:
            drawn = {"svg": None, "dot": dot, "note": f"The chart is shown as DOT text: {exc}"}
        with self._lock:
            if len(self._drawn) >= CACHE_SIZE:
                self._drawn.clear()
            self._drawn[key] = drawn
        return drawn


def inline_svg(image: bytes) -> str:
    """Graphviz's SVG from `<svg` on, without its XML declaration, doctype or comments."""
    text = image.decode("utf-8")
    return _COMMENT.sub("", text[text.find("<svg") :]).strip()
