"""The chart as the studio and the HTML trace show it (chart_view.js), in headless Chromium
at 1280x800: at its first size every shipped chart (charts/*.py) is whole in the window and
every label reads at 10 CSS px or more; the wheel and the buttons zoom, a drag pans.

A label's size is its computed font size times the scale the SVG draws it at
(`getScreenCTM`, which includes the viewBox), as tests/test_diagram_readability.py measures.
Pan and zoom are read from the SVG's viewBox before and after real input events
(`Input.dispatchMouseEvent`), not from the page's own script.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser_support import Browser, Page
from test_studio import needs_chromium, serve, studio_args

from helikon.cli import main as helikon_main
from helikon.cli.studio import open_session
from helikon.export import trace_to_html
from helikon.studio.server import StudioServer
from helikon.trace import read_trace

ROOT = Path(__file__).resolve().parent.parent
CHARTS = sorted(p for p in (ROOT / "charts").glob("*.py") if p.stem != "__init__")
WIDTH, HEIGHT = 1280, 800
MINIMUM = 10.0
STUDIO = "#diagram"
TRACE = ".chart-panel:not([hidden]) .canvas"

MEASURE = """
((frame) => {
  const svg = document.querySelector(frame + ' svg');
  const box = (e) => { const r = e.getBoundingClientRect();
    return [r.left, r.top, r.right, r.bottom]; };
  const labels = [...svg.querySelectorAll('text')].map(text => {
    const ctm = text.getScreenCTM();
    return [parseFloat(getComputedStyle(text).fontSize) * Math.hypot(ctm.a, ctm.b),
      text.textContent];
  });
  return {drawing: box(svg.querySelector('g.graph')), frame: box(document.querySelector(frame)),
    labels: labels};
})(%s)
"""
VIEW_BOX = "document.querySelector(%s + ' svg').getAttribute('viewBox').split(' ').map(Number)"


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Browser]:
    opened = Browser(tmp_path / "profile")
    yield opened
    opened.close()


def studio_page(browser: Browser, chart: Path) -> tuple[StudioServer, Page]:
    server = serve(open_session(studio_args(chart=str(chart))))
    page = browser.page(server.url, width=WIDTH, height=HEIGHT)
    page.wait_for("document.querySelector('#diagram svg g.graph') !== null")
    return server, page


def trace_page(browser: Browser, chart: Path, tmp_path: Path) -> Page:
    trace = tmp_path / f"{chart.stem}.jsonl"
    argv = ["run", str(chart), "--offline", "--approve", "all", "--trace", str(trace)]
    assert helikon_main(argv) == 0
    page = tmp_path / f"{chart.stem}.html"
    page.write_text(trace_to_html(read_trace(str(trace))), encoding="utf-8")
    return browser.page(page.as_uri(), width=WIDTH, height=HEIGHT)


def unreadable(page: Page, frame: str) -> list[str]:
    """What is wrong with the chart in `frame` at its first size (nothing: [])."""
    shown = page.evaluate(MEASURE % json.dumps(frame))
    left, top, right, bottom = shown["drawing"]
    f_left, f_top, f_right, f_bottom = shown["frame"]
    wrong = []
    if min(left, top) < 0 or right > WIDTH or bottom > HEIGHT:
        wrong.append(f"the drawing {shown['drawing']} is not all in the window")
    if left < f_left or top < f_top or right > f_right + 0.5 or bottom > f_bottom + 0.5:
        wrong.append(f"the drawing {shown['drawing']} overflows its box {shown['frame']}")
    wrong += [f"{text!r} at {px:.1f} px" for px, text in shown["labels"] if px < MINIMUM]
    return wrong


@needs_chromium
@pytest.mark.parametrize("chart", CHARTS, ids=[chart.stem for chart in CHARTS])
def test_every_chart_is_whole_and_readable_at_its_first_size(
    chart: Path, browser: Browser, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server, page = studio_page(browser, chart)
    try:
        assert unreadable(page, STUDIO) == [], f"{chart.stem} in the studio"
    finally:
        server.close()
    page = trace_page(browser, chart, tmp_path)
    capsys.readouterr()
    assert unreadable(page, TRACE) == [], f"{chart.stem} in the HTML trace"
    page.screenshot(tmp_path / f"trace-{chart.stem}.png")


def mouse(page: Page, kind: str, x: float, y: float, **more: Any) -> None:
    page.send("Input.dispatchMouseEvent", {"type": kind, "x": x, "y": y, **more})


def drag(page: Page, start: tuple[float, float], by: tuple[float, float]) -> None:
    (x, y), (dx, dy) = start, by
    mouse(page, "mouseMoved", x, y)
    mouse(page, "mousePressed", x, y, button="left", buttons=1, clickCount=1)
    for step in range(1, 6):
        mouse(page, "mouseMoved", x + dx * step / 5, y + dy * step / 5, button="left", buttons=1)
    mouse(page, "mouseReleased", x + dx, y + dy, button="left", buttons=0, clickCount=1)


def middle(page: Page, frame: str) -> tuple[float, float]:
    x, y = page.evaluate(
        f"(() => {{ const r = document.querySelector({json.dumps(frame)}).getBoundingClientRect();"
        " return [r.left + r.width / 2, r.top + r.height / 2]; })()"
    )
    return x, y


def pans_and_zooms(page: Page, frame: str) -> list[float]:
    """Zoom with the wheel and the buttons and pan by dragging, asserting each moves the
    viewBox as it should; returns the viewBox at the first size."""
    view = VIEW_BOX % json.dumps(frame)
    first = page.evaluate(view)
    x, y = middle(page, frame)
    x += 50  # off the middle: the wheel zooms about the pointer
    under = (
        f"(p => {{ const svg = document.querySelector({json.dumps(frame)} + ' svg');"
        f" p.x = {x}; p.y = {y}; p = p.matrixTransform(svg.getScreenCTM().inverse());"
        f" return [p.x, p.y]; }})"
        f"(document.querySelector({json.dumps(frame)} + ' svg').createSVGPoint())"
    )
    pointed = page.evaluate(under)
    mouse(page, "mouseWheel", x, y, deltaX=0, deltaY=-300)
    zoomed = page.wait_for(f"(v => v[2] < {first[2]} && v)({view})")
    assert zoomed[2] / zoomed[3] == pytest.approx(first[2] / first[3])
    assert page.evaluate(under) == pytest.approx(pointed, abs=0.5)  # still under the pointer
    unit = 1 / page.evaluate(
        f"document.querySelector({json.dumps(frame)} + ' svg').getScreenCTM().a"
    )  # chart units a CSS px
    drag(page, (x, y), (120, 60))
    panned = page.evaluate(view)
    assert panned[0] < zoomed[0] and panned[1] < zoomed[1]
    assert panned[2:] == pytest.approx(zoomed[2:])  # a drag only moves
    moved = [zoomed[0] - panned[0], zoomed[1] - panned[1]]
    assert moved == pytest.approx([120 * unit, 60 * unit], rel=0.01)  # the chart follows
    page.click("[data-chart-zoom=out]")
    assert page.evaluate(view)[2] == pytest.approx(panned[2] * 1.25)
    page.click("[data-chart-zoom=in]")
    page.click("[data-chart-zoom=in]")
    assert page.evaluate(view)[2] == pytest.approx(panned[2] / 1.25)
    page.click("[data-chart-zoom=fit]")
    assert page.evaluate(view) == pytest.approx(first)
    mouse(page, "mouseWheel", x, y, deltaX=0, deltaY=-300)
    page.wait_for(f"(v => v[2] < {first[2]})({view})")
    mouse(page, "mouseWheel", x, y, deltaX=0, deltaY=3000)  # out, past the first view: to it
    assert page.wait_for(f"(v => v[2] === {first[2]} && v)({view})") == pytest.approx(first)
    return list(first)


@needs_chromium
def test_the_studios_chart_pans_and_zooms_and_keeps_the_view_at_the_next_step(
    browser: Browser,
) -> None:
    server, page = studio_page(browser, ROOT / "charts" / "budget_assistant.py")
    try:
        view = VIEW_BOX % json.dumps(STUDIO)
        first = pans_and_zooms(page, STUDIO)
        x, y = middle(page, STUDIO)
        # At the first view the wheel turned down scrolls the page, not the chart.
        mouse(page, "mouseWheel", x, y, deltaX=0, deltaY=200)
        assert page.wait_for("window.scrollY > 0")
        assert page.evaluate(view) == pytest.approx(first)
        page.evaluate("window.scrollTo(0, 0)")
        mouse(page, "mouseWheel", x, y, deltaX=0, deltaY=-300)
        zoomed = page.wait_for(f"(v => v[2] < {first[2]} && v)({view})")
        first_svg = "document.querySelector('#diagram svg')"
        page.evaluate(f"window.before = {first_svg}")
        page.click("#step")
        page.wait_for(f"{first_svg} !== window.before")  # redrawn with the step's path
        assert page.evaluate(view) == pytest.approx(zoomed)  # where the reader had zoomed to
        # A drag that ends on a phase pans and picks nothing; a click on it picks it for a
        # breakpoint (the form's value, focused).
        page.click("[data-chart-zoom=fit]")
        phase = "#diagram g.node.phase"
        box = page.evaluate(
            f"(r => [r.left + r.width / 2, r.top + r.height / 2])"
            f"(document.querySelector({json.dumps(phase)}).getBoundingClientRect())"
        )
        drag(page, (box[0] - 80, box[1]), (80, 0))
        picked = "document.activeElement.id === 'bp-value' && document.activeElement.value"
        assert page.evaluate(picked) is False
        page.click(phase)
        name = page.evaluate(f"document.querySelector({json.dumps(phase)}).dataset.phase")
        assert page.wait_for(picked) == name
    finally:
        server.close()


@needs_chromium
def test_the_trace_pages_chart_pans_and_zooms(
    browser: Browser, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    page = trace_page(browser, ROOT / "charts" / "retrieve_answer.py", tmp_path)
    capsys.readouterr()
    pans_and_zooms(page, TRACE)
    assert page.console_errors() == []
