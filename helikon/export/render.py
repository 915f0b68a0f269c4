"""Turn DOT text into SVG or PNG with Graphviz's `dot`: the one IO step of chart export.

This is the only module that imports the `graphviz` package, and only when `render` is
called, so importing `helikon.export` needs neither the package nor the executable.
"""

from __future__ import annotations

from typing import Literal

from helikon.core.errors import HelikonError

ImageFormat = Literal["svg", "png"]
FORMATS: tuple[ImageFormat, ...] = ("svg", "png")


class RenderError(HelikonError):
    """A diagram could not be rendered; `missing` names the absent executable or package."""

    def __init__(self, message: str, *, missing: str | None = None):
        super().__init__(message)
        self.missing = missing


def render(dot: str, format: ImageFormat = "svg") -> bytes:
    """Lay out and draw DOT text with Graphviz.

    Args:
        dot: a DOT graph, e.g. from `chart_to_dot`.
        format: "svg" or "png".

    Returns:
        The image's bytes.

    Raises:
        RenderError: the `dot` executable or the `graphviz` package is missing (`missing`
            names which), or `dot` rejected the input.
        ValueError: an unknown format.
    """
    if format not in FORMATS:
        raise ValueError(f"unknown image format {format!r}; expected one of {FORMATS}")
    try:
        import graphviz  # type: ignore[import-untyped]
    except ImportError as exc:
        raise RenderError(
            "rendering a diagram needs the graphviz package: pip install 'helikon[render]'",
            missing="graphviz",
        ) from exc
    try:
        image: bytes = graphviz.Source(dot).pipe(format=format)
    except graphviz.ExecutableNotFound as exc:
        raise RenderError(
            "rendering a diagram needs Graphviz's `dot` executable on PATH "
            "(e.g. apt-get install graphviz, brew install graphviz)",
            missing="dot",
        ) from exc
    except graphviz.CalledProcessError as exc:
        stderr = exc.stderr.decode(errors="replace").strip() if exc.stderr else ""
        raise RenderError(f"dot could not render the diagram: {stderr}") from exc
    return image
