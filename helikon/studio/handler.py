"""The studio's HTTP exchange: one `StudioHandler` per request, on the server's thread for it.

Theory of operation: a request is read to a deadline (`helikon.studio.request.Deadline`: a
trickling client is dropped), then passes the access checks in order (`helikon.studio.access`:
the token when there is one, else the Host header; the Origin of a command), then is routed
by path and method: the page and its files (`helikon.studio.static`), or, for a request that
carries its browser session's cookie, the API (`helikon.studio.endpoints`) and the event
stream. Every refusal is JSON `{"error": message}` with its status, the standard library's
own (a malformed request line, a line too long) too. The handler knows its studio through
the small `Studio` protocol, which `StudioServer` (`helikon.studio.server`) is.
"""

from __future__ import annotations

import functools
import io
import json
import socket
from collections.abc import Callable
from concurrent.futures import CancelledError
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler
from socketserver import BaseServer
from typing import Any, Protocol
from urllib.parse import urlsplit

from helikon.core.quoting import cut
from helikon.studio.access import check_host, check_origin, check_page_fetch, check_token
from helikon.studio.browsers import BrowserSession, BrowserSessions, TooManyBrowsers, TooManyStreams
from helikon.studio.endpoints import (
    COMMANDS,
    Command,
    breakpoint_id,
    fork_stored,
    listing,
    open_stored,
    stored_runs,
)
from helikon.studio.errors import (
    StudioBusy,
    StudioConflict,
    StudioError,
    StudioFailure,
    StudioNotFound,
)
from helikon.studio.request import Deadline, HTTPProblem, body_length, cookie, id_number, read_body
from helikon.studio.session import ThreadedDebugger
from helikon.studio.static import CSP, PAGE, STATIC, media_type
from helikon.studio.stored import StoredRuns

Route = tuple[str, Callable[[], None]]
"""The method a path takes, and what answers it."""

KEEPALIVE = 15.0  # seconds between comments on an idle event stream


class Studio(Protocol):
    """What a handler reads of the studio it serves (`StudioServer` is one)."""

    @property
    def token(self) -> str | None: ...
    @property
    def request_timeout(self) -> float: ...
    @property
    def browsers(self) -> BrowserSessions: ...
    @property
    def runs(self) -> StoredRuns | None: ...
    @property
    def files(self) -> dict[str, bytes]: ...
    @property
    def url(self) -> str: ...
    @property
    def cookie_name(self) -> str: ...
    @property
    def token_cookie(self) -> str: ...
    def allowed_hosts(self) -> frozenset[str]: ...
    def with_diagram(self, session: ThreadedDebugger, data: dict[str, Any]) -> dict[str, Any]: ...


class StudioHandler(BaseHTTPRequestHandler):
    """Routes a request to the page, the static files, the API or the event stream.

    Args:
        studio: the studio it answers for (the server passes itself).
    """

    server_version = "helikon-studio"

    def __init__(
        self, request: socket.socket, client_address: Any, server: BaseServer, *, studio: Studio
    ) -> None:
        self.studio = studio  # before the base class, which answers the request
        super().__init__(request, client_address, server)

    def setup(self) -> None:
        super().setup()
        self.rfile.close()  # read to a deadline instead: a trickling client is dropped
        self.rfile = io.BufferedReader(Deadline(self.connection, self.studio.request_timeout))

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    def do_HEAD(self) -> None:  # these take no path: each answers 405, naming the method it takes
        self._dispatch("HEAD")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_PATCH(self) -> None:
        self._dispatch("PATCH")

    def do_OPTIONS(self) -> None:
        self._dispatch("OPTIONS")

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """The standard library's own refusals (a malformed request line, a line too long, a
        method nothing handles) in JSON, as every other error, with a status line even when
        the request line was too malformed to say its version."""
        if self.request_version == "HTTP/0.9":
            self.request_version = "HTTP/1.0"
        self.close_connection = True
        status = HTTPStatus(code)
        self._send_json(status, {"error": message or status.phrase})

    def log_message(self, format: str, *args: Any) -> None:
        return None  # the terminal shows the URL, not every request

    # ------------------------------------------------------------ routing

    def _dispatch(self, method: str) -> None:
        try:
            self._answer(method)
        except (BrokenPipeError, ConnectionResetError):  # the client left before its answer:
            self.close_connection = True  # what it asked for was done all the same

    def _answer(self, method: str) -> None:
        try:
            self._check_access(method)
            path = urlsplit(self.path).path
            if not path.startswith("/api/"):
                return self._route(method, path, self._page_routes())
            with self.studio.browsers.use(cookie(self.headers, self.studio.cookie_name)) as found:
                if found is None:
                    raise HTTPProblem(
                        HTTPStatus.FORBIDDEN,
                        f"no studio session: load the page ({self.studio.url}) first",
                    )
                self._route(method, path, self._routes(found))
        except (TooManyBrowsers, TooManyStreams) as exc:
            self._send_json(HTTPStatus.SERVICE_UNAVAILABLE, {"error": str(exc)})
        except HTTPProblem as problem:
            self._send_json(problem.status, {"error": problem.message}, *problem.headers)
        except StudioError as exc:
            self._send_json(_status_of(exc), {"error": str(exc)})
        except StudioFailure as exc:
            self._send_json(HTTPStatus.INTERNAL_SERVER_ERROR, {"error": str(exc)})
        except CancelledError:  # the studio closed while this command ran
            self._send_json(HTTPStatus.SERVICE_UNAVAILABLE, {"error": "the studio is stopping"})

    def _check_access(self, method: str) -> None:
        token = self.studio.token
        if token is not None:
            check_token(self.headers, self.path, token, self.studio.token_cookie)
        else:
            check_host(self.headers, self.studio.allowed_hosts())
        if method != "GET":
            check_origin(self.headers, self.studio.allowed_hosts(), token)

    def _route(self, method: str, path: str, routes: dict[str, Route]) -> None:
        key = "/api/break/{id}" if path.startswith("/api/break/") else path
        if key not in routes:
            raise HTTPProblem(HTTPStatus.NOT_FOUND, f"no such path: {cut(path)}")
        allowed, answer = routes[key]
        if method != allowed:
            raise HTTPProblem(
                HTTPStatus.METHOD_NOT_ALLOWED,
                f"{cut(path)} takes {allowed}, not {cut(method)}",
                ("Allow", allowed),
            )
        answer()

    def _page_routes(self) -> dict[str, Route]:
        routes: dict[str, Route] = {"/": ("GET", self._page)}
        for name in STATIC:
            routes[f"/static/{name}"] = ("GET", functools.partial(self._send_file, name))
        return routes

    def _routes(self, browser: BrowserSession) -> dict[str, Route]:
        routes: dict[str, Route] = {
            path: ("POST", functools.partial(self._command, browser, run, status))
            for path, (run, status) in COMMANDS.items()
        }
        return {
            **routes,
            "/api/state": ("GET", lambda: self._send_state(browser, browser.session.state())),
            "/api/events": ("GET", lambda: self._stream(browser)),
            "/api/break/{id}": ("DELETE", lambda: self._delete_break(browser)),
            "/api/runs": ("GET", self._list_runs),
            "/api/open": ("POST", lambda: self._open_run(browser)),
            "/api/fork_stored": ("POST", lambda: self._fork_stored(browser)),
        }

    # ------------------------------------------------------------ the endpoints

    def _command(self, browser: BrowserSession, run: Command, status: HTTPStatus) -> None:
        body = self._body()  # a bad body is refused before the run is claimed
        with self.studio.browsers.driving(browser) as session:
            done = run(session, body)
        self._send_state(browser, done, status)

    def _delete_break(self, browser: BrowserSession) -> None:
        number = breakpoint_id(self.path)
        with self.studio.browsers.driving(browser) as session:
            done = session.delete_break(number)
        self._send_state(browser, done)

    def _list_runs(self) -> None:
        self._send_json(HTTPStatus.OK, listing(stored_runs(self.studio.runs)))

    def _open_run(self, browser: BrowserSession) -> None:
        runs = stored_runs(self.studio.runs)
        self._switch(browser, open_stored(runs, self._body()))

    def _fork_stored(self, browser: BrowserSession) -> None:
        runs = stored_runs(self.studio.runs)
        fork = fork_stored(runs, self._body(), browser.session)
        self._switch(browser, fork, HTTPStatus.CREATED)

    def _switch(
        self, browser: BrowserSession, session: ThreadedDebugger, status: HTTPStatus = HTTPStatus.OK
    ) -> None:
        self.studio.browsers.switch(browser, session)
        self._send_state(browser, session.state(), status)

    def _page(self) -> None:
        """The page; a browser without a known session cookie gets a new session.

        Raises:
            HTTPProblem: 403, the browser fetches the page as something other than a page.
        """
        check_page_fetch(self.headers)
        browsers = self.studio.browsers
        with browsers.use(cookie(self.headers, self.studio.cookie_name)) as found:
            if found is not None:  # a reload: the same session
                return self._send_file(PAGE)
        browser = browsers.open()
        set_cookie = f"{self.studio.cookie_name}={browser.id}; Path=/; HttpOnly; SameSite=Strict"
        headers = [("Set-Cookie", set_cookie)]
        if self.studio.token is not None:  # the page's requests (and event stream) carry it
            token = (
                f"{self.studio.token_cookie}={self.studio.token}; Path=/; HttpOnly; SameSite=Strict"
            )
            headers.append(("Set-Cookie", token))
        self._send_file(PAGE, *headers)

    def _body(self) -> dict[str, Any]:
        return read_body(self.rfile, body_length(self.headers))

    # ------------------------------------------------------------ responses

    def _send_state(
        self, browser: BrowserSession, data: dict[str, Any], status: HTTPStatus = HTTPStatus.OK
    ) -> None:
        seen = self.studio.browsers.view(browser, data)
        self._send_json(status, self.studio.with_diagram(browser.session, seen))

    def _send_json(self, status: HTTPStatus, data: Any, *headers: tuple[str, str]) -> None:
        body = _json(data).encode()
        self._send(status, body, "application/json; charset=utf-8", *headers)

    def _send_file(self, name: str, *headers: tuple[str, str]) -> None:
        self._send(HTTPStatus.OK, self.studio.files[name], media_type(name), *headers)

    def _send(
        self, status: HTTPStatus, body: bytes, content_type: str, *headers: tuple[str, str]
    ) -> None:
        self._writing()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers:
            self.send_header(name, value)
        self._common_headers()
        self.end_headers()
        if self.command != "HEAD":  # a HEAD answer says the length of a body it does not send
            self.wfile.write(body)

    def _writing(self) -> None:
        """The request was read: an answer may take `request_timeout` per write (a client
        that reads none of it is dropped), not what was left of the request's deadline."""
        self.connection.settimeout(self.studio.request_timeout)

    def _common_headers(self) -> None:
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("Content-Security-Policy", CSP)

    def _stream(self, browser: BrowserSession) -> None:
        with self.studio.browsers.streaming(browser):
            self._stream_events(browser)

    def _stream_events(self, browser: BrowserSession) -> None:
        """Each new snapshot as an SSE `state` event, until the client or the studio leaves."""
        self._writing()
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self._common_headers()
        self.end_headers()
        session = browser.session
        updates = session.updates
        seen = _last_event_id(self.headers.get("Last-Event-ID"))
        if seen > updates.version:  # an id never sent here: the latest, not that many later
            seen = 0
        while not updates.closed and browser.session is session:
            data = updates.wait(seen, KEEPALIVE)
            if data is None:
                message = ": keepalive\n\n"
            else:
                seen = data["version"]
                shown = self.studio.with_diagram(session, self.studio.browsers.view(browser, data))
                text = _json(shown)
                message = f"id: {seen}\nevent: state\ndata: {text}\n\n"
            try:
                self.wfile.write(message.encode())
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError, TimeoutError):
                return


def _json(data: Any) -> str:
    """`data` as JSON in ASCII: a lone surrogate in a text of the run (a fork's tool calls, a
    stored record) is escaped, so it cannot make an answer unencodable."""
    return json.dumps(data)


def _status_of(exc: StudioError) -> HTTPStatus:
    if isinstance(exc, StudioNotFound):
        return HTTPStatus.NOT_FOUND
    if isinstance(exc, StudioBusy | StudioConflict):
        return HTTPStatus.CONFLICT
    return HTTPStatus.BAD_REQUEST


def _last_event_id(header: str | None) -> int:
    return id_number(header) or 0
