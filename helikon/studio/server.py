"""The studio's HTTP server: the page, a JSON API over a `ThreadedDebugger`, and an event stream.

Standard library only (`http.server.ThreadingHTTPServer`): the studio serves one person on
one machine, so a thread per request is plenty, and it adds no dependency to helikon.

    GET    /                  the page (its script and style under /static/)
    GET    /api/state         the snapshot, with the chart facts and the diagram (SVG)
    GET    /api/events        Server-Sent Events: an `event: state` with each new snapshot
    POST   /api/step          {"live": false}: one step
    POST   /api/continue      until a breakpoint, a divergence, a pause or the end
    POST   /api/pause         stop a continue after the step in flight
    POST   /api/back          {"steps": 1}: rewind that many steps
    POST   /api/rewind        {"to": k}: go back to the run after k steps
    POST   /api/break         {"kind": "phase", "value": "ExecutingTools"}: 201
    DELETE /api/break/{id}    remove a breakpoint
    POST   /api/decide        {"decisions": [{"call_id", "arguments_hash", "approved", "seq"}]}:
                              answer a suspended live run (bound as agent.resume's), continue;
                              on a run store (with --chart), resume the stored run with them
    POST   /api/fork          {"at": k, "kind": "text"|"calls"|"tool"|"effect", "value": ...,
                              "then": [...]}: show a fork with that input after step k,
                              compared with the run
    POST   /api/unfork        back to the run the shown fork came from
    POST   /api/step_in       {"run_id": ID} (optional): show the run nested in the last step
    POST   /api/step_out      {"to": k} (optional): back to the run the shown one is nested in
    POST   /api/fork_stored   on a run store: {"at": seq, "kind", "value"}: fork the shown run
                              into a new stored run (201), which this browser then replays
    GET    /api/runs          on a run store: its runs (status, agent, phase, turns)
    POST   /api/open          on a run store: {"run_id": ID}: this browser replays that run

Each browser has a session of its own (`helikon.studio.browsers`): the page's answer sets a
cookie naming it, and every /api/ request must carry it (403 otherwise). Its breakpoints and
the step it is at are its own: a replay is replayed for each browser session, a live run is
driven by one browser session at a time while the others watch.

Errors are JSON `{"error": message}`, those the standard library answers itself (a
malformed request line, a line too long) too: 400 for a bad request, 403 for a request
without a browser session, 404 for an unknown path or breakpoint, 405 for a path asked with
the wrong method (its Allow header names the right one), 409 while the run is busy or driven
by another browser session (or, for a stored run, by another owner; or its decision was
spent already), 411 for a body sent in a Transfer-Encoding (chunked) rather than with a
Content-Length, 413 for a body over 64 KiB, 500 when running the agent raised, 503 for a
command cut short by the studio closing, a page refused because too many are open, or an
event stream because its browser session has too many open.
A request is read as hostile (`helikon.studio.request`): a bad Content-Length is refused
before the body is read, and a request that does not arrive within `request_timeout`
seconds is dropped.

The server listens on 127.0.0.1 by default: whoever reaches it can run the agent and its
tools. There it answers only requests whose Host header names that address (or `localhost`)
with its port, so a web page cannot reach it through a DNS name of its own (DNS rebinding),
and it refuses commands whose Origin is another site, and the page fetched as anything but a
page (an image or a frame another site embeds: `Sec-Fetch-Dest`), which would open a browser
session at each load. Bound to any other address it needs a
token (`token=`; the CLI makes one and prints it): every request, the page, its files, the
API and the event stream, must carry it, as `Authorization: Bearer TOKEN`, as `?token=TOKEN`
(the URL printed at start), or in the cookie the page's answer sets from it; any other is
refused (401) before it is read further. Commands must then come from the Host's own origin.
"""

from __future__ import annotations

import functools
import hmac
import io
import json
import threading
from collections.abc import Callable
from concurrent.futures import CancelledError
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, urlsplit

from helikon.core.quoting import cut, quoted
from helikon.studio.browsers import (
    IDLE,
    LIMIT,
    BrowserSession,
    BrowserSessions,
    TooManyBrowsers,
    TooManyStreams,
)
from helikon.studio.diagram import Diagram
from helikon.studio.request import (
    Deadline,
    HTTPProblem,
    body_length,
    cookie,
    id_number,
    read_body,
)
from helikon.studio.session import (
    StudioBusy,
    StudioConflict,
    StudioError,
    StudioFailure,
    StudioNotFound,
    ThreadedDebugger,
    check_edit,
)
from helikon.studio.stored import StoredRuns

Command = Callable[[ThreadedDebugger, dict[str, Any]], dict[str, Any]]
"""A command on the session a browser session drives, given the request's body."""
Route = tuple[str, Callable[[], None]]
"""The method a path takes, and what answers it."""

LOOPBACK = "127.0.0.1"
KEEPALIVE = 15.0  # seconds between comments on an idle event stream
REQUEST_TIMEOUT = 10.0  # seconds a request's headers and body may take to arrive

STATIC: dict[str, str] = {
    "chart_view.js": "text/javascript; charset=utf-8",  # the trace page's, in helikon.export
    "studio.js": "text/javascript; charset=utf-8",
    "studio.css": "text/css; charset=utf-8",
    "favicon.svg": "image/svg+xml",
}
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)


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


def _read_static(name: str) -> bytes:
    if name == "chart_view.js":  # one pan and zoom for the studio and the trace page
        return resources.files("helikon.export").joinpath("templates", name).read_bytes()
    return resources.files("helikon.studio").joinpath("static", name).read_bytes()


class StudioServer(ThreadingHTTPServer):
    """Serves one session's page and API on 127.0.0.1; `close()` also closes the session
    (and the copies the browser sessions were given).

    Args:
        session: the debugger session to serve: shared by the browser sessions when live,
            copied for each when it can be (a replay).
        host: "127.0.0.1", or another address with a `token`.
        port: 0 picks a free port (read it back from `url`).
        request_timeout: seconds a request may take to arrive; a slower one is dropped.
        browser_idle: seconds after which a browser session without an open page has left.
        max_browsers: how many browser sessions may be open at once.
        runs: the run store `session` is a run of, for the page to list and open its runs
            (closed with the studio).
        token: what every request must carry when `host` is not 127.0.0.1 (required then).

    Raises:
        StudioError: another bind address without a token.
        OSError: the port is taken.
    """

    daemon_threads = True

    def __init__(
        self,
        session: ThreadedDebugger,
        *,
        host: str = LOOPBACK,
        port: int = 0,
        request_timeout: float = REQUEST_TIMEOUT,
        browser_idle: float = IDLE,
        max_browsers: int = LIMIT,
        runs: StoredRuns | None = None,
        token: str | None = None,
    ) -> None:
        check_bind(host, token)
        self.host = host
        self.token = None if host == LOOPBACK else token
        self.request_timeout = request_timeout
        super().__init__((host, port), StudioHandler)
        self.session = session
        self.runs = runs
        self.browsers = BrowserSessions(session, idle=browser_idle, limit=max_browsers)
        self._diagrams: dict[str, Diagram] = {}
        self._diagrams_lock = threading.Lock()
        self.files = {name: _read_static(name) for name in (*STATIC, "index.html")}
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    @property
    def url(self) -> str:
        """The page's address (with `?token=` when one is needed)."""
        query = f"?token={self.token}" if self.token else ""
        return f"http://{self.host}:{self.port}/{query}"

    @property
    def token_cookie(self) -> str:
        return f"helikon_studio_token_{self.port}"

    @property
    def cookie_name(self) -> str:
        """The browser session cookie's name: one per port, as cookies ignore ports."""
        return f"helikon_studio_{self.port}"

    def allowed_hosts(self) -> frozenset[str]:
        return frozenset({f"{self.host}:{self.port}", f"localhost:{self.port}"})

    def start(self) -> None:
        """Serve from a background thread (`serve_forever` serves from this one)."""
        self._thread = threading.Thread(target=self.serve_forever, name="helikon-studio-http")
        self._thread.daemon = True
        self._thread.start()

    def close(self) -> None:
        """Stop serving: end the event streams, the listener and the sessions."""
        sessions = self.browsers.sessions()
        for session in sessions:
            session.updates.close()
        if self._thread is not None:
            self.shutdown()
            self._thread.join()
        self.server_close()
        self.browsers.close()
        if self.runs is not None:
            self.runs.close()

    def with_diagram(self, session: ThreadedDebugger, data: dict[str, Any]) -> dict[str, Any]:
        """A snapshot with the chart facts and the chart drawn with its path."""
        table = session.tables[data["chart"]["digest"]]  # the chart the snapshot was taken on
        with self._diagrams_lock:  # one drawer per chart: runs nested or stored may differ
            diagram = self._diagrams.get(table.digest)
            if diagram is None:
                diagram = self._diagrams[table.digest] = Diagram(table)
        drawn = diagram.draw(data["path"], data["phase"], data.get("compare"))
        return {**data, "diagram": drawn}

    def __enter__(self) -> StudioServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class StudioHandler(BaseHTTPRequestHandler):
    """Routes a request to the page, the static files, the API or the event stream."""

    server: StudioServer
    server_version = "helikon-studio"

    def setup(self) -> None:
        super().setup()
        self.rfile.close()  # read to a deadline instead: a trickling client is dropped
        self.rfile = io.BufferedReader(Deadline(self.connection, self.server.request_timeout))

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
            self._check_token()
            if self.server.token is None:
                self._check_host()
            if method != "GET":
                self._check_origin()
            path = urlsplit(self.path).path
            if not path.startswith("/api/"):
                return self._route(method, path, self._page_routes())
            with self.server.browsers.use(cookie(self.headers, self.server.cookie_name)) as found:
                if found is None:
                    raise HTTPProblem(
                        HTTPStatus.FORBIDDEN,
                        f"no studio session: load the page ({self.server.url}) first",
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
        def command(run: Command, status: HTTPStatus = HTTPStatus.OK) -> Callable[[], None]:
            return lambda: self._command(browser, run, status)

        return {
            "/api/state": ("GET", lambda: self._send_state(browser, browser.session.state())),
            "/api/events": ("GET", lambda: self._stream(browser)),
            "/api/step": ("POST", command(lambda s, b: s.step(live=_flag(b)))),
            "/api/continue": ("POST", command(lambda s, b: s.continue_())),
            "/api/pause": ("POST", command(lambda s, b: s.pause())),
            "/api/back": ("POST", command(lambda s, b: s.back(b.get("steps", 1)))),
            "/api/rewind": ("POST", command(lambda s, b: s.rewind(b.get("to")))),
            "/api/break": (
                "POST",
                command(
                    lambda s, b: s.add_break(b.get("kind"), b.get("value")), HTTPStatus.CREATED
                ),
            ),
            "/api/break/{id}": ("DELETE", lambda: self._delete_break(browser)),
            "/api/decide": ("POST", command(lambda s, b: s.decide(b.get("decisions")))),
            "/api/fork": (
                "POST",
                command(
                    lambda s, b: s.fork(b.get("at"), b.get("kind"), b.get("value"), b.get("then"))
                ),
            ),
            "/api/unfork": ("POST", command(lambda s, b: s.unfork())),
            "/api/step_in": ("POST", command(lambda s, b: s.step_in(b.get("run_id")))),
            "/api/step_out": ("POST", command(lambda s, b: s.step_out(b.get("to")))),
            "/api/runs": ("GET", self._list_runs),
            "/api/open": ("POST", lambda: self._open_run(browser)),
            "/api/fork_stored": ("POST", lambda: self._fork_stored(browser)),
        }

    def _stored(self) -> StoredRuns:
        if self.server.runs is None:
            raise HTTPProblem(
                HTTPStatus.NOT_FOUND, "this studio shows no run store (helikon studio --store URL)"
            )
        return self.server.runs

    def _list_runs(self) -> None:
        self._send_json(HTTPStatus.OK, {"runs": self._stored().listing()})

    def _fork_stored(self, browser: BrowserSession) -> None:
        runs = self._stored()
        body = self._body()
        at, kind, value = check_edit(body.get("at"), body.get("kind"), body.get("value"))
        shown = browser.session.state()
        if shown.get("stored") is None or len(shown.get("breadcrumb", ())) > 1:
            raise HTTPProblem(HTTPStatus.BAD_REQUEST, "fork a stored run, not a nested one")
        fork_id = runs.fork(shown["stored"]["run_id"], at, kind, value)
        session = runs.session(fork_id)
        self.server.browsers.switch(browser, session)
        self._send_state(browser, session.state(), HTTPStatus.CREATED)

    def _open_run(self, browser: BrowserSession) -> None:
        runs = self._stored()
        body = self._body()
        session = runs.session(body.get("run_id"))
        self.server.browsers.switch(browser, session)
        self._send_state(browser, session.state())

    def _command(self, browser: BrowserSession, run: Command, status: HTTPStatus) -> None:
        body = self._body()  # a bad body is refused before the run is claimed
        with self.server.browsers.driving(browser) as session:
            done = run(session, body)
        self._send_state(browser, done, status)

    def _delete_break(self, browser: BrowserSession) -> None:
        number = _breakpoint_id(self.path)
        with self.server.browsers.driving(browser) as session:
            done = session.delete_break(number)
        self._send_state(browser, done)

    def _page(self) -> None:
        """The page; a browser without a known session cookie gets a new session.

        Raises:
            HTTPProblem: 403, the browser fetches the page as something other than a page
                (an image, a script, a frame: what another site can make it do unasked,
                each load a new session that pushes out one unused, the live run's
                driver who stepped away included).
        """
        dest = self.headers.get("Sec-Fetch-Dest")
        if dest is not None and dest != "document":
            raise HTTPProblem(
                HTTPStatus.FORBIDDEN, f"the studio's page opens as a page, not as {quoted(dest)}"
            )
        browsers = self.server.browsers
        with browsers.use(cookie(self.headers, self.server.cookie_name)) as found:
            if found is not None:  # a reload: the same session
                return self._send_file("index.html")
        browser = browsers.open()
        set_cookie = f"{self.server.cookie_name}={browser.id}; Path=/; HttpOnly; SameSite=Strict"
        headers = [("Set-Cookie", set_cookie)]
        if self.server.token is not None:  # the page's requests (and event stream) carry it
            token = (
                f"{self.server.token_cookie}={self.server.token}; Path=/; HttpOnly; SameSite=Strict"
            )
            headers.append(("Set-Cookie", token))
        self._send_file("index.html", *headers)

    # ------------------------------------------------------------ checks

    def _check_token(self) -> None:
        expected = self.server.token
        if expected is None:
            return
        given = [
            value
            for value in (
                _bearer(self.headers.get("Authorization")),
                _query_token(self.path),
                cookie(self.headers, self.server.token_cookie),
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

    def _check_host(self) -> None:
        host = self.headers.get("Host", "")
        if host not in self.server.allowed_hosts():
            raise HTTPProblem(HTTPStatus.FORBIDDEN, f"unexpected Host header {quoted(host)}")

    def _check_origin(self) -> None:
        origin = self.headers.get("Origin")
        hosts = self.server.allowed_hosts()
        if self.server.token is not None:  # reached by any name: its own origin only
            hosts = frozenset({self.headers.get("Host", "")})
        if origin is not None and origin not in {f"http://{h}" for h in hosts}:
            raise HTTPProblem(HTTPStatus.FORBIDDEN, f"commands from {origin} are refused")

    def _body(self) -> dict[str, Any]:
        return read_body(self.rfile, body_length(self.headers))

    # ------------------------------------------------------------ responses

    def _send_state(
        self, browser: BrowserSession, data: dict[str, Any], status: HTTPStatus = HTTPStatus.OK
    ) -> None:
        seen = self.server.browsers.view(browser, data)
        self._send_json(status, self.server.with_diagram(browser.session, seen))

    def _send_json(self, status: HTTPStatus, data: Any, *headers: tuple[str, str]) -> None:
        body = _json(data).encode()
        self._send(status, body, "application/json; charset=utf-8", *headers)

    def _send_file(self, name: str, *headers: tuple[str, str]) -> None:
        kind = STATIC.get(name, "text/html; charset=utf-8")
        self._send(HTTPStatus.OK, self.server.files[name], kind, *headers)

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
        self.connection.settimeout(self.server.request_timeout)

    def _common_headers(self) -> None:
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("Content-Security-Policy", CSP)

    def _stream(self, browser: BrowserSession) -> None:
        with self.server.browsers.streaming(browser):
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
                shown = self.server.with_diagram(session, self.server.browsers.view(browser, data))
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


def _breakpoint_id(path: str) -> int:
    text = urlsplit(path).path.removeprefix("/api/break/")
    number = id_number(text)
    if number is None:
        raise HTTPProblem(HTTPStatus.NOT_FOUND, f"no breakpoint {quoted(text)}: ids are numbers")
    return number


def _flag(body: dict[str, Any], name: str = "live") -> bool:
    value = body.get(name, False)
    if not isinstance(value, bool):
        raise StudioError(f"{name} must be true or false")
    return value


def _bearer(header: str | None) -> str | None:
    if header is None:
        return None
    kind, _, value = header.partition(" ")
    return value.strip() if kind.lower() == "bearer" else ""


def _query_token(path: str) -> str | None:
    found = parse_qs(urlsplit(path).query).get("token")
    return None if not found else found[-1] if len(found) == 1 else ""


def _last_event_id(header: str | None) -> int:
    return id_number(header) or 0
