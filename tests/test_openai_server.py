"""The scripted OpenAI server, checked with the official `openai` client itself."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Iterator

import openai
import pytest

from helikon.testing import (
    OpenAIServer,
    PlannedFailure,
    PlannedReply,
    PlannedToolCall,
    PlannedUsage,
)

USER = [{"role": "user", "content": "hi"}]


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as running:
        yield running


@pytest.fixture
async def client(server: OpenAIServer) -> AsyncIterator[openai.AsyncOpenAI]:
    async with openai.AsyncOpenAI(base_url=server.base_url, api_key="k", max_retries=0) as built:
        yield built


def test_base_url_is_local_and_needs_a_running_server() -> None:
    server = OpenAIServer()
    with pytest.raises(RuntimeError, match="not running"):
        _ = server.base_url
    with server:
        assert server.base_url.startswith("http://127.0.0.1:")
        assert server.base_url.endswith("/v1")


async def test_replies_are_not_held_back_by_nagles_algorithm(
    client: openai.AsyncOpenAI, server: OpenAIServer
) -> None:
    """A reply goes out in several small writes; with Nagle's algorithm each would wait for
    the client's delayed ACK (about 40 ms a request), so the server's sockets set
    TCP_NODELAY."""
    server.plan(PlannedReply(text="hello"))
    stream = await client.chat.completions.create(model="m", messages=USER, stream=True)
    async with stream:
        async for _ in stream:
            with server._lock:  # the server's side of the connection, open while it streams
                connections = list(server._connections)
    assert connections
    for connection in connections:
        assert connection.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)


async def test_non_streaming_chat_completion(
    client: openai.AsyncOpenAI, server: OpenAIServer
) -> None:
    call = PlannedToolCall("f", '{"x": 1}', "call_f")
    server.plan(PlannedReply(text="hello", tool_calls=[call], usage=PlannedUsage(7, 3)))
    completion = await client.chat.completions.create(model="m", messages=USER)
    choice = completion.choices[0]
    assert choice.message.content == "hello"
    assert choice.finish_reason == "tool_calls"
    assert choice.message.model_dump()["tool_calls"] == [
        {"id": "call_f", "type": "function", "function": {"name": "f", "arguments": '{"x": 1}'}}
    ]
    assert completion.usage is not None
    assert (completion.usage.prompt_tokens, completion.usage.total_tokens) == (7, 10)


async def test_non_streaming_response(client: openai.AsyncOpenAI, server: OpenAIServer) -> None:
    server.plan(PlannedReply(text="hello", usage=PlannedUsage(7, 3)))
    response = await client.responses.create(model="m", input="hi")
    assert response.output_text == "hello"
    assert response.status == "completed"
    assert response.usage is not None and response.usage.total_tokens == 10


async def test_chat_stream_sends_usage_only_when_asked(
    client: openai.AsyncOpenAI, server: OpenAIServer
) -> None:
    server.plan(PlannedReply(text="a"), PlannedReply(text="a"))
    plain = await client.chat.completions.create(model="m", messages=USER, stream=True)
    assert [chunk.usage async for chunk in plain] == [None, None, None]
    asked = await client.chat.completions.create(
        model="m",
        messages=USER,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = [chunk async for chunk in asked]
    assert chunks[-1].choices == []
    assert chunks[-1].usage is not None and chunks[-1].usage.total_tokens == 15


async def test_chat_stream_gives_a_call_id_only_on_its_first_fragment(
    client: openai.AsyncOpenAI, server: OpenAIServer
) -> None:
    server.plan(PlannedReply(tool_calls=[PlannedToolCall("f", '{"long": "arguments"}')]))
    stream = await client.chat.completions.create(model="m", messages=USER, stream=True)
    fragments = [
        call
        async for chunk in stream
        for choice in chunk.choices
        for call in choice.delta.tool_calls or ()
    ]
    assert [fragment.id for fragment in fragments[:2]] == ["call_0", None]
    assert {fragment.index for fragment in fragments} == {0}
    assert "".join(f.function.arguments or "" for f in fragments) == '{"long": "arguments"}'


async def test_responses_stream_event_order(
    client: openai.AsyncOpenAI, server: OpenAIServer
) -> None:
    server.plan(PlannedReply(text="ab", tool_calls=[PlannedToolCall("f", "{}")], chunk_size=1))
    stream = await client.responses.create(model="m", input="hi", stream=True)
    events = [event async for event in stream]
    assert [event.type for event in events] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_item.done",
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert [event.sequence_number for event in events] == list(range(len(events)))


async def test_a_length_stop_ends_a_responses_stream_incomplete(
    client: openai.AsyncOpenAI, server: OpenAIServer
) -> None:
    server.plan(PlannedReply(text="cut", finish_reason="length"))
    stream = await client.responses.create(model="m", input="hi", stream=True)
    last = [event async for event in stream][-1]
    assert last.type == "response.incomplete"
    assert last.response.incomplete_details is not None
    assert last.response.incomplete_details.reason == "max_output_tokens"


async def test_failures_come_in_openai_error_shape(
    client: openai.AsyncOpenAI, server: OpenAIServer
) -> None:
    server.plan(PlannedFailure.rate_limited(retry_after=1.5))
    with pytest.raises(openai.RateLimitError) as caught:
        await client.chat.completions.create(model="m", messages=USER)
    assert caught.value.code == "rate_limit_exceeded"
    assert caught.value.response.headers["retry-after"] == "2"
    assert caught.value.response.headers["retry-after-ms"] == "1500"


async def test_requests_are_recorded(client: openai.AsyncOpenAI, server: OpenAIServer) -> None:
    server.plan(PlannedReply(text="a"), PlannedReply(text="b"))
    await client.chat.completions.create(model="m", messages=USER, temperature=0.5)
    assert server.pending == 1
    assert server.requests[0].path == "/v1/chat/completions"
    assert server.requests[0].body == {"model": "m", "messages": USER, "temperature": 0.5}
    assert server.requests[0].headers["authorization"] == "Bearer k"


async def test_an_unplanned_request_is_a_clear_400(
    client: openai.AsyncOpenAI, server: OpenAIServer
) -> None:
    with pytest.raises(openai.BadRequestError, match="no planned reply left"):
        await client.responses.create(model="m", input="hi")


@pytest.mark.parametrize(
    ("messages", "problem"),
    [
        ([{"role": "tool", "tool_call_id": "x", "content": "1"}], "must be a response"),
        (
            [
                {
                    "role": "assistant",
                    "tool_calls": [
                        {"id": "a", "type": "function", "function": {"name": "f", "arguments": ""}}
                    ],
                },
                {"role": "user", "content": "hi"},
            ],
            "must be followed by tool messages",
        ),
    ],
    ids=["orphan-result", "unanswered-call"],
)
async def test_chat_tool_results_must_answer_calls(
    client: openai.AsyncOpenAI,
    server: OpenAIServer,
    messages: list[dict[str, object]],
    problem: str,
) -> None:
    server.plan(PlannedReply(text="unused"))
    with pytest.raises(openai.BadRequestError, match=problem):
        await client.chat.completions.create(model="m", messages=messages)
    assert server.pending == 1


async def test_responses_tool_outputs_must_answer_calls(
    client: openai.AsyncOpenAI, server: OpenAIServer
) -> None:
    orphan = [{"type": "function_call_output", "call_id": "nope", "output": "1"}]
    with pytest.raises(openai.BadRequestError, match="No tool call found"):
        await client.responses.create(model="m", input=orphan)
