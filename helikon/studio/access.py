"""Who may ask the studio: where it may listen, and the checks a request passes before it
is read further.

Theory of operation: on 127.0.0.1 (`LOOPBACK`) the studio takes requests whose Host header
names that address (or `localhost`) with its port, which a web page reaching it through a
DNS name of its own cannot send (DNS rebinding). Bound to any other address it needs a
token (`check_bind`), and every request must carry it (`check_token`), as a bearer token,
as `?token=`, or in the cookie the page's answer sets; commands must then come from the
Host's own origin. Either way, a command whose Origin is another site is refused
(`check_origin`), and the page opens only as a page (`check_page_fetch`), never as an image
or a frame another site embeds. Each check raises `HTTPProblem` with the status to answer.
"""

from __future__ import annotations

import hmac
from email.message import Message
from http import HTTPStatus
from urllib.parse import parse_qs, urlsplit

from helikon.core.quoting import quoted
from helikon.studio.errors import StudioError
from helikon.studio.request import HTTPProblem, cookie

LOOPBACK = "127.0.0.1"
MIN_TOKEN = 16  # characters a token must have


def check_bind(host: str, token: str | None) -> None:
    """Raises `StudioError` unless `host` is 127.0.0.1, or an IPv4 address (or name) with a
    token of at least `MIN_TOKEN` characters."""
    if host == LOOPBACK:
        return
    if not host or ":" in host:
        raise StudioError(f"the studio listens on an IPv4 address or name, not {host!r}")
    if token is None or len(token) < MIN_TOKEN or not token.isascii() or not token.isprintable():
        raise StudioError(
            f"the studio listens on {host!r} only with a token (of {MIN_TOKEN} printable "
            f"characters or more): whoever can reach it can run the agent and its tools; "
            f"it listens on {LOOPBACK} without one"
        )


def check_token(headers: Message, path: str, expected: str, token_cookie: str) -> None:
    """Every token the request carries (header, query, cookie) is `expected`, and it
    carries one.

    Raises:
        HTTPProblem: 401, without it or with another.
    """
    given = [
        value
        for value in (
            _bearer(headers.get("Authorization")),
            _query_token(path),
            cookie(headers, token_cookie),
        )
        if value is not None
    ]
    if not given or not all(
        hmac.compare_digest(value.encode(), expected.encode()) for value in given
    ):
        raise HTTPProblem(
            HTTPStatus.UNAUTHORIZED,
            "this studio needs its token: open the URL it printed at start",
        )


def check_host(headers: Message, allowed: frozenset[str]) -> None:
    """Raises `HTTPProblem` (403) unless the Host header is one of `allowed`."""
    host = headers.get("Host", "")
    if host not in allowed:
        raise HTTPProblem(HTTPStatus.FORBIDDEN, f"unexpected Host header {quoted(host)}")


def check_origin(headers: Message, allowed: frozenset[str], token: str | None) -> None:
    """Raises `HTTPProblem` (403) for a command from another origin than `allowed`'s (with
    a token, reached by any name: the Host's own)."""
    origin = headers.get("Origin")
    hosts = allowed
    if token is not None:  # reached by any name: its own origin only
        hosts = frozenset({headers.get("Host", "")})
    if origin is not None and origin not in {f"http://{h}" for h in hosts}:
        raise HTTPProblem(HTTPStatus.FORBIDDEN, f"commands from {origin} are refused")


def check_page_fetch(headers: Message) -> None:
    """Raises `HTTPProblem` (403) when the browser fetches the page as something other than
    a page (an image, a script, a frame: what another site can make it do unasked, each
    load a new session that pushes out one unused, the live run's driver who stepped away
    included)."""
    dest = headers.get("Sec-Fetch-Dest")
    if dest is not None and dest != "document":
        raise HTTPProblem(
            HTTPStatus.FORBIDDEN, f"the studio's page opens as a page, not as {quoted(dest)}"
        )


def _bearer(header: str | None) -> str | None:
    if header is None:
        return None
    kind, _, value = header.partition(" ")
    return value.strip() if kind.lower() == "bearer" else ""


def _query_token(path: str) -> str | None:
    found = parse_qs(urlsplit(path).query).get("token")
    return None if not found else found[-1] if len(found) == 1 else ""
