"""The studio's access checks (`helikon.studio.access`) as plain functions over headers, and
the API its server's docstring describes, which is the API its handler routes."""

from __future__ import annotations

import re
from email.message import Message
from typing import Any

import pytest

import helikon.studio.server
from helikon.studio.access import (
    MIN_TOKEN,
    check_bind,
    check_host,
    check_origin,
    check_page_fetch,
    check_token,
)
from helikon.studio.errors import StudioError
from helikon.studio.handler import StudioHandler
from helikon.studio.request import HTTPProblem

TOKEN = "t" * MIN_TOKEN
ALLOWED = frozenset({"127.0.0.1:8000", "localhost:8000"})


def headers(**given: str) -> Message:
    message = Message()
    for name, value in given.items():
        message[name.replace("_", "-")] = value
    return message


@pytest.mark.parametrize(
    ("host", "token", "refused"),
    [
        ("127.0.0.1", None, None),
        ("0.0.0.0", TOKEN, None),
        ("studio.example", TOKEN, None),
        ("0.0.0.0", None, "only with a token"),
        ("0.0.0.0", TOKEN[1:], "only with a token"),
        ("0.0.0.0", "t" * 15 + "\n", "only with a token"),
        ("::1", TOKEN, "an IPv4 address or name"),
        ("", TOKEN, "an IPv4 address or name"),
    ],
)
def test_where_the_studio_may_listen(host: str, token: str | None, refused: str | None) -> None:
    if refused is None:
        check_bind(host, token)
    else:
        with pytest.raises(StudioError, match=refused):
            check_bind(host, token)


@pytest.mark.parametrize(
    ("given", "path", "status"),
    [
        ({"Authorization": f"Bearer {TOKEN}"}, "/", None),
        ({}, f"/?token={TOKEN}", None),
        ({"Cookie": f"tok={TOKEN}"}, "/api/state", None),
        ({}, "/", 401),
        ({"Authorization": "Bearer nope"}, "/", 401),
        ({"Authorization": f"Basic {TOKEN}"}, "/", 401),
        ({"Authorization": f"Bearer {TOKEN}"}, "/?token=nope", 401),  # every one must be right
        ({}, f"/?token={TOKEN}&token={TOKEN}", 401),  # one token, not a list of guesses
    ],
)
def test_a_token_is_needed_on_every_request_and_every_one_given_must_be_right(
    given: dict[str, str], path: str, status: int | None
) -> None:
    if status is None:
        check_token(headers(**given), path, TOKEN, "tok")
    else:
        with pytest.raises(HTTPProblem) as refused:
            check_token(headers(**given), path, TOKEN, "tok")
        assert refused.value.status == status


@pytest.mark.parametrize(
    ("given", "status"),
    [
        ({"Host": "127.0.0.1:8000"}, None),
        ({"Host": "localhost:8000"}, None),
        ({"Host": "attacker.example:8000"}, 403),
        ({}, 403),
    ],
)
def test_the_host_header_names_the_studio(given: dict[str, str], status: int | None) -> None:
    if status is None:
        check_host(headers(**given), ALLOWED)
    else:
        with pytest.raises(HTTPProblem) as refused:
            check_host(headers(**given), ALLOWED)
        assert refused.value.status == status


@pytest.mark.parametrize(
    ("given", "token", "refused"),
    [
        ({}, None, False),
        ({"Origin": "http://localhost:8000"}, None, False),
        ({"Origin": "http://attacker.example"}, None, True),
        ({"Origin": "http://studio.example:8000", "Host": "studio.example:8000"}, TOKEN, False),
        ({"Origin": "http://127.0.0.1:8000", "Host": "studio.example:8000"}, TOKEN, True),
    ],
)
def test_a_command_comes_from_the_studio_s_own_origin(
    given: dict[str, str], token: str | None, refused: bool
) -> None:
    if not refused:
        check_origin(headers(**given), ALLOWED, token)
    else:
        with pytest.raises(HTTPProblem, match="are refused"):
            check_origin(headers(**given), ALLOWED, token)


@pytest.mark.parametrize(
    ("dest", "refused"), [(None, False), ("document", False), ("image", True), ("iframe", True)]
)
def test_the_page_opens_only_as_a_page(dest: str | None, refused: bool) -> None:
    given = headers() if dest is None else headers(Sec_Fetch_Dest=dest)
    if not refused:
        check_page_fetch(given)
    else:
        with pytest.raises(HTTPProblem, match="opens as a page"):
            check_page_fetch(given)


def test_the_api_the_server_describes_is_the_api_its_handler_routes() -> None:
    doc = helikon.studio.server.__doc__ or ""
    described = set(re.findall(r"^    (GET|POST|DELETE) +(/api/\S+)", doc, re.MULTILINE))
    handler: Any = StudioHandler.__new__(StudioHandler)  # routes are built, not answered
    routed = {(method, path) for path, (method, _) in handler._routes(None).items()}
    assert described == routed
