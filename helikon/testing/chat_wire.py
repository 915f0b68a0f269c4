"""Chat Completions on the wire: the bodies and stream chunks the local server sends.

Shapes follow `openai.types.chat.ChatCompletion` and `ChatCompletionChunk`: a stream opens
with a role delta, then content, refusal and tool-call deltas (a call's id, type and name
only on its first fragment, every fragment keyed by the call's `index`), a final chunk with
the finish reason, and, when the request asked for it with `stream_options.include_usage`,
a last chunk with no choices and the usage.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

from helikon.testing.openai_plan import PlannedFailure, PlannedReply, PlannedUsage

_USAGE_NAMES = {
    "input_tokens": "prompt_tokens",
    "output_tokens": "completion_tokens",
    "total_tokens": "total_tokens",
}


def chat_usage(usage: PlannedUsage) -> dict[str, Any]:
    return dict(usage.report(_USAGE_NAMES))


def chat_completion(reply: PlannedReply, *, model: str, created: int) -> dict[str, Any]:
    """The non-streaming `ChatCompletion` body for `reply`."""
    message: dict[str, Any] = {
        "role": "assistant",
        "content": reply.text or None,
        "refusal": reply.refusal or None,
    }
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for call, call_id in zip(reply.tool_calls, reply.call_ids(), strict=True)
        ]
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [
            {"index": 0, "message": message, "finish_reason": reply.finish, "logprobs": None}
        ],
        "usage": chat_usage(reply.usage) if reply.usage else None,
    }


def chat_chunks(
    reply: PlannedReply, *, model: str, created: int, include_usage: bool
) -> Iterator[dict[str, Any]]:
    """The `ChatCompletionChunk` bodies of a streamed `reply`, in order."""

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {
            "id": "chatcmpl-test",
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "system_fingerprint": None,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }
        if include_usage:
            body["usage"] = None
        return body

    yield chunk({"role": "assistant", "content": "", "refusal": None})
    for piece in reply.pieces(reply.reasoning):
        yield chunk({"reasoning_content": piece})
    for piece in reply.pieces(reply.text):
        yield chunk({"content": piece})
    for piece in reply.pieces(reply.refusal):
        yield chunk({"refusal": piece})
    for fragment in _tool_call_fragments(reply):
        yield chunk({"tool_calls": [fragment]})
    yield chunk({}, reply.finish)
    if include_usage and reply.usage:
        yield {**chunk({}), "choices": [], "usage": chat_usage(reply.usage)}


def _tool_call_fragments(reply: PlannedReply) -> Iterator[dict[str, Any]]:
    per_call = [
        list(_fragments_of(index, call_id, call.name, reply.pieces(call.arguments)))
        for index, (call, call_id) in enumerate(
            zip(reply.tool_calls, reply.call_ids(), strict=True)
        )
    ]
    if reply.interleave_tool_calls:
        for round_ in itertools.zip_longest(*per_call):
            yield from (fragment for fragment in round_ if fragment is not None)
    else:
        for fragments in per_call:
            yield from fragments


def _fragments_of(
    index: int, call_id: str, name: str, pieces: list[str]
) -> Iterator[dict[str, Any]]:
    yield {
        "index": index,
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": ""},
    }
    for piece in pieces:
        yield {"index": index, "function": {"arguments": piece}}


def chat_stream_error(
    failure: PlannedFailure, *, model: str, created: int
) -> Iterator[dict[str, Any]]:
    """A stream that fails after it started: its usage chunk if it reports one, then one
    event carrying OpenAI's error object."""
    if failure.usage is not None:
        yield {
            "id": "chatcmpl-test",
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [],
            "usage": chat_usage(failure.usage),
        }
    yield failure.body()
