"""A real local HTTP server that speaks OpenAI's wire format, scripted by the test.

It listens on 127.0.0.1 (a free port) in a background thread and serves
``POST /v1/chat/completions`` and ``POST /v1/responses``, streamed (server-sent events) or
not, as the request's ``stream`` flag says. Each request takes the next planned step off a
queue: a `PlannedReply` is answered in the endpoint's format, a `PlannedFailure` as an HTTP
error in OpenAI's error shape. Every request body is recorded, so tests can assert on what
a client sent. Like httpx's `MockTransport`, it ships in the package so users can test their
agents with the official `openai` client and no network::

    with OpenAIServer([PlannedReply(text="Hello!")]) as server:
        model = OpenAIModel.chat("gpt-test", base_url=server.base_url, api_key="test")
        ...
        assert server.requests[0].body["stream_options"] == {"include_usage": True}

Like the real API, it rejects (HTTP 400) a conversation whose tool results do not answer an
earlier tool call, so a client that loses call ids fails loudly. Standard library only.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from helikon.testing.chat_wire import chat_chunks, chat_completion, chat_stream_error
from helikon.testing.openai_plan import Planned, PlannedFailure, PlannedReply
from helikon.testing.request_checks import invalid
from helikon.testing.responses_wire import (
    failed_response_events,
    response_body,
    response_events,
)

_ENDPOINTS = ("/v1/chat/completions", "/v1/responses")


@dataclass(frozen=True)
class RecordedRequest:
    """A request the server received: its path, JSON body and headers (lower-cased names)."""

    path: str
    body: dict[str, Any]
    headers: dict[str, str]


class OpenAIServer:
    """A scripted OpenAI-compatible server on 127.0.0.1; use it as a context manager.

    Args:
        plan: the replies and failures to serve, in order (more can be added with `plan`).
        model: the model name echoed in responses.
    """

    def __init__(self, plan: Iterable[Planned] = (), *, model: str = "gpt-test") -> None:
        self.model = model
        self.requests: list[RecordedRequest] = []
        self._queue: deque[Planned] = deque(plan)
        self._lock = threading.Lock()
        self._connections: set[socket.socket] = set()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        """The API root to give a client, e.g. ``http://127.0.0.1:54321/v1``."""
        if self._httpd is None:
            raise RuntimeError("the server is not running; use it as a context manager")
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def plan(self, *steps: Planned) -> None:
        """Queue more replies or failures after the ones already planned."""
        with self._lock:
            self._queue.extend(steps)

    @property
    def pending(self) -> int:
        """How many planned steps have not been served yet."""
        with self._lock:
            return len(self._queue)

    def start(self) -> OpenAIServer:
        """Listen on a free port of 127.0.0.1 and serve from a background thread."""
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        httpd.daemon_threads = True
        self._httpd = httpd
        # serve_forever notices shutdown() only between polls: poll often so stop() is quick.
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.01}, name="openai-server"
        )
        self._thread.daemon = True
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close every open connection (keep-alive ones too)."""
        if self._httpd is None:
            return
        self._httpd.shutdown()
        self._httpd.server_close()
        with self._lock:
            connections, self._connections = self._connections, set()
        for connection in connections:
            _close_quietly(connection)
        if self._thread is not None:
            self._thread.join()
        self._httpd = None

    def __enter__(self) -> OpenAIServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- used by the request handler, on the server's threads

    def _record(self, request: RecordedRequest, *, take: bool) -> Planned | None:
        """Record `request`; with `take`, hand out the next planned step (None if none)."""
        with self._lock:
            self.requests.append(request)
            return self._queue.popleft() if take and self._queue else None

    def _track(self, connection: socket.socket, open_: bool) -> None:
        with self._lock:
            if open_:
                self._connections.add(connection)
            else:
                self._connections.discard(connection)


def _close_quietly(connection: socket.socket) -> None:
    with contextlib.suppress(OSError):
        connection.shutdown(socket.SHUT_RDWR)
    connection.close()


def _handler_for(server: OpenAIServer) -> type[BaseHTTPRequestHandler]:
    class Handler(_Handler):
        owner = server

    return Handler


class _Handler(BaseHTTPRequestHandler):
    owner: OpenAIServer
    protocol_version = "HTTP/1.1"
    # TCP_NODELAY: with Nagle's algorithm, each small write of a reply (headers, one event)
    # waits for the client's delayed ACK, about 40 ms a request on Linux.
    disable_nagle_algorithm = True

    def setup(self) -> None:
        super().setup()
        self.owner._track(self.connection, True)

    def finish(self) -> None:
        self.owner._track(self.connection, False)
        with contextlib.suppress(OSError):
            super().finish()

    def handle(self) -> None:
        try:
            super().handle()
        except (ConnectionError, OSError):
            # The client went away (closed a stream early, or the server is stopping).
            self.close_connection = True

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: tests read `OpenAIServer.requests`, not an access log."""

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length)
        if self.path not in _ENDPOINTS:
            self._send_json(404, _error(f"no such endpoint: {self.path}", "not_found"))
            return
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            self._send_json(400, _error("request body is not JSON", "invalid_json"))
            return
        headers = {name.lower(): value for name, value in self.headers.items()}
        problem = invalid(self.path, body)
        planned = self.owner._record(RecordedRequest(self.path, body, headers), take=not problem)
        if problem:
            self._send_json(400, _error(problem, "invalid_request"))
        elif planned is None:
            message = "OpenAIServer has no planned reply left for this request"
            self._send_json(400, _error(message, "no_planned_reply"))
        elif isinstance(planned, PlannedFailure):
            self._fail(planned, body)
        else:
            self._reply(planned, body)

    def _reply(self, reply: PlannedReply, body: dict[str, Any]) -> None:
        model, created = str(body.get("model") or self.owner.model), int(time.time())
        chat = self.path.endswith("/chat/completions")
        if not body.get("stream"):
            answer = (
                chat_completion(reply, model=model, created=created)
                if chat
                else response_body(reply, model=model, created=created)
            )
            self._send_json(200, answer)
        elif chat:
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            chunks = chat_chunks(reply, model=model, created=created, include_usage=include_usage)
            self._send_events(
                ((None, chunk) for chunk in chunks),
                reply.chunk_delay,
                done=True,
                drop_after=reply.drop_after,
            )
        else:
            events = response_events(reply, model=model, created=created)
            named = ((event["type"], event) for event in events)
            self._send_events(named, reply.chunk_delay, done=False, drop_after=reply.drop_after)

    def _fail(self, failure: PlannedFailure, body: dict[str, Any]) -> None:
        model, created = str(body.get("model") or self.owner.model), int(time.time())
        if not (failure.in_stream and body.get("stream")):
            self._send_json(failure.status, failure.body(), failure.headers)
        elif self.path.endswith("/chat/completions"):
            events = chat_stream_error(failure, model=model, created=created)
            self._send_events(((None, e) for e in events), 0, done=False)
        else:
            events = failed_response_events(failure, model=model, created=created)
            self._send_events(((e["type"], e) for e in events), 0, done=False)

    def _send_json(
        self, status: int, payload: dict[str, Any], headers: Mapping[str, str] | None = None
    ) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.send_header("x-request-id", f"req_{len(self.owner.requests)}")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _send_events(
        self,
        events: Iterator[tuple[str | None, dict[str, Any]]],
        delay: float,
        *,
        done: bool,
        drop_after: int | None = None,
    ) -> None:
        """Stream server-sent events, one HTTP chunk (and one flush) per event."""
        self.send_response(200)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        for sent, (name, payload) in enumerate(events):
            if sent == drop_after:
                self.close_connection = True  # mid-body: the client sees a broken stream
                return
            prefix = f"event: {name}\n" if name else ""
            self._write_chunk(f"{prefix}data: {json.dumps(payload)}\n\n".encode())
            if delay:
                time.sleep(delay)
        if done:
            self._write_chunk(b"data: [DONE]\n\n")
        self._write_chunk(b"")

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()


def _error(message: str, code: str) -> dict[str, Any]:
    return {
        "error": {"message": message, "type": "invalid_request_error", "param": None, "code": code}
    }
