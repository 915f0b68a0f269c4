"""What the local OpenAI server should answer: planned replies and planned failures.

A test queues these on an `OpenAIServer`; each request to a model endpoint takes the next one
off the queue. The same plan serves both wire formats (Chat Completions and Responses), so a
test can run one script against either API.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class PlannedToolCall:
    """A function call the planned reply makes.

    Args:
        name: the function's name.
        arguments: the arguments as JSON text, streamed in `PlannedReply.chunk_size` pieces.
        call_id: the call's id; one is made up (``call_<n>``) when omitted.
    """

    name: str
    arguments: str = "{}"
    call_id: str | None = None


USAGE_FIELDS = ("input_tokens", "output_tokens", "total_tokens")


@dataclass(frozen=True)
class PlannedUsage:
    """The token counts the server reports for a reply.

    Some OpenAI-compatible servers report counts as ``null`` or leave them out: a count of
    None goes out as ``null`` (and so does the total then), and the fields named in `omit`
    (of "input_tokens", "output_tokens", "total_tokens") are left out of the report.
    """

    input_tokens: int | None = 0
    output_tokens: int | None = 0
    omit: frozenset[str] = frozenset()

    @property
    def total_tokens(self) -> int | None:
        if self.input_tokens is None or self.output_tokens is None:
            return None
        return self.input_tokens + self.output_tokens

    def report(self, names: Mapping[str, str]) -> dict[str, int | None]:
        """The counts not omitted, each under its wire name (`names` maps ours to the wire's)."""
        values = (self.input_tokens, self.output_tokens, self.total_tokens)
        counts = dict(zip(USAGE_FIELDS, values, strict=True))
        return {names[name]: count for name, count in counts.items() if name not in self.omit}


@dataclass(frozen=True)
class PlannedReply:
    """One successful answer, streamed or not, depending on the request.

    Args:
        text: the assistant's text, sent as deltas of `chunk_size` characters.
        tool_calls: function calls, each one's arguments split into many small deltas.
        reasoning: reasoning text (chat: the ``reasoning_content`` delta field that
            OpenAI-compatible servers use; responses: reasoning summary deltas).
        refusal: a refusal message instead of text (structured outputs' refusal field).
        usage: the usage report; in chat streams it is sent only when the request set
            ``stream_options.include_usage``, as the real API does.
        finish_reason: chat's finish reason ("stop", "length", "tool_calls",
            "content_filter"); by default "tool_calls" when there are calls, else "stop".
            For the Responses API, "length" and "content_filter" end the stream with
            ``response.incomplete``.
        chunk_size: characters per delta.
        interleave_tool_calls: chat only: send the calls' argument fragments round-robin
            instead of one call after another, as some providers do with parallel calls.
        chunk_delay: seconds to pause after each streamed event, to show a client that
            deltas arrive one by one.
        drop_after: close the connection after this many stream events, mid-body, as a
            network failure would.
    """

    text: str = ""
    tool_calls: Sequence[PlannedToolCall] = ()
    reasoning: str = ""
    refusal: str = ""
    usage: PlannedUsage | None = field(default_factory=lambda: PlannedUsage(10, 5))
    finish_reason: str | None = None
    chunk_size: int = 3
    interleave_tool_calls: bool = False
    chunk_delay: float = 0.0
    drop_after: int | None = None

    @property
    def finish(self) -> str:
        if self.finish_reason is not None:
            return self.finish_reason
        return "tool_calls" if self.tool_calls else "stop"

    def pieces(self, text: str) -> list[str]:
        """`text` cut into deltas of `chunk_size` characters."""
        size = max(1, self.chunk_size)
        return [text[i : i + size] for i in range(0, len(text), size)]

    def call_ids(self) -> list[str]:
        return [call.call_id or f"call_{i}" for i, call in enumerate(self.tool_calls)]


@dataclass(frozen=True)
class PlannedFailure:
    """An HTTP error answer in OpenAI's error shape: ``{"error": {message, type, param, code}}``.

    Build one with the class methods (`rate_limited`, `server_error`,
    `context_length_exceeded`, `content_filter`) or directly for any other status.
    With `in_stream`, a streaming request gets HTTP 200 and the error inside the stream
    instead (chat: a ``data: {"error": ...}`` event; responses: ``response.failed``), as
    providers report failures that happen after the stream has started; `usage`, if set,
    is reported before the error (chat: a usage chunk; responses: the failed response's
    usage), as a provider that has already spent tokens on the call does.
    """

    status: int
    message: str
    type: str = "invalid_request_error"
    code: str | None = None
    param: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    in_stream: bool = False
    usage: PlannedUsage | None = None

    def body(self) -> dict[str, Any]:
        return {
            "error": {
                "message": self.message,
                "type": self.type,
                "param": self.param,
                "code": self.code,
            }
        }

    @classmethod
    def rate_limited(cls, retry_after: float | None = None) -> PlannedFailure:
        """HTTP 429; `retry_after` seconds go out as ``retry-after`` and ``retry-after-ms``."""
        headers: dict[str, str] = {}
        if retry_after is not None:
            headers["retry-after"] = str(math.ceil(retry_after))
            headers["retry-after-ms"] = str(round(retry_after * 1000))
        return cls(
            429,
            "Rate limit reached for requests. Please try again later.",
            type="requests",
            code="rate_limit_exceeded",
            headers=headers,
        )

    @classmethod
    def server_error(cls, status: int = 500, *, in_stream: bool = False) -> PlannedFailure:
        return cls(
            status,
            "The server had an error while processing your request. Sorry about that!",
            type="server_error",
            in_stream=in_stream,
        )

    @classmethod
    def context_length_exceeded(cls, limit: int = 128000, asked: int = 130000) -> PlannedFailure:
        return cls(
            400,
            f"This model's maximum context length is {limit} tokens. However, your messages "
            f"resulted in {asked} tokens. Please reduce the length of the messages.",
            code="context_length_exceeded",
            param="messages",
        )

    @classmethod
    def content_filter(cls) -> PlannedFailure:
        """HTTP 400 for a prompt the provider's content filter rejected (Azure's shape)."""
        return cls(
            400,
            "The response was filtered due to the prompt triggering the content management "
            "policy. Please modify your prompt and retry.",
            code="content_filter",
            param="prompt",
        )


Planned = PlannedReply | PlannedFailure
