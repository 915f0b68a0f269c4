"""Diagrams fit for documentation: at a docs page's width, every label can be read.

Each chart diagram the docs ship (docs/charts/<name>.svg, the overview layout, also the
README's hero image; and <name>-detailed.svg) is shown inline in headless Chromium at 700 px
wide, about the content width of the docs' theme. For every SVG `text` element the browser
reports its computed font size and the scale the SVG is drawn at (`getScreenCTM`); their
product is the size the label is rendered at, in CSS pixels. The overview must keep every
label at 9 px or more; the detailed layout, which writes every row on its edge, is measured
too and is expected to fall below that (it is linked from the pages, for zooming in).
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import pytest
from browser_support import CHROMIUM, Browser

DOCS_CHARTS = Path(__file__).resolve().parents[1] / "docs" / "charts"
WIDTH = 700
MINIMUM = 9.0
OVERVIEWS = sorted(p for p in DOCS_CHARTS.glob("*.svg") if not p.stem.endswith("-detailed"))
DETAILED = sorted(DOCS_CHARTS.glob("*-detailed.svg"))

needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="needs Chromium")

MEASURE = """
[...document.querySelectorAll('svg')].map(svg => ({
  name: svg.closest('section').id,
  width: svg.getBoundingClientRect().width,
  labels: [...svg.querySelectorAll('text')].map(text => {
    const ctm = text.getScreenCTM();
    const scale = Math.hypot(ctm.a, ctm.b);
    return {
      text: text.textContent,
      px: parseFloat(getComputedStyle(text).fontSize) * scale,
      box: text.getBoundingClientRect().height,
    };
  }),
}))
"""


def page(svgs: list[Path]) -> str:
    """An HTML page showing each SVG inline, `WIDTH` px wide, its height to scale."""
    sections = []
    for path in svgs:
        svg = path.read_text(encoding="utf-8")
        svg = svg[svg.index("<svg") :]
        sections.append(f'<section id="{html.escape(path.stem)}">{svg}</section>')
    style = f"body {{ margin: 0 }} svg {{ display: block; width: {WIDTH}px; height: auto }}"
    return f"<!doctype html><style>{style}</style>" + "".join(sections)


def measure(tmp_path: Path, svgs: list[Path]) -> list[dict[str, Any]]:
    target = tmp_path / "diagrams.html"
    target.write_text(page(svgs), encoding="utf-8")
    browser = Browser(tmp_path / "profile")
    try:
        shown = browser.page(target.as_uri(), width=WIDTH + 40, height=900)
        measured: list[dict[str, Any]] = shown.evaluate(MEASURE)
    finally:
        browser.close()
    return measured


def smallest(diagram: dict[str, Any]) -> dict[str, Any]:
    return min(diagram["labels"], key=lambda label: label["px"])


@needs_chromium
def test_every_overview_label_is_at_least_9_px_at_700_px_wide(tmp_path: Path) -> None:
    assert OVERVIEWS, "no diagrams under docs/charts: run `helikon docs`"
    diagrams = measure(tmp_path, OVERVIEWS)
    assert len(diagrams) == len(OVERVIEWS)
    report = []
    for diagram in diagrams:
        assert round(diagram["width"]) == WIDTH
        assert diagram["labels"], diagram["name"]
        label = smallest(diagram)
        report.append(f"{diagram['name']}: {label['px']:.1f} px ({label['text']!r})")
        # The glyphs' box agrees with the font size: the browser drew them that big.
        assert label["box"] >= label["px"] * 0.9
    print("smallest overview labels at 700 px:", "; ".join(report))
    too_small = [line for line, d in zip(report, diagrams, strict=True) if smallest(d)["px"] < 9]
    assert not too_small, too_small


@needs_chromium
def test_the_detailed_layout_is_measured_too_and_is_not_for_page_width(tmp_path: Path) -> None:
    diagrams = measure(tmp_path, DETAILED)
    sizes = {d["name"]: round(smallest(d)["px"], 1) for d in diagrams}
    print("smallest detailed labels at 700 px:", sizes)
    # This is why the pages show the overview: the same charts, written out row by row,
    # shrink their labels below legibility at a page's width.
    assert sizes and all(size < MINIMUM for size in sizes.values()), sizes
