"""The chart drawn with a run's path over it, for the studio page.

`helikon.export` does the drawing: the rows fired so far become a `TraceOverlay` (visited
phases and edges in blue with their counts, the current phase bold), Graphviz's `dot` turns
its DOT into SVG. Drawing takes a subprocess, so drawings are cached by path and current
phase, and the HTTP threads draw, never the debugger's loop. Without `dot` the page gets the
DOT text and a note saying why.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from helikon.core.table import TransitionTable
from helikon.export import RenderError, TraceOverlay, chart_to_dot, render

CACHE_SIZE = 64
_COMMENT = re.compile(r"<!--.*?-->\s*", re.DOTALL)


class Diagram:
    """Draws one chart with overlays; safe to call from several threads."""

    def __init__(self, table: TransitionTable) -> None:
        self.table = table
        self._lock = threading.Lock()
        self._drawn: dict[tuple[tuple[int, ...], str], dict[str, Any]] = {}

    def overlay(self, path: Sequence[int], current: str) -> TraceOverlay:
        """The overlay of a run that fired the rows `path` and is now in phase `current`.

        The current phase is the state's own, not the last row's target: an output
        guardrail, say, can end a step in another phase than its row names.
        """
        return replace(TraceOverlay.from_rows(self.table, path), current=current)

    def draw(self, path: Sequence[int], current: str) -> dict[str, Any]:
        """`{"svg": ..., "dot": None, "note": None}`, or without `dot`: svg None, the DOT
        text and a note."""
        key = (tuple(path), current)
        with self._lock:
            found = self._drawn.get(key)
        if found is not None:
            return found
        dot = chart_to_dot(self.table, self.overlay(path, current))
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
