"""The Responses API: a `ModelInput` as a streamed request, and its events as `ModelChunk`s.

The instructions go in ``instructions``; the conversation becomes input items (messages,
``function_call`` and ``function_call_output``). Reasoning items are not sent back: the API
only accepts the ones it produced, by id, and helikon keeps the text alone. Requests set
``store=False``: helikon sends the whole conversation each time and keeps its own log.

In the stream, argument deltas name the output item (``item_id``), not the call; the
translation maps item id to call id, learned from ``response.output_item.added``.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Iterator, Mapping, Sequence
from typing import Any, cast

import openai
from openai.types.responses import (
    FunctionToolParam,
    Response,
    ResponseFormatTextConfigParam,
    ResponseFunctionToolCall,
    ResponseInputItemParam,
    ResponseStreamEvent,
    ResponseTextConfigParam,
)

from helikon.core.items import (
    AssistantMessage,
    CompactionSummary,
    Item,
    ModelSettings,
    Reasoning,
    SystemMessage,
    ToolCall,
    ToolResult,
    Usage,
    UserMessage,
)
from helikon.core.tool_spec import ToolSpec
from helikon.models.base import (
    FinishChunk,
    ModelChunk,
    ModelInput,
    ReasoningChunk,
    TextChunk,
    ToolCallChunk,
    UsageChunk,
    reported_usage,
)
from helikon.models.openai_errors import StreamFailed, classify, cut_short, failed, from_code
from helikon.models.openai_request import (
    SUMMARY_PREFIX,
    WireLog,
    as_given,
    extra_instruction,
    given,
    merged,
    wire_forms,
)


async def stream_responses(
    client: openai.AsyncOpenAI, model: str, request: ModelInput, defaults: ModelSettings
) -> AsyncGenerator[ModelChunk, None]:
    """One streamed Responses API call, translated event by event."""
    settings = merged(request.settings, defaults)
    tools = responses_tools(request.tools) if request.request.tools and request.tools else None
    response_format = request.request.response_format
    stream = await client.responses.create(
        model=model,
        instructions=request.instructions or openai.omit,
        stream=True,
        store=False,
        tools=tools or openai.omit,
        parallel_tool_calls=given(settings.parallel_tool_calls if tools else None),
        text=text_config(response_format) if response_format else openai.omit,
        temperature=given(settings.temperature),
        top_p=given(settings.top_p),
        max_output_tokens=given(settings.max_output_tokens),
        extra_body=as_given("input", responses_input(request)),
    )
    translation = ResponsesTranslation()
    try:
        async with stream:
            async for event in stream:
                for chunk in translation.feed(event):
                    yield chunk
    except openai.APIError as exc:  # an error mid-stream: keep the usage it reported
        raise StreamFailed(classify(exc), translation.usage) from exc
    for chunk in translation.close():
        yield chunk


def responses_input(request: ModelInput) -> list[ResponseInputItemParam]:
    """The conversation as Responses API input items (see the module docstring)."""
    items = wire_forms(request.items, "openai.responses", ResponsesInput)
    extra = extra_instruction(request.request)
    if extra:
        items.append({"type": "message", "role": "system", "content": extra})
    return items


class ResponsesInput(WireLog[ResponseInputItemParam]):
    """A log's items as Responses API input items, each item converted once."""

    def add(self, item: Item) -> None:
        wire = _input_item(item)
        if wire is not None:
            self.forms.append(wire)


def _input_item(item: Item) -> ResponseInputItemParam | None:
    if isinstance(item, UserMessage):
        return {"type": "message", "role": "user", "content": item.content}
    if isinstance(item, AssistantMessage):
        return {"type": "message", "role": "assistant", "content": item.content}
    if isinstance(item, SystemMessage):
        return {"type": "message", "role": "system", "content": item.content}
    if isinstance(item, CompactionSummary):
        return {"type": "message", "role": "system", "content": SUMMARY_PREFIX + item.content}
    if isinstance(item, ToolCall):
        return {
            "type": "function_call",
            "call_id": item.call_id,
            "name": item.name,
            "arguments": item.arguments,
        }
    if isinstance(item, ToolResult):
        return {"type": "function_call_output", "call_id": item.call_id, "output": item.content}
    assert isinstance(item, Reasoning)
    return None


def responses_tools(specs: Sequence[ToolSpec]) -> list[FunctionToolParam]:
    """Tools as Responses API function tools (not strict: helikon's schemas need not be)."""
    return [
        {
            "type": "function",
            "name": spec.name,
            "description": spec.description,
            "parameters": spec.parameters,
            "strict": False,
        }
        for spec in specs
    ]


def text_config(response_format: Mapping[str, Any]) -> ResponseTextConfigParam:
    """A Chat-style ``response_format`` as the Responses API's ``text.format``.

    ``{"type": "json_schema", "json_schema": {name, schema, strict}}`` is flattened to
    ``{"type": "json_schema", name, schema, strict}``; other formats pass through.
    """
    schema = response_format.get("json_schema")
    if response_format.get("type") == "json_schema" and isinstance(schema, Mapping):
        return {"format": cast(ResponseFormatTextConfigParam, {"type": "json_schema", **schema})}
    return {"format": cast(ResponseFormatTextConfigParam, dict(response_format))}


class ResponsesTranslation:
    """Turns one call's stream events into `ModelChunk`s; `close` ends the call."""

    def __init__(self) -> None:
        self._call_ids: dict[str, str] = {}
        self._refusal: list[str] = []
        self._usage: Usage | None = None
        self._finish: str | None = None
        self._handlers: dict[str, Callable[[Any], Iterator[ModelChunk]]] = {
            "response.output_text.delta": _text,
            "response.reasoning_summary_text.delta": _reasoning,
            "response.reasoning_text.delta": _reasoning,
            "response.refusal.delta": self._refused,
            "response.output_item.added": self._item_added,
            "response.function_call_arguments.delta": self._arguments,
            "response.completed": self._ended,
            "response.incomplete": self._ended,
            "response.failed": self._failed,
            "error": self._error,
        }

    def feed(self, event: ResponseStreamEvent) -> Iterator[ModelChunk]:
        handler = self._handlers.get(event.type)
        return handler(event) if handler else iter(())

    def close(self) -> Iterator[ModelChunk]:
        """The usage and finish chunks.

        Raises:
            StreamFailed: the answer was a refusal, was stopped by the content filter, or
                the stream ended before ``response.completed`` (the connection was cut).
        """
        if self._refusal or self._finish == "content_filter":
            message = "".join(self._refusal) or "the provider's content filter stopped the answer"
            raise StreamFailed(failed("refused", message), self.usage)  # a refusal costs too
        if self._finish is None:
            raise StreamFailed(cut_short(), self.usage)
        yield UsageChunk(self.usage)
        yield FinishChunk(self._finish)

    @property
    def usage(self) -> Usage:
        """The call's last usage report; without one, the call still counts as a request."""
        return self._usage or Usage(requests=1)

    def _refused(self, event: Any) -> Iterator[ModelChunk]:
        self._refusal.append(event.delta)
        return iter(())

    def _item_added(self, event: Any) -> Iterator[ModelChunk]:
        item = event.item
        if isinstance(item, ResponseFunctionToolCall):
            self._call_ids[item.id or item.call_id] = item.call_id
            yield ToolCallChunk(item.call_id, item.arguments, item.name)

    def _arguments(self, event: Any) -> Iterator[ModelChunk]:
        if event.delta:
            yield ToolCallChunk(self._call_ids.get(event.item_id, event.item_id), event.delta)

    def _ended(self, event: Any) -> Iterator[ModelChunk]:
        response: Response = event.response
        self._record_usage(response)
        reason = response.incomplete_details.reason if response.incomplete_details else None
        if reason == "max_output_tokens":
            self._finish = "length"
        elif reason == "content_filter":
            self._finish = "content_filter"
        elif any(isinstance(item, ResponseFunctionToolCall) for item in response.output):
            self._finish = "tool_calls"
        else:
            self._finish = "stop"
        return iter(())

    def _record_usage(self, response: Response) -> None:
        if response.usage is not None:
            # The client does not validate stream events: a count may be None, or absent.
            counts = (getattr(response.usage, name, None) for name in _COUNT_NAMES)
            self._usage = reported_usage(*counts)

    def _failed(self, event: Any) -> Iterator[ModelChunk]:
        self._record_usage(event.response)  # what the call spent before it failed
        error = event.response.error
        code, message = (error.code, error.message) if error else (None, "the response failed")
        raise StreamFailed(from_code(code, message), self.usage)

    def _error(self, event: Any) -> Iterator[ModelChunk]:
        raise StreamFailed(from_code(event.code, event.message), self.usage)


_COUNT_NAMES = ("input_tokens", "output_tokens", "total_tokens")


def _reasoning(event: Any) -> Iterator[ModelChunk]:
    if event.delta:
        yield ReasoningChunk(event.delta)


def _text(event: Any) -> Iterator[ModelChunk]:
    if event.delta:
        yield TextChunk(event.delta)
