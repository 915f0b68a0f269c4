"""Reading what a request sends the studio: its body as a JSON object, its cookie, and
numbers in its path and headers.

Theory of operation: everything here comes from outside and is read as hostile. What a
request's headers already show to be wrong (a Content-Length that is not a number of bytes,
or over `MAX_BODY`; a body in a Transfer-Encoding, which is not read) is refused before a
byte of the body is read, so no handler waits for a body that will not come; a request
(its headers and body) that has not arrived by its `Deadline` is cut off. Each refusal is
an `HTTPProblem`: a status and a one-line message naming what was wrong, quoting it cut
short (`helikon.core.quoting`).
"""

from __future__ import annotations

import io
import json
import re
import socket
import time
from email.message import Message
from http import HTTPStatus
from io import BufferedIOBase
from typing import Any

from helikon.core.quoting import cut, quoted

MAX_BODY = 64 * 1024  # bytes: the studio's commands are a few dozen
LONE_SURROGATE = "the body holds a lone surrogate (\\ud800-\\udfff): its text must be Unicode"
_DIGITS = re.compile(r"[0-9]+")
_ID = re.compile(r"[0-9]{1,18}")  # an id: digits, few enough to be an int without surprises


class HTTPProblem(Exception):
    """A request refused before it reaches the session: `status`, a one-line `message`, and
    the `headers` the answer needs (a 405's Allow)."""

    def __init__(self, status: HTTPStatus, message: str, *headers: tuple[str, str]) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers


class Deadline(io.RawIOBase):
    """Reads from `sock` until `seconds` from now, however the bytes trickle in: each read
    waits at most what is left (a timeout per read alone lets a client that sends a byte
    now and then hold its request open for ever). Past it, a read raises `TimeoutError`."""

    def __init__(self, sock: socket.socket, seconds: float) -> None:
        super().__init__()
        self._sock = sock
        self._end = time.monotonic() + seconds

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        left = self._end - time.monotonic()
        if left <= 0:
            raise TimeoutError("the request did not arrive in time")
        self._sock.settimeout(left)
        return self._sock.recv_into(buffer)


def body_length(headers: Message) -> int:
    """The body's length in bytes, as the request's headers say (0 without a body).

    Raises:
        HTTPProblem: 411, the body comes in a Transfer-Encoding (chunked), which is not
            read: taken as no body, a command would run without what it was sent; 400,
            two Content-Length headers; and `content_length`'s.
    """
    if headers.get("Transfer-Encoding") is not None:
        raise HTTPProblem(
            HTTPStatus.LENGTH_REQUIRED,
            "a body is read by its Content-Length, not a Transfer-Encoding: send one",
        )
    lengths: list[str] = headers.get_all("Content-Length") or []
    if len(lengths) > 1:  # which one to believe cannot be decided: neither is
        raise HTTPProblem(
            HTTPStatus.BAD_REQUEST,
            f"a request has one Content-Length header, not {len(lengths)}",
        )
    return content_length(lengths[0] if lengths else None)


def content_length(header: str | None) -> int:
    """The body's length in bytes, as the Content-Length header says (0 without one).

    Raises:
        HTTPProblem: 400, the header is not a plain number of bytes (`-1`, `+5`, `abc`);
            413, it is over `MAX_BODY`.
    """
    if header is None:
        return 0
    text = header.strip()
    if not _DIGITS.fullmatch(text):
        raise HTTPProblem(
            HTTPStatus.BAD_REQUEST,
            f"Content-Length must be a number of bytes, not {quoted(header)}",
        )
    if len(text.lstrip("0")) > len(str(MAX_BODY)) or int(text) > MAX_BODY:
        raise HTTPProblem(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"the body is over {MAX_BODY} bytes")
    return int(text)


def read_body(stream: BufferedIOBase, length: int) -> dict[str, Any]:
    """The JSON object of `length` bytes read from `stream` ({} for an empty body).

    Raises:
        HTTPProblem: 400, the body stops short (the socket timed out, or the client closed
            it), is not JSON, is nested too deeply to parse, is not an object, or holds a
            string that is not Unicode text (a lone surrogate).
    """
    try:
        raw = stream.read(length) if length else b""
    except TimeoutError:
        raw = b""
    if len(raw) < length:
        raise HTTPProblem(
            HTTPStatus.BAD_REQUEST, f"the body ended before its Content-Length ({length} bytes)"
        )
    if not raw.strip():
        return {}
    try:
        body = json.loads(raw)
    except RecursionError:
        raise HTTPProblem(HTTPStatus.BAD_REQUEST, "the body is nested too deeply") from None
    except ValueError as exc:
        raise HTTPProblem(
            HTTPStatus.BAD_REQUEST, f"the body is not JSON: {cut(str(exc))}"
        ) from None
    if not isinstance(body, dict):
        raise HTTPProblem(HTTPStatus.BAD_REQUEST, "the body must be a JSON object")
    try:  # JSON can spell a lone surrogate, which is no text: refused, as the name of anything
        json.dumps(body, ensure_ascii=False).encode()
    except UnicodeEncodeError:
        raise HTTPProblem(HTTPStatus.BAD_REQUEST, LONE_SURROGATE) from None
    return body


def cookie(headers: Message, name: str) -> str | None:
    """The value of cookie `name` in the request's Cookie headers, if it is there."""
    for header in headers.get_all("Cookie") or ():
        for pair in header.split(";"):
            key, _, value = pair.strip().partition("=")
            if key == name:
                return value
    return None


def id_number(text: str | None) -> int | None:
    """`text` as an id (a number of at most 18 digits), or None when it is not one."""
    if text is None or not _ID.fullmatch(text):
        return None
    return int(text)
