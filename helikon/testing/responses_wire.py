"""The Responses API on the wire: the bodies and stream events the local server sends.

Shapes follow `openai.types.responses`: a stream is ``response.created``,
``response.in_progress``, then per output item ``response.output_item.added``, its deltas
(``response.reasoning_summary_text.delta``, ``response.output_text.delta``,
``response.refusal.delta``, ``response.function_call_arguments.delta``, each keyed by the
item's id, not the call's), ``response.output_item.done``, and finally
``response.completed`` (or ``response.incomplete`` for a length or content-filter stop)
carrying the whole response with its usage.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

from helikon.testing.openai_plan import PlannedFailure, PlannedReply, PlannedUsage

_INCOMPLETE = {"length": "max_output_tokens", "content_filter": "content_filter"}


_USAGE_NAMES = {name: name for name in ("input_tokens", "output_tokens", "total_tokens")}


def responses_usage(usage: PlannedUsage) -> dict[str, Any]:
    return {
        **usage.report(_USAGE_NAMES),
        "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
        "output_tokens_details": {"reasoning_tokens": 0},
    }


def response_body(
    reply: PlannedReply | None, *, model: str, created: int, status: str = "completed"
) -> dict[str, Any]:
    """The `Response` object; `reply=None` gives the empty, in-progress one a stream opens with."""
    output = [item for _, item in _output_items(reply)] if reply else []
    incomplete = _INCOMPLETE.get(reply.finish) if reply else None
    if reply and incomplete:
        status = "incomplete"
    return {
        "id": "resp_test",
        "object": "response",
        "created_at": created,
        "model": model,
        "status": status,
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "incomplete_details": {"reason": incomplete} if incomplete else None,
        "error": None,
        "usage": responses_usage(reply.usage) if reply and reply.usage else None,
    }


def response_events(reply: PlannedReply, *, model: str, created: int) -> Iterator[dict[str, Any]]:
    """The stream events of `reply`, numbered by ``sequence_number``."""
    counter = itertools.count()
    opened = response_body(None, model=model, created=created, status="in_progress")
    yield _event(counter, "response.created", response=opened)
    yield _event(counter, "response.in_progress", response=opened)
    for output_index, (pieces, item) in enumerate(_output_items(reply)):
        yield from _item_events(counter, output_index, item, pieces, reply)
    final = response_body(reply, model=model, created=created)
    kind = "response.incomplete" if final["status"] == "incomplete" else "response.completed"
    yield _event(counter, kind, response=final)


def _event(counter: Iterator[int], kind: str, **fields: Any) -> dict[str, Any]:
    return {"type": kind, "sequence_number": next(counter), **fields}


def _output_items(reply: PlannedReply) -> Iterator[tuple[list[str], dict[str, Any]]]:
    """Each output item in its finished form, with the text pieces it streams as."""
    if reply.reasoning:
        summary = [{"type": "summary_text", "text": reply.reasoning}]
        yield (
            reply.pieces(reply.reasoning),
            {"id": "rs_0", "type": "reasoning", "summary": summary, "status": "completed"},
        )
    if reply.text or reply.refusal:
        part = (
            {"type": "output_text", "text": reply.text, "annotations": [], "logprobs": []}
            if reply.text
            else {"type": "refusal", "refusal": reply.refusal}
        )
        message = {
            "id": "msg_0",
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [part],
        }
        yield reply.pieces(reply.text or reply.refusal), message
    for index, (call, call_id) in enumerate(zip(reply.tool_calls, reply.call_ids(), strict=True)):
        function_call = {
            "id": f"fc_{index}",
            "type": "function_call",
            "call_id": call_id,
            "name": call.name,
            "arguments": call.arguments,
            "status": "completed",
        }
        yield reply.pieces(call.arguments), function_call


def _item_events(
    counter: Iterator[int],
    output_index: int,
    item: dict[str, Any],
    pieces: list[str],
    reply: PlannedReply,
) -> Iterator[dict[str, Any]]:
    where = {"item_id": item["id"], "output_index": output_index}
    yield _event(
        counter, "response.output_item.added", output_index=output_index, item=_opened(item)
    )
    if item["type"] == "reasoning":
        for piece in pieces:
            yield _event(
                counter,
                "response.reasoning_summary_text.delta",
                summary_index=0,
                delta=piece,
                **where,
            )
    elif item["type"] == "message":
        kind = "response.output_text.delta" if reply.text else "response.refusal.delta"
        extra: dict[str, Any] = {"logprobs": []} if reply.text else {}
        for piece in pieces:
            yield _event(counter, kind, content_index=0, delta=piece, **where, **extra)
    else:
        for piece in pieces:
            yield _event(counter, "response.function_call_arguments.delta", delta=piece, **where)
        yield _event(
            counter, "response.function_call_arguments.done", arguments=item["arguments"], **where
        )
    yield _event(counter, "response.output_item.done", output_index=output_index, item=item)


def _opened(item: dict[str, Any]) -> dict[str, Any]:
    """An item as ``response.output_item.added`` announces it: nothing streamed yet."""
    if item["type"] == "function_call":
        return {**item, "arguments": "", "status": "in_progress"}
    if item["type"] == "message":
        return {**item, "content": [], "status": "in_progress"}
    return {**item, "summary": [], "status": "in_progress"}


def failed_response_events(
    failure: PlannedFailure, *, model: str, created: int
) -> Iterator[dict[str, Any]]:
    """A stream that fails after it started: ``response.created``, then ``response.failed``."""
    counter = itertools.count()
    opened = response_body(None, model=model, created=created, status="in_progress")
    yield _event(counter, "response.created", response=opened)
    error = {"code": failure.code or failure.type, "message": failure.message}
    usage = responses_usage(failure.usage) if failure.usage else None
    failed = {**opened, "status": "failed", "error": error, "usage": usage}
    yield _event(counter, "response.failed", response=failed)
