"""The studio's HTTP server against hostile requests: each is refused with a JSON error that
names what was wrong, and leaves the session as it was (no breakpoint set, no step taken, the
live run not claimed).

Every server here listens on 127.0.0.1 on a port the system picks and runs the budget
assistant on its scripted model (`test_studio.budget_session`); requests go out as raw
bytes where `http.client` would not send them as they are.
"""

from __future__ import annotations

import http.client
import json
import select
import socket
import struct
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from test_studio import (
    QUICK,
    Client,
    GatedModel,
    budget_session,
    raw,
    raw_request,
    read_event,
    serve,
)

from helikon.studio import StudioServer
from helikon.studio.browsers import STREAMS
from helikon.studio.request import LONE_SURROGATE


@pytest.fixture
def client() -> Iterator[Client]:
    server = serve(budget_session())
    yield Client(server)
    server.close()


def test_a_body_with_a_lone_surrogate_is_refused_and_sets_nothing(
    client: Client, capfd: Any
) -> None:
    # JSON may spell a lone surrogate (\ud800), which is no Unicode text: no breakpoint,
    # fork or decision names one.
    for path, body in [
        ("/api/break", b'{"kind": "tool", "value": "\\ud800"}'),
        ("/api/fork", b'{"at": 1, "kind": "text", "value": "a\\udfffb"}'),
        ("/api/break", b'{"kind": "tool", "value": "x", "\\ud800": 1}'),
    ]:
        status, data = client.request("POST", path, body)
        assert (status, data) == (400, {"error": LONE_SURROGATE}), path
    state = client.get()
    assert (state["breakpoints"], state["position"], state["compare"]) == ([], 0, None)
    assert capfd.readouterr().err == ""


def test_a_chunked_body_is_refused_not_read_as_empty(client: Client) -> None:
    chunked = b'e\r\n{"live": "no"}\r\n0\r\n\r\n'  # a step that the body would refuse
    for headers in (
        ["Transfer-Encoding: chunked"],
        ["Transfer-Encoding: chunked", "Content-Length: 0"],
    ):
        request = raw(client, "POST /api/step HTTP/1.1", *headers, body=chunked)
        assert raw_request(client, request) == (
            411,
            {"error": "a body is read by its Content-Length, not a Transfer-Encoding: send one"},
        )
    assert client.get()["position"] == 0


def test_a_refused_command_does_not_claim_the_live_run(client: Client) -> None:
    # The first browser session to command a live run drives it: a command refused did
    # nothing, so it must not make its sender the driver and lock the others out.
    other = Client(client.server)
    for method, path, body, status in [
        ("POST", "/api/back", {"steps": 0}, 400),
        ("POST", "/api/step", {"live": "yes"}, 400),
        ("POST", "/api/pause", None, 400),
        ("POST", "/api/break", {"kind": "phase", "value": "Thinking"}, 400),
        ("POST", "/api/rewind", {"to": 3}, 400),
        ("POST", "/api/decide", {"decisions": []}, 400),
        ("POST", "/api/fork", {"at": 9, "kind": "text", "value": "x"}, 400),
        ("POST", "/api/unfork", None, 400),
        ("POST", "/api/step_out", None, 400),
        ("POST", "/api/step_in", None, 404),
        ("DELETE", "/api/break/7", None, 404),
    ]:
        assert other.request(method, path, body)[0] == status, path
        assert other.get()["driving"] is False, path
    taken = client.post("/api/step")
    assert (taken["driving"], taken["position"]) == (True, 1)
    assert other.request("POST", "/api/step")[0] == 409  # the run is the first's now


def test_a_request_trickling_in_is_dropped_at_its_deadline() -> None:
    # Each byte arrives well within the timeout, the request as a whole does not: a client
    # sending it so would hold a thread of the server for as long as it likes.
    server = StudioServer(budget_session(), port=0, request_timeout=0.5)
    server.start()
    try:
        client = Client(server)
        request = raw(client, "GET /api/state HTTP/1.1", *[f"X-Slow-{i}: {i}" for i in range(20)])
        assert len(request) * TRICKLE > 10 * server.request_timeout
        with socket.create_connection(("127.0.0.1", server.port), timeout=QUICK) as sock:
            sent = 0
            while sent < len(request) and not dropped(sock):
                sock.sendall(request[sent : sent + 1])
                sent += 1
                time.sleep(TRICKLE)
        assert sent < len(request), "the whole request trickled in"
    finally:
        server.close()


TRICKLE = 0.05  # seconds between the bytes of a slow request


def dropped(sock: socket.socket) -> bool:
    """Whether the server closed `sock` (it answers nothing to a request cut off)."""
    readable, _, _ = select.select([sock], [], [], 0)
    return bool(readable) and sock.recv(1) == b""


def answer(client: Client, method: str, path: str) -> tuple[int, str | None, str, bytes]:
    """The status, Allow and Content-Type headers, and body of a request of `method`."""
    connection = http.client.HTTPConnection("127.0.0.1", client.server.port, timeout=QUICK)
    try:
        connection.request(method, path, headers=client.header)
        response = connection.getresponse()
        kind = response.getheader("Content-Type", "")
        return response.status, response.getheader("Allow"), kind, response.read()
    finally:
        connection.close()


def test_a_path_asked_with_another_method_is_a_405_naming_the_one_it_takes(
    client: Client,
) -> None:
    for method, path, allowed in [
        ("GET", "/api/step", "POST"),
        ("POST", "/api/state", "GET"),
        ("DELETE", "/api/state", "GET"),
        ("PUT", "/api/state", "GET"),
        ("PATCH", "/api/break", "POST"),
        ("OPTIONS", "/api/events", "GET"),
        ("PUT", "/", "GET"),
        ("OPTIONS", "/static/studio.js", "GET"),
        ("POST", "/api/break/1", "DELETE"),
    ]:
        status, allow, kind, body = answer(client, method, path)
        assert (status, allow, kind) == (405, allowed, JSON), (method, path)
        assert json.loads(body) == {"error": f"{path} takes {allowed}, not {method}"}
    status, allow, kind, body = answer(client, "HEAD", "/api/state")
    assert (status, allow, body) == (405, "GET", b"")  # a HEAD answer has no body
    assert answer(client, "PUT", "/api/nothing")[0] == 404
    assert client.get()["position"] == 0


JSON = "application/json; charset=utf-8"


@pytest.mark.parametrize(
    ("data", "status", "message"),
    [
        (b"GARBAGE\r\n\r\n", 400, "Bad request syntax ('GARBAGE')"),
        (b"GET / HTTP/7.0\r\n\r\n", 505, "Invalid HTTP version (7.0)"),
        (b"BREW /api/state HTTP/1.1\r\n\r\n", 501, "Unsupported method ('BREW')"),
        (b"GET /" + b"a" * 70_000 + b" HTTP/1.1\r\n\r\n", 414, "Request-URI Too Long"),
        (b"GET / HTTP/1.1\r\nX: " + b"a" * 70_000 + b"\r\n\r\n", 431, "Line too long"),
    ],
)
def test_a_request_the_standard_library_refuses_is_answered_in_json(
    client: Client, data: bytes, status: int, message: str
) -> None:
    assert raw_request(client, data) == (status, {"error": message})


def test_a_client_that_leaves_before_its_answer_loses_nothing(capfd: Any) -> None:
    model = GatedModel()
    server = serve(budget_session(model))
    try:
        client = Client(server)
        request = raw(client, "POST /api/continue HTTP/1.1", "Content-Length: 0")
        before = set(threading.enumerate())  # the page load's thread among them
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=QUICK)
        sock.sendall(request)
        assert model.waiting.wait(QUICK)  # the continue is under way
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()  # a reset: the answer will find no one
        (handler,) = [
            t for t in threading.enumerate() if t not in before and "process_request" in t.name
        ]
        model.gate.set()
        handler.join(QUICK)
        assert not handler.is_alive()
        state = client.get()  # the continue was carried out, and the run is idle again
        assert (state["busy"], state["phase"], state["position"]) == (None, "Done", 4)
        assert capfd.readouterr().err == ""  # and the studio's terminal shows no traceback
    finally:
        model.gate.set()
        server.close()


def test_a_lone_surrogate_the_session_holds_is_answered_escaped(client: Client) -> None:
    # A fork's tool calls are JSON inside the body's JSON: their text can still spell a lone
    # surrogate (so can a stored run's records). Every answer escapes it, so the session
    # stays readable, the page and its event stream too.
    client.post("/api/step")
    calls = '[{"call_id": "\\ud800", "name": "budget", "arguments": "{}"}]'
    forked = client.post("/api/fork", {"at": 1, "kind": "calls", "value": calls})
    assert forked["next_input"]["value"]["items"][0]["call_id"] == "\ud800"
    stream = client.stream()
    try:
        assert read_event(stream)["next_input"]["value"]["items"][0]["call_id"] == "\ud800"
    finally:
        stream.connection.close()  # type: ignore[attr-defined]
    assert client.post("/api/unfork")["compare"] is None


POSTS = [
    "/api/step",
    "/api/continue",
    "/api/pause",
    "/api/back",
    "/api/rewind",
    "/api/break",
    "/api/decide",
    "/api/fork",
    "/api/unfork",
    "/api/step_in",
    "/api/step_out",
]


@pytest.mark.parametrize("body", [b"[]", b'"step"', b"4", b"null", b"true", b"{,}", b"\xff"])
def test_every_command_refuses_a_body_that_is_no_json_object(client: Client, body: bytes) -> None:
    for path in POSTS:
        status, data = client.request("POST", path, body)
        assert status == 400, (path, data)
        assert data["error"].startswith(("the body must be a JSON object", "the body is not JSON"))
    state = client.get()
    assert (state["position"], state["breakpoints"], state["driving"]) == (0, [], False)


def test_an_event_id_the_studio_never_sent_starts_the_stream_from_the_latest(
    client: Client,
) -> None:
    # A Last-Event-ID above any version sent (made up, or an earlier studio's) would have
    # the stream wait for that many changes before it sent a first snapshot.
    client.post("/api/step")
    with socket.create_connection(("127.0.0.1", client.server.port), timeout=QUICK) as sock:
        sock.sendall(raw(client, "GET /api/events HTTP/1.1", "Last-Event-ID: 999"))
        response = http.client.HTTPResponse(sock)
        response.begin()
        state = read_event(response)
        assert (state["position"], state["version"] < 999) == (1, True)


def test_two_content_lengths_are_refused_not_one_of_them_believed(client: Client) -> None:
    body = b'{"kind": "phase", "value": "Done"}'
    for lengths in (("5", str(len(body))), (str(len(body)), str(len(body)))):
        headers = [f"Content-Length: {length}" for length in lengths]
        request = raw(client, "POST /api/break HTTP/1.1", *headers, body=body)
        assert raw_request(client, request) == (
            400,
            {"error": "a request has one Content-Length header, not 2"},
        )
    assert client.get()["breakpoints"] == []


def test_a_browser_session_keeps_a_few_event_streams_open_not_any_number(
    client: Client,
) -> None:
    # Each stream holds a thread of the server for as long as it is open; a browser opens
    # at most 6 connections to a host, so STREAMS of one session leave room for reloads.
    streams = [client.stream() for _ in range(STREAMS)]
    try:
        for stream in streams:
            assert read_event(stream)["position"] == 0
        status, data = client.request("GET", "/api/events")
        assert (status, data) == (
            503,
            {"error": f"{STREAMS} event streams of this page are open, the most there may be"},
        )
        client.post("/api/step")  # the open streams go on
        assert all(read_event(stream)["version"] > 1 for stream in streams)
    finally:
        for stream in streams:
            stream.connection.close()  # type: ignore[attr-defined]


def test_the_page_fetched_as_an_image_or_a_frame_opens_no_session(client: Client) -> None:
    # Another site's <img src="http://127.0.0.1:PORT/"> sends no cookie (SameSite=Strict)
    # but passes the Host check: each load was a new browser session, pushing out unused ones.
    assert client.get()["browsers"] == 1
    for dest in ("image", "iframe", "script", "empty"):
        status, data = client.request("GET", "/", headers={"Sec-Fetch-Dest": dest, "Cookie": ""})
        assert (status, data) == (
            403,
            {"error": f"the studio's page opens as a page, not as {dest!r}"},
        )
    assert client.get()["browsers"] == 1
    connection = http.client.HTTPConnection("127.0.0.1", client.server.port, timeout=5)
    try:  # a page a person opens (a link, the address bar) is one
        connection.request("GET", "/", headers={"Sec-Fetch-Dest": "document"})
        response = connection.getresponse()
        response.read()
        assert response.status == 200 and response.getheader("Set-Cookie")
    finally:
        connection.close()
    assert client.get()["browsers"] == 2
