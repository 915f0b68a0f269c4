"""Chat Completions: a `ModelInput` as a streamed request, and its chunks as `ModelChunk`s.

The conversation becomes messages: the instructions as the first system message, then the
items in order, with an assistant's text and the tool calls that follow it grouped into one
assistant message with ``tool_calls``, and each tool result as a ``tool`` message answering
its call id. Reasoning items are not sent: Chat Completions has no input for them.

In the stream, a tool call's id arrives only on the first fragment of each ``index``; the
translation maps index to id so every `ToolCallChunk` carries its call id.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncGenerator, Iterable, Iterator, Sequence
from typing import Any, cast

import openai
from openai.types.chat import (
    ChatCompletionAssistantMessageParam,
    ChatCompletionChunk,
    ChatCompletionFunctionToolParam,
    ChatCompletionMessageFunctionToolCallParam,
    ChatCompletionMessageParam,
)
from openai.types.chat.chat_completion_chunk import ChoiceDelta, ChoiceDeltaToolCall
from openai.types.chat.completion_create_params import ResponseFormat
from openai.types.completion_usage import CompletionUsage

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
from helikon.models.openai_errors import StreamFailed, classify, cut_short, failed
from helikon.models.openai_request import (
    SUMMARY_PREFIX,
    WireLog,
    as_given,
    extra_instruction,
    given,
    merged,
    wire_forms,
)


async def stream_chat(
    client: openai.AsyncOpenAI, model: str, request: ModelInput, defaults: ModelSettings
) -> AsyncGenerator[ModelChunk, None]:
    """One streamed Chat Completions call, translated chunk by chunk."""
    settings = merged(request.settings, defaults)
    tools = chat_tools(request.tools) if request.request.tools and request.tools else None
    response_format = request.request.response_format
    stream = await client.chat.completions.create(
        model=model,
        messages=[],  # the conversation goes as given, in extra_body (see below)
        stream=True,
        stream_options={"include_usage": True},
        tools=tools or openai.omit,
        parallel_tool_calls=given(settings.parallel_tool_calls if tools else None),
        response_format=cast(ResponseFormat, dict(response_format))
        if response_format
        else openai.omit,
        temperature=given(settings.temperature),
        top_p=given(settings.top_p),
        max_completion_tokens=given(settings.max_output_tokens),
        extra_body=as_given("messages", chat_messages(request)),
    )
    translation = ChatTranslation()
    try:
        async with stream:
            async for chunk in stream:
                for translated in translation.feed(chunk):
                    yield translated
    except openai.APIError as exc:  # an error event mid-stream: keep the usage it reported
        raise StreamFailed(classify(exc), translation.usage) from exc
    for translated in translation.close():
        yield translated


def chat_messages(request: ModelInput) -> list[ChatCompletionMessageParam]:
    """The conversation as Chat Completions messages (see the module docstring)."""
    messages = wire_forms(request.items, "openai.chat", ChatMessages)
    if request.instructions:
        messages.insert(0, {"role": "system", "content": request.instructions})
    extra = extra_instruction(request.request)
    if extra:
        messages.append({"role": "system", "content": extra})
    return messages


class ChatMessages(WireLog[ChatCompletionMessageParam]):
    """A log's items as Chat Completions messages, each item converted once.

    A tool call joins the assistant message before it (the one with the text it follows, or
    the previous call's) while nothing else has come between; reasoning is skipped and
    comes between nothing. A message some earlier call may already have been given is
    never changed: a call that joins it replaces it with a longer copy.
    """

    joins = True

    def __init__(self) -> None:
        super().__init__()
        # The assistant message tool calls join now, and its calls; `_owned` when the
        # current `extend` made it, so no caller holds it yet and it may change in place.
        self._assistant: ChatCompletionAssistantMessageParam | None = None
        self._calls: list[ChatCompletionMessageFunctionToolCallParam] = []
        self._owned = False

    def extend(self, items: Iterable[Item]) -> None:
        self._owned = False
        super().extend(items)

    def add(self, item: Item) -> None:
        if isinstance(item, Reasoning):
            return
        if isinstance(item, ToolCall):
            self._join(_tool_call(item))
            return
        if isinstance(item, AssistantMessage):
            self._assistant, self._calls = {"role": "assistant", "content": item.content}, []
            self._owned = True
            self.forms.append(self._assistant)
            return
        self._assistant = None
        self.forms.append(_message(item))

    def _join(self, call: ChatCompletionMessageFunctionToolCallParam) -> None:
        assistant = self._assistant
        if assistant is None:
            self._calls = [call]
            self._assistant = {"role": "assistant", "tool_calls": self._calls}
            self.forms.append(self._assistant)
        elif self._owned:
            self._calls.append(call)
            assistant["tool_calls"] = self._calls
            return
        else:
            self._calls = [*self._calls, call]
            self._assistant = {**assistant, "tool_calls": self._calls}
            self.forms[-1] = self._assistant
        self._owned = True


def _message(
    item: UserMessage | SystemMessage | ToolResult | CompactionSummary,
) -> ChatCompletionMessageParam:
    if isinstance(item, UserMessage):
        return {"role": "user", "content": item.content}
    if isinstance(item, ToolResult):
        return {"role": "tool", "tool_call_id": item.call_id, "content": item.content}
    if isinstance(item, CompactionSummary):
        return {"role": "system", "content": SUMMARY_PREFIX + item.content}
    return {"role": "system", "content": item.content}


def _tool_call(call: ToolCall) -> ChatCompletionMessageFunctionToolCallParam:
    return {
        "id": call.call_id,
        "type": "function",
        "function": {"name": call.name, "arguments": call.arguments},
    }


def chat_tools(specs: Sequence[ToolSpec]) -> list[ChatCompletionFunctionToolParam]:
    """Tools as Chat Completions function tools."""
    return [
        {
            "type": "function",
            "function": {
                "name": spec.name,
                "description": spec.description,
                "parameters": spec.parameters,
            },
        }
        for spec in specs
    ]


class ChatTranslation:
    """Turns one call's `ChatCompletionChunk`s into `ModelChunk`s; `close` ends the call."""

    def __init__(self) -> None:
        self._call_ids: dict[int, str] = {}
        self._refusal: list[str] = []
        self._usage: Usage | None = None
        self._finish: str | None = None

    def feed(self, chunk: ChatCompletionChunk) -> Iterator[ModelChunk]:
        if chunk.usage is not None:
            self._usage = chat_usage(chunk.usage)
        for choice in chunk.choices:
            if choice.index != 0:
                continue  # helikon asks for one choice; others are not its answer
            yield from self._delta(choice.delta)
            if choice.finish_reason:
                self._finish = choice.finish_reason

    def close(self) -> Iterator[ModelChunk]:
        """The usage and finish chunks.

        Raises:
            StreamFailed: the answer was a refusal, was stopped by the content filter, or
                the stream ended without a finish reason (the connection was cut).
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

    def _delta(self, delta: ChoiceDelta) -> Iterator[ModelChunk]:
        # OpenAI-compatible servers stream reasoning in a non-standard field, named
        # `reasoning_content` (DeepSeek, vLLM) or `reasoning` (OpenRouter, Ollama).
        reasoning: Any = getattr(delta, "reasoning_content", None) or getattr(
            delta, "reasoning", None
        )
        if isinstance(reasoning, str) and reasoning:
            yield ReasoningChunk(reasoning)
        if delta.content:
            yield TextChunk(delta.content)
        if delta.refusal:
            self._refusal.append(delta.refusal)
        for fragment in delta.tool_calls or ():
            chunk = self._tool_fragment(fragment)
            if chunk.arguments_delta or chunk.name:
                yield chunk

    def _tool_fragment(self, fragment: ChoiceDeltaToolCall) -> ToolCallChunk:
        if fragment.id:
            # A new id at a known index is a new call (some servers reuse index 0).
            self._call_ids[fragment.index] = fragment.id
        call_id = self._call_ids.setdefault(fragment.index, f"call_{uuid.uuid4().hex[:24]}")
        function = fragment.function
        if function is None:
            return ToolCallChunk(call_id)
        return ToolCallChunk(call_id, function.arguments or "", function.name or None)


def chat_usage(usage: CompletionUsage) -> Usage:
    # The client does not validate streamed chunks: a count may be None, or absent.
    counts = (getattr(usage, name, None) for name in _COUNT_NAMES)
    return reported_usage(*counts)


_COUNT_NAMES = ("prompt_tokens", "completion_tokens", "total_tokens")
