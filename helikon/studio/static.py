"""The studio's page and its files: which are served under /static/, their content types,
where each is read from, and the Content-Security-Policy every answer carries.

The page (`index.html`) loads its script and style from these files only: the policy lets
nothing else in (no inline script or style, no other origin).
"""

from __future__ import annotations

from importlib import resources

STATIC: dict[str, str] = {
    "chart_view.js": "text/javascript; charset=utf-8",  # the trace page's, in helikon.export
    "studio.js": "text/javascript; charset=utf-8",
    "studio.css": "text/css; charset=utf-8",
    "favicon.svg": "image/svg+xml",
}
PAGE = "index.html"
PAGE_TYPE = "text/html; charset=utf-8"
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)


def media_type(name: str) -> str:
    """The Content-Type `name` (one of `STATIC`, or the page) is served with."""
    return STATIC.get(name, PAGE_TYPE)


def read_files() -> dict[str, bytes]:
    """The page and every file of `STATIC`, read once when the studio starts."""
    return {name: _read(name) for name in (*STATIC, PAGE)}


def _read(name: str) -> bytes:
    if name == "chart_view.js":  # one pan and zoom for the studio and the trace page
        return resources.files("helikon.export").joinpath("templates", name).read_bytes()
    return resources.files("helikon.studio").joinpath("static", name).read_bytes()
