"""The studio's HTTP server: the page, a JSON API over a `Session`, and an event stream.

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

Errors are JSON `{"error": message}`: 400 for a bad request, 404 for an unknown path or
breakpoint, 405 for a path asked with the wrong method, 409 while the run is busy, 413 for a
body over 64 KiB, 500 when running the agent raised, 503 for a command cut short by the
studio closing. A request is read as hostile (`helikon.studio.request`): a bad Content-Length
is refused before the body is read, and a request that does not arrive within
`request_timeout` seconds is dropped.

The server listens on 127.0.0.1 only and refuses any other address: whoever reaches it can
run the agent and its tools. It also answers only requests whose Host header names that
address (or `localhost`) with its port, so a web page cannot reach it through a DNS name of
its own (DNS rebinding), and it refuses commands whose Origin is another site.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from concurrent.futures import CancelledError
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any
from urllib.parse import urlsplit

from helikon.studio.diagram import Diagram
from helikon.studio.request import HTTPProblem, content_length, id_number, read_body, shown
from helikon.studio.session import (
    Session,
    StudioBusy,
    StudioError,
    StudioFailure,
    StudioNotFound,
)

LOOPBACK = "127.0.0.1"
KEEPALIVE = 15.0  # seconds between comments on an idle event stream
REQUEST_TIMEOUT = 10.0  # seconds a request's headers and body may take to arrive

STATIC: dict[str, str] = {
    "studio.js": "text/javascript; charset=utf-8",
    "studio.css": "text/css; charset=utf-8",
    "favicon.svg": "image/svg+xml",
}
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)


def check_bind(host: str) -> None:
    """Raises `StudioError` unless `host` is 127.0.0.1."""
    if host != LOOPBACK:
        raise StudioError(
            f"the studio listens on {LOOPBACK} only, not {host!r}: whoever can reach it "
            "can run the agent and its tools"
        )


def _read_static(name: str) -> bytes:
    return resources.files("helikon.studio").joinpath("static", name).read_bytes()


class StudioServer(ThreadingHTTPServer):
    """Serves one session's page and API on 127.0.0.1; `close()` also closes the session.

    Args:
        session: the debugger session to serve.
        host: must be "127.0.0.1".
        port: 0 picks a free port (read it back from `url`).
        request_timeout: seconds a request may take to arrive; a slower one is dropped.

    Raises:
        StudioError: another bind address.
        OSError: the port is taken.
    """

    daemon_threads = True

    def __init__(
        self,
        session: Session,
        *,
        host: str = LOOPBACK,
        port: int = 0,
        request_timeout: float = REQUEST_TIMEOUT,
    ) -> None:
        check_bind(host)
        self.request_timeout = request_timeout
        super().__init__((host, port), StudioHandler)
        self.session = session
        self.diagram = Diagram(session.debugger.run.ctx.table)
        self.files = {name: _read_static(name) for name in (*STATIC, "index.html")}
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}/"

    def allowed_hosts(self) -> frozenset[str]:
        return frozenset({f"{LOOPBACK}:{self.port}", f"localhost:{self.port}"})

    def start(self) -> None:
        """Serve from a background thread (`serve_forever` serves from this one)."""
        self._thread = threading.Thread(target=self.serve_forever, name="helikon-studio-http")
        self._thread.daemon = True
        self._thread.start()

    def close(self) -> None:
        """Stop serving: end the event streams, the listener and the session."""
        self.session.updates.close()
        if self._thread is not None:
            self.shutdown()
            self._thread.join()
        self.server_close()
        self.session.close()

    def with_diagram(self, data: dict[str, Any]) -> dict[str, Any]:
        """A snapshot with the chart facts and the chart drawn with its path."""
        drawn = self.diagram.draw(data["path"], data["phase"])
        return {**data, "chart": self.session.chart, "diagram": drawn}

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
        self.connection.settimeout(self.server.request_timeout)  # a stalled client is dropped

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    def log_message(self, format: str, *args: Any) -> None:
        return None  # the terminal shows the URL, not every request

    # ------------------------------------------------------------ routing

    def _dispatch(self, method: str) -> None:
        try:
            self._check_host()
            if method != "GET":
                self._check_origin()
            self._route(method, urlsplit(self.path).path)
        except HTTPProblem as problem:
            self._send_json(problem.status, {"error": problem.message})
        except StudioError as exc:
            self._send_json(_status_of(exc), {"error": str(exc)})
        except StudioFailure as exc:
            self._send_json(HTTPStatus.INTERNAL_SERVER_ERROR, {"error": str(exc)})
        except CancelledError:  # the studio closed while this command ran
            self._send_json(HTTPStatus.SERVICE_UNAVAILABLE, {"error": "the studio is stopping"})

    def _route(self, method: str, path: str) -> None:
        routes = self._routes()
        if path.startswith("/api/break/"):
            allowed, answer = "DELETE", self._delete_break
        elif path.startswith("/static/") and path.removeprefix("/static/") in STATIC:
            allowed, answer = "GET", lambda: self._send_file(path.removeprefix("/static/"))
        elif path in routes:
            allowed, answer = routes[path]
        else:
            raise HTTPProblem(HTTPStatus.NOT_FOUND, f"no such path: {path}")
        if method != allowed:
            raise HTTPProblem(
                HTTPStatus.METHOD_NOT_ALLOWED, f"{path} takes {allowed}, not {method}"
            )
        answer()

    def _routes(self) -> dict[str, tuple[str, Callable[[], None]]]:
        session = self.server.session
        return {
            "/": ("GET", lambda: self._send_file("index.html")),
            "/api/state": ("GET", lambda: self._send_state(session.state())),
            "/api/events": ("GET", self._stream_events),
            "/api/step": ("POST", lambda: self._command(lambda b: session.step(live=_flag(b)))),
            "/api/continue": ("POST", lambda: self._command(lambda b: session.continue_())),
            "/api/pause": ("POST", lambda: self._command(lambda b: session.pause())),
            "/api/back": ("POST", lambda: self._command(lambda b: session.back(b.get("steps", 1)))),
            "/api/rewind": ("POST", lambda: self._command(lambda b: session.rewind(b.get("to")))),
            "/api/break": ("POST", self._add_break),
        }

    def _command(self, run: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
        self._send_state(run(self._body()))

    def _add_break(self) -> None:
        body = self._body()
        data = self.server.session.add_break(body.get("kind"), body.get("value"))
        self._send_state(data, HTTPStatus.CREATED)

    def _delete_break(self) -> None:
        self._send_state(self.server.session.delete_break(_breakpoint_id(self.path)))

    # ------------------------------------------------------------ checks

    def _check_host(self) -> None:
        host = self.headers.get("Host", "")
        if host not in self.server.allowed_hosts():
            raise HTTPProblem(HTTPStatus.FORBIDDEN, f"unexpected Host header {host!r}")

    def _check_origin(self) -> None:
        origin = self.headers.get("Origin")
        if origin is not None and origin not in {
            f"http://{h}" for h in self.server.allowed_hosts()
        }:
            raise HTTPProblem(HTTPStatus.FORBIDDEN, f"commands from {origin} are refused")

    def _body(self) -> dict[str, Any]:
        return read_body(self.rfile, content_length(self.headers.get("Content-Length")))

    # ------------------------------------------------------------ responses

    def _send_state(self, data: dict[str, Any], status: HTTPStatus = HTTPStatus.OK) -> None:
        self._send_json(status, self.server.with_diagram(data))

    def _send_json(self, status: HTTPStatus, data: Any) -> None:
        body = json.dumps(data, ensure_ascii=False).encode()
        self._send(status, body, "application/json; charset=utf-8")

    def _send_file(self, name: str) -> None:
        kind = STATIC.get(name, "text/html; charset=utf-8")
        self._send(HTTPStatus.OK, self.server.files[name], kind)

    def _send(self, status: HTTPStatus, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self._common_headers()
        self.end_headers()
        self.wfile.write(body)

    def _common_headers(self) -> None:
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("Content-Security-Policy", CSP)

    def _stream_events(self) -> None:
        """Each new snapshot as an SSE `state` event, until the client or the studio leaves."""
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self._common_headers()
        self.end_headers()
        updates = self.server.session.updates
        seen = _last_event_id(self.headers.get("Last-Event-ID"))
        while not updates.closed:
            data = updates.wait(seen, KEEPALIVE)
            if data is None:
                message = ": keepalive\n\n"
            else:
                seen = data["version"]
                text = json.dumps(self.server.with_diagram(data), ensure_ascii=False)
                message = f"id: {seen}\nevent: state\ndata: {text}\n\n"
            try:
                self.wfile.write(message.encode())
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError, TimeoutError):
                return


def _status_of(exc: StudioError) -> HTTPStatus:
    if isinstance(exc, StudioNotFound):
        return HTTPStatus.NOT_FOUND
    if isinstance(exc, StudioBusy):
        return HTTPStatus.CONFLICT
    return HTTPStatus.BAD_REQUEST


def _breakpoint_id(path: str) -> int:
    text = urlsplit(path).path.removeprefix("/api/break/")
    number = id_number(text)
    if number is None:
        raise HTTPProblem(HTTPStatus.NOT_FOUND, f"no breakpoint {shown(text)}: ids are numbers")
    return number


def _flag(body: dict[str, Any], name: str = "live") -> bool:
    value = body.get(name, False)
    if not isinstance(value, bool):
        raise HTTPProblem(HTTPStatus.BAD_REQUEST, f"{name} must be true or false")
    return value


def _last_event_id(header: str | None) -> int:
    return id_number(header) or 0
