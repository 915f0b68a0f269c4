"""A studio bound to an address other than 127.0.0.1 requires its token on every request:
the page, its files, the API and the event stream; without it, or with a wrong one, a
request is refused (401) and nothing runs. 127.0.0.2 stands for "elsewhere": any address
but 127.0.0.1 needs the token, and this one does not leave the machine.
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser_support import Browser
from test_studio import CURRENT, budget_session, needs_chromium

from helikon.studio import StudioServer

HOST = "127.0.0.2"
TOKEN = "a-token-of-thirty-two-characters"
WRONG = "a-token-of-thirty-two-characterZ"


@pytest.fixture
def server() -> Iterator[StudioServer]:
    studio = StudioServer(budget_session(), host=HOST, port=0, token=TOKEN)
    studio.start()
    yield studio
    studio.close()


def request(
    server: StudioServer, method: str, path: str, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    connection = http.client.HTTPConnection(HOST, server.port, timeout=15)
    try:
        connection.request(method, path, headers={"Content-Length": "0", **(headers or {})})
        response = connection.getresponse()
        found = response.status, {k.lower(): v for k, v in response.getheaders()}
        if response.getheader("Content-Type", "").startswith("text/event-stream"):
            return (*found, response.readline())
        cookies = "; ".join(
            value.split(";")[0] for key, value in response.getheaders() if key == "Set-Cookie"
        )
        return found[0], {**found[1], "cookies": cookies}, response.read()
    finally:
        connection.close()


def error(body: bytes) -> Any:
    return json.loads(body)["error"]


def test_every_request_without_the_right_token_is_refused(server: StudioServer) -> None:
    assert server.url == f"http://{HOST}:{server.port}/?token={TOKEN}"
    for path in ("/", "/static/studio.js", "/api/state", "/api/events", f"/?token={WRONG}"):
        status, _, body = request(server, "GET", path)
        assert status == 401 and "needs its token" in error(body), path
    for headers in (
        {"Authorization": f"Bearer {WRONG}"},
        {"Authorization": f"Basic {TOKEN}"},
        {"Cookie": f"{server.token_cookie}={WRONG}"},
    ):
        assert request(server, "GET", "/", headers)[0] == 401
    # The right token with a wrong one beside it is still refused.
    status, _, _ = request(server, "GET", f"/?token={TOKEN}", {"Authorization": f"Bearer {WRONG}"})
    assert status == 401
    assert request(server, "GET", f"/?token={TOKEN}&token={TOKEN}")[0] == 401
    status, _, body = request(server, "POST", "/api/step", {"Authorization": f"Bearer {WRONG}"})
    assert status == 401


def test_the_right_token_opens_the_page_the_api_and_the_event_stream(
    server: StudioServer,
) -> None:
    status, headers, _ = request(server, "GET", f"/?token={TOKEN}")
    assert status == 200
    cookies = headers["cookies"]
    assert f"{server.token_cookie}={TOKEN}" in cookies
    with_cookies = {"Cookie": cookies}
    status, _, body = request(server, "GET", "/api/state", with_cookies)
    assert status == 200 and json.loads(body)["position"] == 0
    status, _, first = request(server, "GET", "/api/events", with_cookies)
    assert status == 200 and first.startswith(b"id: ")
    session_only = {"Cookie": cookies.split("; ")[0]}  # the browser session, not the token
    assert request(server, "GET", "/api/state", session_only)[0] == 401
    bearer = {**session_only, "Authorization": f"Bearer {TOKEN}"}
    status, _, body = request(server, "POST", "/api/step", bearer)
    assert status == 200 and json.loads(body)["position"] == 1
    other = {**bearer, "Origin": "http://attacker.example"}
    assert request(server, "POST", "/api/step", other)[0] == 403


@needs_chromium
def test_the_page_opened_from_the_printed_url_works(server: StudioServer, tmp_path: Path) -> None:
    browser = Browser(tmp_path / "profile")
    try:
        page = browser.page(server.url)
        page.wait_for(f"{CURRENT} === 'CallingModel'")
        page.click("#step")  # a command, and the event stream, carry the token's cookie
        page.wait_for("document.getElementById('position').textContent === 'step 1'")
        assert page.console_errors() == []
    finally:
        browser.close()


def test_every_route_and_method_needs_the_token_even_with_a_browser_session(
    server: StudioServer,
) -> None:
    status, headers, _ = request(server, "GET", f"/?token={TOKEN}")
    session_only = {"Cookie": headers["cookies"].split("; ")[0]}  # no token beside it
    routes = [("GET", p) for p in ("/", "/static/studio.css", "/api/state", "/api/events")]
    routes += [("DELETE", "/api/break/1"), ("PUT", "/api/state"), ("OPTIONS", "/")]
    routes += [("POST", p) for p in ("/api/step", "/api/break", "/api/open", "/api/nothing")]
    for method, path in routes:
        for given in (session_only, {**session_only, "Authorization": f"Bearer {WRONG}"}):
            status, _, body = request(server, method, path, given)
            assert status == 401 and "needs its token" in error(body), (method, path)
        status, _, body = request(server, "HEAD", path, session_only)
        assert (status, body) == (401, b""), path
    bearer = {**session_only, "Authorization": f"Bearer {TOKEN}"}
    status, _, body = request(server, "GET", "/api/state", bearer)
    assert status == 200 and json.loads(body)["position"] == 0  # nothing ran
