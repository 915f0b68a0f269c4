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

This module holds the listener (`StudioServer`: its address, its lifecycle, the browser
sessions and the diagrams it keeps); a request is answered by `helikon.studio.handler`, the
checks above are `helikon.studio.access`'s, what each path does `helikon.studio.endpoints`',
and the page's files `helikon.studio.static`'s.
"""

from __future__ import annotations

import functools
import threading
from http.server import ThreadingHTTPServer
from typing import Any

from helikon.studio.access import LOOPBACK, MIN_TOKEN, check_bind
from helikon.studio.browsers import IDLE, LIMIT, BrowserSessions
from helikon.studio.diagram import Diagram
from helikon.studio.handler import KEEPALIVE, StudioHandler
from helikon.studio.session import ThreadedDebugger
from helikon.studio.static import read_files
from helikon.studio.stored import StoredRuns

# StudioServer, and the names that lived here before the handler, the access checks and the
# files moved out, importable from here as before.
__all__ = [
    "KEEPALIVE",
    "LOOPBACK",
    "MIN_TOKEN",
    "REQUEST_TIMEOUT",
    "StudioHandler",
    "StudioServer",
    "check_bind",
]

REQUEST_TIMEOUT = 10.0  # seconds a request's headers and body may take to arrive


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
        super().__init__((host, port), functools.partial(StudioHandler, studio=self))
        self.session = session
        self.runs = runs
        self.browsers = BrowserSessions(session, idle=browser_idle, limit=max_browsers)
        self._diagrams: dict[str, Diagram] = {}
        self._diagrams_lock = threading.Lock()
        self.files = read_files()
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
