"""helikon studio: the JSON API over HTTP, the event stream, the command, and the page itself
in headless Chromium (skipped, with the reason, where Chromium is not installed).

Every server here listens on 127.0.0.1 on a port the system picks, and runs the budget
assistant on its scripted model, so nothing leaves the machine.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import os
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from browser_support import CHROMIUM, Browser

from helikon.cli import main as helikon_main
from helikon.cli.loading import load_module
from helikon.cli.studio import open_session
from helikon.cli.usage import UsageError
from helikon.core.chart.default import DEFAULT_TABLE
from helikon.core.events import TokenDelta, ToolCallItem, TurnStarted
from helikon.core.items import ToolCall
from helikon.debug.debugger import Debugger
from helikon.models.base import ModelChunk, ModelInput
from helikon.models.openai import OpenAIModel
from helikon.models.scripted import ScriptedModel
from helikon.run.config import RunContext
from helikon.studio import StudioError, StudioServer, ThreadedDebugger
from helikon.studio.view import attempts, event_entries
from helikon.testing import OpenAIServer

ROOT = Path(__file__).resolve().parent.parent
BUDGET = ROOT / "charts" / "budget_assistant.py"
TIMEOUT = 15.0


# ---------------------------------------------------------------- helpers


def budget_session(model: Any = None, text: str | None = None) -> ThreadedDebugger:
    module = load_module(str(BUDGET))
    agent = module.agent(model or ScriptedModel(list(module.script())))
    debugger = Debugger.live(agent, text or module.EXAMPLE_INPUT, context=RunContext(module.deps()))
    return ThreadedDebugger(debugger)


def load_page(port: int, cookie: str | None = None) -> str | None:
    """GET / as a browser does; the Set-Cookie header of the answer, if any."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT)
    try:
        connection.request("GET", "/", headers={"Cookie": cookie} if cookie else {})
        response = connection.getresponse()
        response.read()
        assert response.status == 200
        return response.getheader("Set-Cookie")
    finally:
        connection.close()


@dataclass
class Client:
    """One browser session: it loads the page for its cookie on first use (`cookie=""`: a
    client that never does, as a script or another site would)."""

    server: StudioServer
    cookie: str | None = None

    @property
    def header(self) -> dict[str, str]:
        if self.cookie is None:
            set_cookie = load_page(self.server.port)
            assert set_cookie is not None, "the page set no cookie"
            self.cookie = set_cookie.split(";")[0]
        return {"Cookie": self.cookie} if self.cookie else {}

    def request(
        self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
    ) -> tuple[int, Any]:
        connection = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=TIMEOUT)
        payload = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
        try:
            connection.request(
                method, path, body=payload, headers={**self.header, **(headers or {})}
            )
            response = connection.getresponse()
            return response.status, json.loads(response.read())
        finally:
            connection.close()

    def stream(self) -> http.client.HTTPResponse:
        """GET /api/events: the open event stream (close its `connection` when done)."""
        connection = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=TIMEOUT)
        connection.request("GET", "/api/events", headers=self.header)
        response = connection.getresponse()
        response.connection = connection  # type: ignore[attr-defined]
        return response

    def get(self, path: str = "/api/state") -> Any:
        status, data = self.request("GET", path)
        assert status == 200, data
        return data

    def post(self, path: str, body: Any = None, expect: int = 200) -> Any:
        status, data = self.request("POST", path, body)
        assert status == expect, data
        return data


def serve(session: ThreadedDebugger, **options: Any) -> StudioServer:
    server = StudioServer(session, port=0, **options)
    server.start()
    return server


@pytest.fixture
def client() -> Iterator[Client]:
    server = serve(budget_session())
    yield Client(server)
    server.close()


# ---------------------------------------------------------------- the API


def test_state_shows_the_run_before_its_first_step(client: Client) -> None:
    state = client.get()
    assert (state["mode"], state["phase"], state["seq"], state["position"]) == (
        "live",
        "CallingModel",
        0,
        0,
    )
    assert state["finished"] is False and state["last_step"] is None
    assert state["next_input"]["kind"] == "start"
    # What the next step will take: row 4, after rows 0 to 3 failed a guard each (the agent
    # has no input guardrails: the start rows' twins fail on input_guarded).
    tried = state["next_row"]["attempts"]
    assert [(a["row"]["index"], a["taken"]) for a in tried] == [
        (0, False),
        (1, False),
        (2, False),
        (3, False),
        (4, True),
    ]
    assert tried[0]["guards"] == [{"name": "budget_exhausted", "expected": True, "value": False}]
    assert "ExecutingTools" in [p["name"] for p in state["chart"]["phases"]]
    assert state["chart"]["tools"] == ["budget", "spending"]
    assert state["diagram"]["svg"].startswith("<svg")
    assert "<title>CallingModel</title>" in state["diagram"]["svg"]


def test_step_applies_one_transition_and_performs_its_effect(client: Client) -> None:
    first = client.post("/api/step")
    assert (first["phase"], first["seq"], first["position"]) == ("CallingModel", 1, 1)
    assert first["conversation"][0] == {
        "type": "user_message",
        "content": "How am I doing on coffee this month?",
    }
    second = client.post("/api/step")
    assert (second["phase"], second["seq"], second["position"]) == ("ExecutingTools", 2, 2)
    step = second["last_step"]
    assert (step["from"], step["to"], step["input_kind"]) == (
        "CallingModel",
        "ExecutingTools",
        "model_response",
    )
    taken = step["match"]["attempts"][-1]
    assert taken["taken"] and taken["row"]["target"] == "ExecutingTools"
    assert {"name": "has_tool_calls", "expected": True, "value": True} in taken["guards"]
    called = [e["text"] for e in step["events"] if e["type"] == "tool_call_item"]
    assert called == ['spending({"category": "coffee"})', 'budget({"category": "coffee"})']
    assert second["path"] == [4, step["row"]]
    assert client.get()["version"] >= second["version"]


def test_continue_runs_to_a_breakpoint_then_to_the_end(client: Client) -> None:
    created = client.post("/api/break", {"kind": "phase", "value": "ExecutingTools"}, expect=201)
    assert created["breakpoint"] == {
        "id": 1,
        "kind": "phase",
        "value": "ExecutingTools",
        "enabled": True,
        "text": "#1 phase ExecutingTools",
    }
    stopped = client.post("/api/continue")
    assert (stopped["phase"], stopped["position"]) == ("ExecutingTools", 2)
    assert stopped["stop"]["reason"] == "breakpoint"
    assert stopped["stop"]["breakpoint"]["id"] == 1
    assert stopped["busy"] is None and not stopped["finished"]

    ended = client.post("/api/continue")
    assert (ended["phase"], ended["position"], ended["finished"]) == ("Done", 4, True)
    assert ended["stop"]["reason"] == "end"
    assert ended["conversation"][-1]["type"] == "assistant_message"
    assert client.post("/api/step")["stop"]["reason"] == "end"  # nothing left to step


def test_back_rewinds_and_stepping_again_reuses_the_recorded_inputs() -> None:
    model = ScriptedModel(list(load_module(str(BUDGET)).script()))
    server = serve(budget_session(model))
    try:
        client = Client(server)
        assert client.post("/api/continue")["phase"] == "Done"
        back = client.post("/api/back", {"steps": 2})
        assert (back["phase"], back["position"], back["finished"]) == ("ExecutingTools", 2, False)
        assert back["last_step"]["to"] == "ExecutingTools"
        assert len(back["conversation"]) < 6
        assert client.post("/api/back")["position"] == 1
        assert client.post("/api/rewind", {"to": 0})["phase"] == "CallingModel"
        # The model has two scripted turns: a third call would fail the run.
        again = client.post("/api/continue")
        assert (again["phase"], again["position"]) == ("Done", 4)
        assert len(model.requests) == 2
    finally:
        server.close()


def test_time_travel_requests_are_checked(client: Client) -> None:
    client.post("/api/step")
    status, data = client.request("POST", "/api/rewind", {"to": 5})
    assert (status, data["error"]) == (400, "cannot rewind to step 5: the run has taken 1")
    status, data = client.request("POST", "/api/back", {"steps": 0})
    assert (status, data["error"]) == (400, "steps must be a positive whole number; got 0")
    status, data = client.request("POST", "/api/step", {"live": "yes"})
    assert (status, data["error"]) == (400, "live must be true or false")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({}, "a breakpoint's kind is one of phase, event, tool, guard; got None"),
        (
            {"kind": "predicate", "value": "x"},
            "a breakpoint's kind is one of phase, event, tool, guard; got 'predicate'",
        ),
        ({"kind": "phase"}, "a phase breakpoint needs a value: a non-empty string"),
        ({"kind": "tool", "value": "  "}, "a tool breakpoint needs a value: a non-empty string"),
        ({"kind": "guard", "value": 3}, "a guard breakpoint needs a value: a non-empty string"),
        (
            {"kind": "phase", "value": "Thinking"},
            "no phase 'Thinking' in this chart; phases: CallingModel, CheckingInput, "
            "ExecutingTools, NeedsApproval, ApplyingHandoff, Finalizing, RepairingOutput, "
            "CheckingOutput, Compacting, Done, Failed",
        ),
        ({"kind": "guard", "value": "is_raining"}, "no guard 'is_raining' in this chart"),
        ({"kind": "event", "value": "tool_called"}, "no event type 'tool_called'; event types:"),
    ],
)
def test_bad_breakpoints_are_400_with_the_reason(
    client: Client, body: dict[str, Any], message: str
) -> None:
    status, data = client.request("POST", "/api/break", body)
    assert status == 400
    assert data["error"].startswith(message)
    assert client.get()["breakpoints"] == []


def test_a_tool_breakpoint_may_name_a_tool_the_agent_lacks(client: Client) -> None:
    # A model can call a tool that does not exist; stopping there is the point.
    created = client.post("/api/break", {"kind": "tool", "value": "transfer"}, expect=201)
    assert created["breakpoint"]["text"] == "#1 tool transfer"


def test_breakpoints_are_deleted_by_id(client: Client) -> None:
    client.post("/api/break", {"kind": "event", "value": "tool_call_item"}, expect=201)
    client.post("/api/break", {"kind": "guard", "value": "has_tool_calls"}, expect=201)
    status, data = client.request("DELETE", "/api/break/1")
    assert status == 200 and [b["id"] for b in data["breakpoints"]] == [2]
    assert client.request("DELETE", "/api/break/1") == (404, {"error": "no breakpoint #1"})
    status, data = client.request("DELETE", "/api/break/first")
    assert status == 404
    stopped = client.post("/api/continue")  # the guard breakpoint: has_tool_calls held
    assert stopped["stop"]["breakpoint"]["id"] == 2 and stopped["phase"] == "ExecutingTools"


def test_paths_methods_and_bodies_are_checked(client: Client) -> None:
    assert client.request("GET", "/api/step") == (
        405,
        {"error": "/api/step takes POST, not GET"},
    )
    assert client.request("POST", "/api/state")[0] == 405
    assert client.request("GET", "/api/nothing") == (404, {"error": "no such path: /api/nothing"})
    assert client.request("GET", "/static/../server.py")[0] == 404
    status, data = client.request("POST", "/api/break", b"{kind: phase}")
    assert status == 400 and data["error"].startswith("the body is not JSON")
    assert client.request("POST", "/api/break", [1, 2]) == (
        400,
        {"error": "the body must be a JSON object"},
    )


# ---------------------------------------------------------------- browser sessions


def test_the_page_names_a_browser_session_with_a_strict_cookie(client: Client) -> None:
    port = client.server.port
    first, second = load_page(port), load_page(port)
    assert first is not None and second is not None
    for set_cookie in (first, second):
        pair, *attributes = [part.strip() for part in set_cookie.split(";")]
        name, _, value = pair.partition("=")
        assert name == f"helikon_studio_{port}" and len(value) >= 32, pair
        assert {"HttpOnly", "SameSite=Strict", "Path=/"} <= set(attributes), set_cookie
    assert first.split(";")[0] != second.split(";")[0]  # two page loads, two sessions
    assert load_page(port, first.split(";")[0]) is None  # a reload keeps its session


def test_the_api_refuses_a_request_without_a_browser_session(client: Client) -> None:
    message = f"no studio session: load the page ({client.server.url}) first"
    for cookie in ("", f"helikon_studio_{client.server.port}=forged", "other=1"):
        anonymous = Client(client.server, cookie=cookie)
        assert anonymous.request("GET", "/api/state") == (403, {"error": message})
        assert anonymous.request("POST", "/api/step") == (403, {"error": message})
    assert client.get()["position"] == 0


def test_each_browser_session_replays_on_its_own(tmp_path: Path, capsys: Any) -> None:
    trace = record(tmp_path)
    capsys.readouterr()
    server = serve(open_session(studio_args(trace=str(trace))))
    try:
        first, second = Client(server), Client(server)
        first.post("/api/break", {"kind": "phase", "value": "ExecutingTools"}, expect=201)
        assert first.post("/api/continue")["position"] == 2
        # The other browser session starts at step 0 with no breakpoints, and keeps its own.
        state = second.get()
        assert (state["position"], state["breakpoints"], state["driven_elsewhere"]) == (
            0,
            [],
            False,
        )
        second.post("/api/break", {"kind": "phase", "value": "Done"}, expect=201)
        ended = second.post("/api/continue")
        assert (ended["phase"], ended["stop"]["breakpoint"]["value"]) == ("Done", "Done")
        mine = first.get()
        assert (mine["position"], [b["value"] for b in mine["breakpoints"]]) == (
            2,
            ["ExecutingTools"],
        )
        assert first.post("/api/rewind", {"to": 0})["position"] == 0
        assert second.get()["position"] == 4
    finally:
        server.close()


def test_one_browser_session_at_a_time_drives_a_live_run(client: Client) -> None:
    other = Client(client.server)
    assert other.get()["driven_elsewhere"] is False  # nobody drives yet
    client.post("/api/break", {"kind": "phase", "value": "Done"}, expect=201)
    client.post("/api/step")
    refused = (409, {"error": "another browser session drives this run"})
    for path, body in [
        ("/api/step", None),
        ("/api/continue", None),
        ("/api/back", {"steps": 1}),
        ("/api/rewind", {"to": 0}),
        ("/api/break", {"kind": "phase", "value": "ExecutingTools"}),
    ]:
        assert other.request("POST", path, body) == refused
    assert other.request("DELETE", "/api/break/1") == refused
    # The other session watches the run, without the driver's breakpoints.
    watched = other.get()
    assert (watched["position"], watched["breakpoints"], watched["driven_elsewhere"]) == (
        1,
        [],
        True,
    )
    driven = client.get()
    assert (driven["driven_elsewhere"], len(driven["breakpoints"])) == (False, 1)
    assert (driven["driving"], watched["driving"], driven["browsers"]) == (True, False, 2)


def test_a_browser_session_that_left_frees_the_live_run(tmp_path: Path) -> None:
    server = serve(budget_session(), browser_idle=0.3)
    try:
        first, second = Client(server), Client(server)
        first.post("/api/break", {"kind": "phase", "value": "Done"}, expect=201)
        first.post("/api/step")
        stream = second.stream()  # an open page keeps its session, however long it waits
        try:
            assert second.request("POST", "/api/step")[0] == 409
            time.sleep(0.6)
            taken = second.post("/api/step")  # the first session left: the second drives
            assert (taken["position"], taken["breakpoints"]) == (2, [])
            time.sleep(0.6)
            assert second.post("/api/step")["position"] == 3
        finally:
            stream.connection.close()  # type: ignore[attr-defined]
        message = f"no studio session: load the page ({server.url}) first"
        assert first.request("GET", "/api/state") == (403, {"error": message})
    finally:
        server.close()


def test_browser_sessions_are_capped(tmp_path: Path, capsys: Any) -> None:
    trace = record(tmp_path)
    capsys.readouterr()
    server = serve(open_session(studio_args(trace=str(trace))), max_browsers=2)
    try:
        watching, idle = Client(server), Client(server)
        stream = watching.stream()
        try:
            idle.get()
            # The server counts a request as done just after answering it: give it a moment.
            time.sleep(0.2)
            third = Client(server)
            assert third.get()["position"] == 0  # the idle session made room
            assert idle.request("GET", "/api/state")[0] == 403
            connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=TIMEOUT)
            try:
                # Both sessions are in use now (a request of the third is in flight below).
                third_stream = third.stream()
                connection.request("GET", "/")
                response = connection.getresponse()
                assert (response.status, json.loads(response.read())) == (
                    503,
                    {"error": "2 studio pages are open, the most there may be: close one"},
                )
                third_stream.connection.close()  # type: ignore[attr-defined]
            finally:
                connection.close()
        finally:
            stream.connection.close()  # type: ignore[attr-defined]
    finally:
        server.close()


# ---------------------------------------------------------------- hostile requests

QUICK = 5.0  # seconds: a refused request is answered at once, well within this


def raw_request(client: Client, data: bytes, timeout: float = QUICK) -> tuple[int, Any]:
    """Send `data` as it is on a fresh connection; the status and JSON body of the answer."""
    with socket.create_connection(("127.0.0.1", client.server.port), timeout=timeout) as sock:
        sock.sendall(data)
        response = http.client.HTTPResponse(sock)
        response.begin()
        return response.status, json.loads(response.read())


def raw(client: Client, request_line: str, *headers: str, body: bytes = b"") -> bytes:
    """A request as bytes, with the Host and the Cookie a browser would send."""
    lines = [request_line, f"Host: 127.0.0.1:{client.server.port}"]
    lines += [f"Cookie: {client.header['Cookie']}", *headers, "", ""]
    return "\r\n".join(lines).encode("latin-1") + body


@pytest.mark.parametrize(
    ("length", "status", "message"),
    [
        ("-1", 400, "Content-Length must be a number of bytes, not '-1'"),
        ("abc", 400, "Content-Length must be a number of bytes, not 'abc'"),
        ("+5", 400, "Content-Length must be a number of bytes, not '+5'"),
        ("1_0", 400, "Content-Length must be a number of bytes, not '1_0'"),
        ("\u00b2", 400, "Content-Length must be a number of bytes, not '\u00b2'"),
        ("9" * 5000, 413, "the body is over 65536 bytes"),
        ("99999999999999999999", 413, "the body is over 65536 bytes"),
        ("65537", 413, "the body is over 65536 bytes"),
    ],
)
def test_a_bad_content_length_is_refused_at_once(
    client: Client, length: str, status: int, message: str
) -> None:
    request = raw(client, "POST /api/step HTTP/1.1", f"Content-Length: {length}")
    assert raw_request(client, request) == (
        status,
        {"error": message},
    )
    assert client.get()["position"] == 0


def test_a_body_shorter_than_its_content_length_is_refused_after_a_while() -> None:
    server = StudioServer(budget_session(), port=0, request_timeout=0.5)
    server.start()
    try:
        client = Client(server)
        started = time.monotonic()
        request = raw(client, "POST /api/step HTTP/1.1", "Content-Length: 100", body=b'{"live":')
        answer = raw_request(client, request)
        assert answer == (400, {"error": "the body ended before its Content-Length (100 bytes)"})
        assert time.monotonic() - started < QUICK
    finally:
        server.close()


def test_deeply_nested_json_is_a_400_not_a_traceback(client: Client, capfd: Any) -> None:
    for nested in (b"[" * 50_000, b'{"a":' * 12_000):
        status, data = client.request("POST", "/api/break", nested)
        assert (status, data) == (400, {"error": "the body is nested too deeply"})
    assert capfd.readouterr().err == ""


def test_odd_ids_in_paths_and_headers_are_not_a_traceback(client: Client, capfd: Any) -> None:
    for text in ("\u00b2", "9" * 5000):
        assert raw_request(client, raw(client, f"DELETE /api/break/{text} HTTP/1.1"))[0] == 404
    # A Last-Event-ID that is no event id is read as none: the stream starts from the top.
    for text in ("\u00b2", "9" * 5000):
        with socket.create_connection(("127.0.0.1", client.server.port), timeout=QUICK) as sock:
            sock.sendall(raw(client, "GET /api/events HTTP/1.1", f"Last-Event-ID: {text}"))
            response = http.client.HTTPResponse(sock)
            response.begin()
            assert read_event(response)["position"] == 0
    assert capfd.readouterr().err == ""


def test_the_page_and_its_files_are_served_with_a_strict_policy(client: Client) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", client.server.port, timeout=TIMEOUT)
    try:
        for path, kind in [
            ("/", "text/html"),
            ("/static/studio.js", "text/javascript"),
            ("/static/studio.css", "text/css"),
        ]:
            connection.request("GET", path)
            response = connection.getresponse()
            body = response.read().decode()
            assert response.status == 200
            assert response.getheader("Content-Type", "").startswith(kind)
            assert "script-src 'self'" in response.getheader("Content-Security-Policy", "")
            assert "http:" not in body.replace("http://www.w3.org", "") and "https:" not in body
    finally:
        connection.close()


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.10", "localhost"])
@pytest.mark.parametrize("token", [None, "", "short", "x" * 15, "\x1b[2J" * 8])
def test_the_server_listens_elsewhere_only_with_a_token(host: str, token: str | None) -> None:
    session = budget_session()
    try:
        with pytest.raises(StudioError, match=f"listens on '{host}' only with a token"):
            StudioServer(session, host=host, port=0, token=token)
        with pytest.raises(StudioError, match="an IPv4 address or name"):
            StudioServer(session, host="::", port=0, token="t" * 32)
    finally:
        session.close()


def test_requests_for_another_host_or_from_another_origin_are_refused(client: Client) -> None:
    status, data = client.request("GET", "/api/state", headers={"Host": "attacker.example"})
    assert (status, data) == (403, {"error": "unexpected Host header 'attacker.example'"})
    status, data = client.request(
        "POST", "/api/step", headers={"Origin": "http://attacker.example"}
    )
    assert (status, data) == (403, {"error": "commands from http://attacker.example are refused"})
    assert client.get()["position"] == 0
    own = {"Origin": client.server.url.rstrip("/")}
    assert client.request("POST", "/api/step", headers=own)[0] == 200


def read_event(response: http.client.HTTPResponse) -> dict[str, Any]:
    """The next `state` event of a Server-Sent Events stream."""
    fields: dict[str, str] = {}
    while True:
        line = response.readline().decode()
        assert line, "the event stream ended"
        if line == "\n" and fields.get("event") == "state":
            return dict(json.loads(fields["data"]))
        if line == "\n":
            fields = {}
        elif not line.startswith(":"):
            name, _, value = line.rstrip("\n").partition(": ")
            fields[name] = value


def test_the_event_stream_sends_each_new_snapshot(client: Client) -> None:
    response = client.stream()
    try:
        assert response.getheader("Content-Type", "").startswith("text/event-stream")
        first = read_event(response)
        assert first["position"] == 0 and first["diagram"]["svg"].startswith("<svg")
        client.post("/api/step")
        pushed = read_event(response)
        while pushed["busy"]:  # the step's start is published too
            pushed = read_event(response)
        assert (pushed["position"], pushed["version"] > first["version"]) == (1, True)
    finally:
        response.connection.close()  # type: ignore[attr-defined]


class GatedModel:
    """The scripted budget turns, each one held until the test opens the gate."""

    def __init__(self) -> None:
        self.inner = ScriptedModel(list(load_module(str(BUDGET)).script()))
        self.gate = threading.Event()
        self.waiting = threading.Event()

    async def stream(self, request: ModelInput) -> AsyncIterator[ModelChunk]:
        self.waiting.set()
        opened = await asyncio.to_thread(self.gate.wait, TIMEOUT)
        assert opened, "the test never opened the gate"
        async for chunk in self.inner.stream(request):
            yield chunk


def test_pause_stops_a_continue_after_the_step_in_flight() -> None:
    model = GatedModel()
    server = serve(budget_session(model))
    client = Client(server)
    try:
        assert client.post("/api/pause", expect=400)["error"] == (
            "nothing to pause: the run is not continuing"
        )
        answers: list[Any] = []
        worker = threading.Thread(target=lambda: answers.append(client.post("/api/continue")))
        worker.start()
        assert model.waiting.wait(TIMEOUT)  # the first step is calling the model
        assert client.get()["busy"] == "continue"
        status, data = client.request("POST", "/api/step")
        assert (status, data["error"]) == (
            409,
            "the run is busy (continue); pause it or wait for it to stop",
        )
        assert client.request("POST", "/api/back")[0] == 409
        added = client.post("/api/break", {"kind": "phase", "value": "Done"}, expect=201)
        assert [b["id"] for b in added["breakpoints"]] == [1]
        paused = client.post("/api/pause")
        assert paused["busy"] == "continue"
        assert [b["id"] for b in paused["breakpoints"]] == [1]  # the pause is not listed
        model.gate.set()
        worker.join(TIMEOUT)
        stopped = answers[0]
        assert (stopped["stop"]["reason"], stopped["position"]) == ("paused", 1)
        assert stopped["busy"] is None and [b["id"] for b in stopped["breakpoints"]] == [1]
        done = client.post("/api/continue")  # the pause is gone: on to the Done breakpoint
        assert (done["phase"], done["stop"]["reason"]) == ("Done", "breakpoint")
    finally:
        model.gate.set()
        server.close()


def test_closing_the_studio_cuts_a_continue_short() -> None:
    model = GatedModel()
    server = serve(budget_session(model))
    client = Client(server)
    answers: list[Any] = []
    worker = threading.Thread(
        target=lambda: answers.append(client.request("POST", "/api/continue"))
    )
    try:
        worker.start()
        assert model.waiting.wait(TIMEOUT)
    finally:
        server.close()
        model.gate.set()
    worker.join(TIMEOUT)
    assert answers == [(503, {"error": "the studio is stopping"})]


# ---------------------------------------------------------------- the command


def studio_args(**given: Any) -> argparse.Namespace:
    defaults: dict[str, Any] = {
        "chart": None,
        "chart_option": None,
        "input": None,
        "offline": True,
        "model": None,
        "approve": None,
        "trace": None,
        "port": 0,
    }
    return argparse.Namespace(**{**defaults, **given})


def record(tmp_path: Path, text: str | None = None) -> Path:
    """A trace of the budget assistant's scripted run, recorded by `helikon run --trace`."""
    trace = tmp_path / "run.jsonl"
    asked = ["--input", text] if text else []
    code = helikon_main(
        ["run", str(BUDGET), "--offline", "--approve", "all", "--trace", str(trace), *asked]
    )
    assert code == 0
    return trace


def test_a_recorded_trace_opens_as_a_replay(tmp_path: Path, capsys: Any) -> None:
    trace = record(tmp_path)
    capsys.readouterr()
    server = serve(open_session(studio_args(trace=str(trace))))
    try:
        client = Client(server)
        state = client.get()
        assert (state["mode"], state["recorded"], state["position"]) == ("replay", 4, 0)
        client.post("/api/break", {"kind": "tool", "value": "budget"}, expect=201)
        stopped = client.post("/api/continue")
        assert (stopped["phase"], stopped["stop"]["reason"]) == ("ExecutingTools", "breakpoint")
        ended = client.post("/api/continue")
        assert (ended["phase"], ended["finished"], ended["stop"]["divergence"]) == (
            "Done",
            True,
            None,
        )
    finally:
        server.close()


def test_a_replay_refuses_to_step_live(tmp_path: Path, capsys: Any) -> None:
    trace = record(tmp_path)
    capsys.readouterr()
    server = serve(open_session(studio_args(trace=str(trace))))
    try:
        client = Client(server)
        for position in (0, 1):
            status, data = client.request("POST", "/api/step", {"live": True})
            assert (status, data["error"]) == (
                400,
                "a replay calls no model and runs no tool: step live needs a live run "
                "(helikon studio CHART)",
            )
            assert client.get()["position"] == position
            client.post("/api/step")
        assert client.get()["error"] is None
    finally:
        server.close()


def test_command_mistakes_are_one_line(tmp_path: Path, capsys: Any) -> None:
    trace = record(tmp_path)
    capsys.readouterr()
    cases = [
        (studio_args(), "name a chart to run"),
        (studio_args(trace=str(trace), input="hi"), "--input starts a live run"),
        (
            studio_args(trace=str(trace), chart=str(ROOT / "charts" / "triage.py")),
            "cannot replay",
        ),
        (studio_args(chart="charts/nowhere.py"), "no such file"),
    ]
    for args, message in cases:
        with pytest.raises(UsageError, match=message):
            open_session(args)


def test_the_command_serves_until_interrupted() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "helikon", "studio", str(BUDGET), "--offline", "--port", "0"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        with selectors.DefaultSelector() as selector:
            selector.register(process.stdout, selectors.EVENT_READ)
            assert selector.select(TIMEOUT), "the studio printed no URL"
        line = process.stdout.readline()
        assert line.startswith("helikon studio: http://127.0.0.1:"), line
        port = int(line.split("127.0.0.1:")[1].split("/")[0])
        set_cookie = load_page(port)
        assert set_cookie is not None
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT)
        connection.request("GET", "/api/state", headers={"Cookie": set_cookie.split(";")[0]})
        assert json.loads(connection.getresponse().read())["phase"] == "CallingModel"
        connection.close()
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=TIMEOUT)
        assert (process.returncode, out.strip(), err) == (0, "helikon studio: stopped", "")
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()


# ---------------------------------------------------------------- the pure view


def test_attempts_pair_each_guard_with_the_row_that_checked_it() -> None:
    taken = DEFAULT_TABLE.rows_for("CallingModel", "model_response")
    # Suppose the first two rows fail on their first guard and the third row is taken.
    tried = taken[:3]
    checked = [(row.guards[0].name, not row.guards[0].expected) for row in tried[:2]]
    checked += [(guard.name, guard.expected) for guard in tried[2].guards]
    found = attempts(DEFAULT_TABLE, tried[2], checked)
    assert [a["row"]["index"] for a in found] == [row.index for row in tried]
    assert [a["taken"] for a in found] == [False, False, True]
    assert [len(a["guards"]) for a in found] == [1, 1, len(tried[2].guards)]
    assert all(g["value"] == g["expected"] for g in found[2]["guards"])


def test_streaming_deltas_fold_into_one_timeline_entry() -> None:
    call = ToolCall("c1", "spending", '{"category": "coffee"}')
    events = [TurnStarted(1), TokenDelta("You "), TokenDelta("spent"), ToolCallItem(call)]
    assert event_entries(events) == [
        {"type": "turn_started", "text": '{"turn": 1}', "count": 1},
        {"type": "token_delta", "text": "You spent", "count": 2},
        {"type": "tool_call_item", "text": 'spending({"category": "coffee"})', "count": 1},
    ]


# ---------------------------------------------------------------- the page, in Chromium

needs_chromium = pytest.mark.skipif(
    CHROMIUM is None or shutil.which("dot") is None,
    reason="the page test needs Debian's chromium and Graphviz's dot "
    "(apt-get install chromium graphviz)",
)
MARKUP = '<img id="xss" src="x.png"><b>How</b> am I doing on coffee this month?'
CURRENT = "document.querySelector('#diagram g.node.current title')?.textContent"


def screenshot_to(page: Any, name: str, tmp_path: Path) -> None:
    """Into the test's tmp dir, and into $HELIKON_SCREENSHOTS (docs/images) when set."""
    page.screenshot(tmp_path / name)
    folder = os.environ.get("HELIKON_SCREENSHOTS")
    if folder:
        page.screenshot(Path(folder) / name)


GROCERIES = "How much of my groceries budget is left?"


@needs_chromium
def test_the_page_steps_breaks_and_follows_the_run(tmp_path: Path, capsys: Any) -> None:
    # The run of docs/howto/debugging.md: asked about groceries, the model looks up coffee.
    trace = record(tmp_path, GROCERIES)
    capsys.readouterr()
    server = serve(open_session(studio_args(trace=str(trace))))
    browser = Browser(tmp_path / "profile")
    try:
        page = browser.page(server.url, width=1440, height=1240)
        assert page.wait_for(f"{CURRENT} === 'CallingModel'")
        first_id = page.evaluate("document.querySelector('#diagram g.node.current').id")

        # Step: the highlighted phase moves on the diagram.
        page.click("#step")
        page.wait_for("document.getElementById('position').textContent === 'step 1 of 4'")
        assert page.evaluate(CURRENT) == "CallingModel"  # starting a turn stays in the phase
        page.click("#step")
        page.wait_for(f"{CURRENT} === 'ExecutingTools'")
        assert page.evaluate("document.querySelector('#diagram g.node.current').id") != first_id
        assert page.evaluate("document.querySelectorAll('#diagram g.node.current').length") == 1
        page.wait_for("document.querySelectorAll('#timeline .moment').length === 3")
        screenshot_to(page, "studio-step.png", tmp_path)

        # A step taken outside the page, in its browser session, reaches it by the event stream.
        name = f"helikon_studio_{server.port}"
        Client(server, cookie=f"{name}={page.cookies()[name]}").post("/api/step")
        page.wait_for(f"{CURRENT} === 'CallingModel'")
        page.wait_for("document.getElementById('position').textContent === 'step 3 of 4'")

        # Back to the start, a breakpoint on a phase, and Continue stops there.
        for position in (2, 1, 0):
            page.click("#back")
            page.wait_for(
                f"document.getElementById('position').textContent === 'step {position} of 4'"
            )
        page.select("#bp-kind", "phase")
        page.select("#bp-value", "ExecutingTools")
        page.click("#bp-add")
        page.wait_for("document.querySelectorAll('#breakpoints li').length === 1")
        page.click("#continue")
        page.wait_for("document.getElementById('status').textContent.includes('breakpoint #1')")
        assert page.evaluate(CURRENT) == "ExecutingTools"
        assert page.evaluate("document.getElementById('position').textContent") == "step 2 of 4"
        screenshot_to(page, "studio-breakpoint.png", tmp_path)

        assert page.console_errors() == []
        urls = page.requested_urls()
        assert urls and all(url.startswith(server.url) for url in urls), urls
    finally:
        browser.close()
        server.close()


@needs_chromium
def test_the_page_shows_the_runs_text_as_text(tmp_path: Path) -> None:
    server = serve(budget_session(text=MARKUP))
    browser = Browser(tmp_path / "profile")
    try:
        page = browser.page(server.url)
        page.wait_for(f"{CURRENT} === 'CallingModel'")
        page.click("#continue")
        page.wait_for("document.getElementById('status').textContent === 'finished'")
        conversation = page.evaluate("document.getElementById('conversation').textContent")
        assert MARKUP in conversation
        assert page.evaluate("document.getElementById('xss') === null")
        assert page.evaluate("document.querySelector('#conversation b') === null")
        assert page.console_errors() == []
        assert all(url.startswith(server.url) for url in page.requested_urls())
    finally:
        browser.close()
        server.close()


def real_model_session(server: OpenAIServer) -> ThreadedDebugger:
    """The budget agent on a real model: OpenAI's wire format, served by the test server."""
    return budget_session(OpenAIModel.chat("gpt-test", base_url=server.base_url, api_key="t"))


SCRIPTED_BADGE = "(e => e.hidden ? null : e.textContent)(document.getElementById('scripted'))"


def test_the_state_says_whether_the_model_is_scripted(tmp_path: Path, capsys: Any) -> None:
    trace = record(tmp_path)
    capsys.readouterr()
    with OpenAIServer() as model_server:
        sessions = [budget_session(), open_session(studio_args(trace=str(trace)))]
        sessions.append(real_model_session(model_server))
        try:
            assert [s.state()["scripted"] for s in sessions] == [True, True, False]
        finally:
            for session in sessions:
                session.close()


@needs_chromium
def test_the_page_says_scripted_model_only_for_a_scripted_one(tmp_path: Path) -> None:
    browser = Browser(tmp_path / "profile")
    with OpenAIServer() as model_server:
        servers = [serve(budget_session()), serve(real_model_session(model_server))]
        try:
            shown = []
            for server in servers:
                page = browser.page(server.url)
                page.wait_for("document.getElementById('mode').textContent === 'live'")
                shown.append(page.evaluate(SCRIPTED_BADGE))
            assert shown == ["scripted model", None]
        finally:
            browser.close()
            for server in servers:
                server.close()


BREAKPOINT_VALUES = (
    "[...document.querySelectorAll('#breakpoints .bp-value')].map(e => e.textContent).join()"
)


@needs_chromium
def test_two_browsers_do_not_share_breakpoints_or_position(tmp_path: Path, capsys: Any) -> None:
    trace = record(tmp_path)
    capsys.readouterr()
    server = serve(open_session(studio_args(trace=str(trace))))
    browser = Browser(tmp_path / "profile")
    try:
        mine = browser.page(server.url)
        mine.wait_for(f"{CURRENT} === 'CallingModel'")
        mine.select("#bp-kind", "phase")
        mine.select("#bp-value", "ExecutingTools")
        mine.click("#bp-add")
        mine.wait_for("document.querySelectorAll('#breakpoints li').length === 1")
        mine.click("#step")
        mine.wait_for("document.getElementById('position').textContent === 'step 1 of 4'")

        theirs = browser.page(server.url, isolated=True)  # another browser: a new session
        theirs.wait_for(f"{CURRENT} === 'CallingModel'")
        assert theirs.evaluate("document.querySelectorAll('#breakpoints li').length") == 0
        assert theirs.evaluate("document.getElementById('position').textContent") == "step 0 of 4"
        theirs.select("#bp-kind", "phase")
        theirs.select("#bp-value", "Done")
        theirs.click("#bp-add")
        theirs.wait_for(f"{BREAKPOINT_VALUES} === 'Done'")
        theirs.click("#continue")
        theirs.wait_for("document.getElementById('status').textContent.includes('breakpoint')")
        assert theirs.evaluate(CURRENT) == "Done"

        # Reloaded, the first page is the same session: its breakpoint and its step.
        mine.reload()
        mine.wait_for("document.getElementById('position').textContent === 'step 1 of 4'")
        assert mine.evaluate(BREAKPOINT_VALUES) == "ExecutingTools"
        assert mine.console_errors() == [] and theirs.console_errors() == []
    finally:
        browser.close()
        server.close()


@needs_chromium
def test_a_second_browser_watches_a_live_run_it_does_not_drive(tmp_path: Path) -> None:
    server = serve(budget_session())
    browser = Browser(tmp_path / "profile")
    try:
        driver = browser.page(server.url)
        driver.wait_for(f"{CURRENT} === 'CallingModel'")
        driver.click("#step")
        driver.wait_for("document.getElementById('position').textContent === 'step 1'")
        watcher = browser.page(server.url, isolated=True)
        watcher.wait_for("document.getElementById('position').textContent === 'step 1'")
        assert watcher.wait_for("document.getElementById('step').disabled")
        assert "you drive this run" in driver.evaluate(
            "document.getElementById('watchers').textContent"
        )
        assert "another browser session drives this run" in watcher.evaluate(
            "document.getElementById('status').textContent"
        )
        driver.click("#step")  # the watcher follows the run
        watcher.wait_for("document.getElementById('position').textContent === 'step 2'")
        assert driver.wait_for(
            "document.getElementById('watchers').textContent.includes('1 other browser')"
        )
        assert watcher.console_errors() == []
    finally:
        browser.close()
        server.close()
