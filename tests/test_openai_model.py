"""OpenAIModel against a real local HTTP server speaking OpenAI's wire format.

The official `openai` client does the HTTP; only 127.0.0.1 is ever contacted.
"""

from __future__ import annotations

import asyncio
import json
import math
import socket
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import aclosing
from typing import Any

import openai
import pytest

from helikon import Agent, RunConfig, tool
from helikon.core.errors import ModelCallFailed, ModelError, RunError
from helikon.core.items import (
    AssistantMessage,
    CompactionSummary,
    ModelSettings,
    Reasoning,
    SystemMessage,
    ToolCall,
    ToolResult,
    Usage,
    UserMessage,
)
from helikon.core.state import Failed, ModelRequest, ModelResponse
from helikon.models.base import (
    FinishChunk,
    ModelChunk,
    ModelInput,
    ReasoningChunk,
    ResponseAssembler,
    TextChunk,
    ToolCallChunk,
    ToolSpec,
    UsageChunk,
)
from helikon.models.openai import Backoff, OpenAIModel
from helikon.models.openai_chat import chat_messages, chat_tools
from helikon.models.openai_errors import retry_after
from helikon.models.openai_responses import responses_input, responses_tools, text_config
from helikon.testing import (
    OpenAIServer,
    PlannedFailure,
    PlannedReply,
    PlannedToolCall,
    PlannedUsage,
)

FAST = Backoff(base_delay=0.0, max_delay=0.05)
WEATHER = ToolSpec(
    "get_weather",
    "Current weather for a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
REPORT_FORMAT = {
    "type": "json_schema",
    "json_schema": {
        "name": "Report",
        "schema": {"type": "object", "properties": {"total": {"type": "number"}}},
        "strict": True,
    },
}


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as running:
        yield running


@pytest.fixture(params=["chat", "responses"])
async def model(request: pytest.FixtureRequest, server: OpenAIServer) -> AsyncIterator[OpenAIModel]:
    build = OpenAIModel.chat if request.param == "chat" else OpenAIModel.responses
    built = build("gpt-test", base_url=server.base_url, api_key="test-key", backoff=FAST)
    yield built
    await built.aclose()


@pytest.fixture
async def chat(server: OpenAIServer) -> AsyncIterator[OpenAIModel]:
    built = OpenAIModel.chat("gpt-test", base_url=server.base_url, api_key="k", backoff=FAST)
    yield built
    await built.aclose()


@pytest.fixture
async def responses(server: OpenAIServer) -> AsyncIterator[OpenAIModel]:
    built = OpenAIModel.responses("gpt-test", base_url=server.base_url, api_key="k", backoff=FAST)
    yield built
    await built.aclose()


def ask(text: str = "hi", **fields: Any) -> ModelInput:
    return ModelInput(instructions="You are terse.", items=(UserMessage(text),), **fields)


async def chunks_of(model: OpenAIModel, request: ModelInput) -> list[ModelChunk]:
    return [chunk async for chunk in model.stream(request)]


def assembled(chunks: list[ModelChunk]) -> ModelResponse:
    assembler = ResponseAssembler()
    for chunk in chunks:
        assembler.add(chunk)
    return assembler.response()


async def failure_of(model: OpenAIModel, request: ModelInput | None = None) -> ModelError:
    with pytest.raises(ModelError) as caught:
        await chunks_of(model, request or ask())
    return caught.value


# ------------------------------------------------------------------ streaming


async def test_text_streams_as_many_deltas_and_assembles(
    model: OpenAIModel, server: OpenAIServer
) -> None:
    server.plan(PlannedReply(text="Hello, streaming world!", chunk_size=4))
    chunks = await chunks_of(model, ask())
    texts = [chunk.text for chunk in chunks if isinstance(chunk, TextChunk)]
    assert len(texts) == 6
    assert "".join(texts) == "Hello, streaming world!"
    response = assembled(chunks)
    assert response.items == (AssistantMessage("Hello, streaming world!"),)
    assert response.finish_reason == "stop"
    assert chunks[-1] == FinishChunk("stop")


async def test_deltas_are_yielded_as_they_arrive(model: OpenAIModel, server: OpenAIServer) -> None:
    server.plan(PlannedReply(text="abcdefghij", chunk_size=1, chunk_delay=0.03))
    arrivals = [
        time.monotonic() async for chunk in model.stream(ask()) if isinstance(chunk, TextChunk)
    ]
    assert len(arrivals) == 10
    assert arrivals[-1] - arrivals[0] >= 0.15


async def test_parallel_tool_calls_assemble_per_call_id(
    model: OpenAIModel, server: OpenAIServer
) -> None:
    calls = [
        PlannedToolCall("get_weather", '{"city": "Paris", "unit": "celsius"}', "call_paris"),
        PlannedToolCall("get_weather", '{"city": "Oslo", "unit": "kelvin"}', "call_oslo"),
    ]
    server.plan(PlannedReply(tool_calls=calls, chunk_size=2, interleave_tool_calls=True))
    chunks = await chunks_of(model, ask(tools=(WEATHER,)))

    fragments = [chunk for chunk in chunks if isinstance(chunk, ToolCallChunk)]
    assert {fragment.call_id for fragment in fragments} == {"call_paris", "call_oslo"}
    for call in calls:
        own = [fragment for fragment in fragments if fragment.call_id == call.call_id]
        assert len(own) > 10
        assert own[0].name == "get_weather"
        partial = "".join(fragment.arguments_delta for fragment in own[:-1])
        with pytest.raises(json.JSONDecodeError):
            json.loads(partial)
        assert "".join(fragment.arguments_delta for fragment in own) == call.arguments

    response = assembled(chunks)
    assert response.items == (
        ToolCall("call_paris", "get_weather", calls[0].arguments),
        ToolCall("call_oslo", "get_weather", calls[1].arguments),
    )
    assert response.finish_reason == "tool_calls"


async def test_usage_is_reported_once_per_call(model: OpenAIModel, server: OpenAIServer) -> None:
    server.plan(PlannedReply(text="ok", usage=PlannedUsage(123, 45)))
    chunks = await chunks_of(model, ask())
    usages = [chunk.usage for chunk in chunks if isinstance(chunk, UsageChunk)]
    assert usages == [Usage(123, 45, 168, requests=1)]
    assert assembled(chunks).usage == Usage(123, 45, 168, 1)


EVERY_COUNT = frozenset({"input_tokens", "output_tokens", "total_tokens"})


@pytest.mark.parametrize(
    ("reported", "counted"),
    [
        (PlannedUsage(None, None), Usage(0, 0, 0, 1)),
        (PlannedUsage(7, None), Usage(7, 0, 7, 1)),
        (PlannedUsage(7, 3, omit=frozenset({"total_tokens"})), Usage(7, 3, 10, 1)),
        (PlannedUsage(7, 3, omit=frozenset({"output_tokens"})), Usage(7, 0, 10, 1)),
        (PlannedUsage(omit=EVERY_COUNT), Usage(0, 0, 0, 1)),
    ],
    ids=["all-null", "output-null", "no-total", "no-output", "no-counts"],
)
async def test_null_or_missing_usage_counts_as_zero(
    model: OpenAIModel, server: OpenAIServer, reported: PlannedUsage, counted: Usage
) -> None:
    """Some OpenAI-compatible servers send null counts or leave them out: a missing count
    is 0, a missing total the sum of the counts there are."""
    server.plan(PlannedReply(text="ok", usage=reported))
    chunks = await chunks_of(model, ask())
    assert [chunk.usage for chunk in chunks if isinstance(chunk, UsageChunk)] == [counted]


async def test_a_run_on_a_server_with_null_usage_completes(
    model: OpenAIModel, server: OpenAIServer
) -> None:
    """The loop adds every call's usage; a null count from the wire must not crash it."""
    server.plan(
        PlannedReply(
            tool_calls=[PlannedToolCall("lookup", "{}", "c1")], usage=PlannedUsage(None, 4)
        ),
        PlannedReply(text="done", usage=PlannedUsage(omit=EVERY_COUNT)),
    )

    @tool
    def lookup() -> str:
        """Look something up."""
        return "found"

    agent = Agent("looker", model, tools=[lookup], config=RunConfig(token_budget=1000))
    result = await agent.run("go").collect()

    assert result.final_output == "done"
    assert result.usage == Usage(0, 4, 4, 2)


async def test_reasoning_streams_as_reasoning_chunks(
    model: OpenAIModel, server: OpenAIServer
) -> None:
    server.plan(PlannedReply(text="42", reasoning="six times seven"))
    chunks = await chunks_of(model, ask())
    assert any(isinstance(chunk, ReasoningChunk) for chunk in chunks)
    assert assembled(chunks).items == (Reasoning("six times seven"), AssistantMessage("42"))


async def test_a_length_stop_is_reported_as_length(
    model: OpenAIModel, server: OpenAIServer
) -> None:
    server.plan(PlannedReply(text="It was the best of", finish_reason="length"))
    response = assembled(await chunks_of(model, ask()))
    assert response.finish_reason == "length"
    assert response.items == (AssistantMessage("It was the best of"),)


# ------------------------------------------------------------------ failures


async def test_a_429_is_retried_then_succeeds(model: OpenAIModel, server: OpenAIServer) -> None:
    server.plan(PlannedFailure.rate_limited(retry_after=0), PlannedReply(text="finally"))
    response = assembled(await chunks_of(model, ask()))
    assert response.items == (AssistantMessage("finally"),)
    assert len(server.requests) == 2


async def test_retry_after_is_honoured(server: OpenAIServer) -> None:
    server.plan(PlannedFailure.rate_limited(retry_after=0.3), PlannedReply(text="ok"))
    model = OpenAIModel.chat("m", base_url=server.base_url, api_key="k", backoff=Backoff(0, 5))
    started = time.monotonic()
    await chunks_of(model, ask())
    await model.aclose()
    assert time.monotonic() - started >= 0.3


async def test_retry_after_is_capped_by_max_delay(chat: OpenAIModel, server: OpenAIServer) -> None:
    server.plan(PlannedFailure.rate_limited(retry_after=3600), PlannedReply(text="ok"))
    started = time.monotonic()
    await chunks_of(chat, ask())
    assert time.monotonic() - started < 5


async def test_a_persistent_429_is_rate_limited(model: OpenAIModel, server: OpenAIServer) -> None:
    server.plan(*[PlannedFailure.rate_limited(retry_after=0)] * 4)
    error = (await failure_of(model)).error
    assert (error.reason, error.status_code) == ("rate_limited", 429)
    assert len(server.requests) == model.max_retries + 1 == 4


async def test_a_500_is_retried_then_succeeds(model: OpenAIModel, server: OpenAIServer) -> None:
    server.plan(PlannedFailure.server_error(503), PlannedReply(text="back"))
    assert assembled(await chunks_of(model, ask())).items == (AssistantMessage("back"),)
    assert len(server.requests) == 2


async def test_a_persistent_500_is_unavailable(model: OpenAIModel, server: OpenAIServer) -> None:
    server.plan(*[PlannedFailure.server_error()] * 4)
    error = (await failure_of(model)).error
    assert (error.reason, error.status_code) == ("unavailable", 500)
    assert "server had an error" in error.message
    assert len(server.requests) == 4


async def test_context_length_exceeded_is_context_too_long_and_not_retried(
    model: OpenAIModel, server: OpenAIServer
) -> None:
    server.plan(PlannedFailure.context_length_exceeded(), PlannedReply(text="unused"))
    error = (await failure_of(model)).error
    assert (error.reason, error.status_code) == ("context_too_long", 400)
    assert "maximum context length" in error.message
    assert len(server.requests) == 1


async def test_a_content_filter_error_is_refused(model: OpenAIModel, server: OpenAIServer) -> None:
    server.plan(PlannedFailure.content_filter())
    error = (await failure_of(model)).error
    assert (error.reason, error.status_code) == ("refused", 400)


@pytest.mark.parametrize(
    "reply",
    [
        PlannedReply(refusal="I can't help with that."),
        PlannedReply(text="Once upon", finish_reason="content_filter"),
    ],
    ids=["refusal", "content-filter-stop"],
)
async def test_a_refused_answer_is_refused(
    model: OpenAIModel, server: OpenAIServer, reply: PlannedReply
) -> None:
    server.plan(reply)
    error = (await failure_of(model)).error
    assert error.reason == "refused"
    assert error.message == (reply.refusal or "the provider's content filter stopped the answer")
    assert len(server.requests) == 1


SPENT = PlannedUsage(12, 3)
SPENT_USAGE = Usage(12, 3, 15, 1)
FILTERED_MESSAGE = "The response was filtered due to the content management policy."


@pytest.mark.parametrize(
    "reply",
    [
        PlannedReply(refusal="I can't help with that.", usage=SPENT),
        PlannedReply(text="Once upon", finish_reason="content_filter", usage=SPENT),
    ],
    ids=["refusal", "content-filter-stop"],
)
async def test_a_refused_answer_still_reports_its_usage(
    model: OpenAIModel, server: OpenAIServer, reply: PlannedReply
) -> None:
    server.plan(reply)
    failure = await failure_of(model)
    assert failure.error.reason == "refused"
    assert failure.usage == SPENT_USAGE


async def test_a_failure_after_usage_in_the_stream_reports_that_usage(
    model: OpenAIModel, server: OpenAIServer
) -> None:
    server.plan(
        PlannedFailure(400, FILTERED_MESSAGE, code="content_filter", in_stream=True, usage=SPENT)
    )
    failure = await failure_of(model)
    assert failure.error.reason == "refused"
    assert failure.usage == SPENT_USAGE
    assert len(server.requests) == 1


async def test_a_failed_call_without_usage_still_counts_its_request(
    model: OpenAIModel, server: OpenAIServer
) -> None:
    server.plan(PlannedFailure.content_filter())
    assert (await failure_of(model)).usage == Usage(requests=1)


async def test_a_refused_call_counts_toward_the_failed_runs_usage(
    model: OpenAIModel, server: OpenAIServer
) -> None:
    """The run fails with the refusal, and its usage has both calls: tokens and requests."""
    server.plan(
        PlannedReply(tool_calls=[PlannedToolCall("lookup", "{}", "c1")], usage=PlannedUsage(10, 5)),
        PlannedFailure(400, FILTERED_MESSAGE, code="content_filter", in_stream=True, usage=SPENT),
    )

    @tool
    def lookup() -> str:
        """Look something up."""
        return "found"

    streaming = Agent("looker", model, tools=[lookup]).run("go")
    with pytest.raises(RunError) as raised:
        await streaming.collect()

    assert isinstance(raised.value.error, ModelCallFailed)
    assert raised.value.error.reason == "refused"
    run = streaming.run
    assert run is not None
    assert run.state == Failed(raised.value.error, Usage(22, 8, 30, 2))
    assert run.usage == Usage(22, 8, 30, 2)


async def test_other_client_errors_are_bad_responses(
    model: OpenAIModel, server: OpenAIServer
) -> None:
    server.plan(PlannedFailure(401, "Incorrect API key provided.", code="invalid_api_key"))
    error = (await failure_of(model)).error
    assert (error.reason, error.status_code) == ("bad_response", 401)
    assert error.message == "Incorrect API key provided."
    assert len(server.requests) == 1


async def test_a_failure_reported_inside_the_stream_is_retried(
    model: OpenAIModel, server: OpenAIServer
) -> None:
    server.plan(PlannedFailure.server_error(in_stream=True), PlannedReply(text="recovered"))
    assert assembled(await chunks_of(model, ask())).items == (AssistantMessage("recovered"),)
    assert len(server.requests) == 2


async def test_a_persistent_failure_inside_the_stream_is_unavailable(
    model: OpenAIModel, server: OpenAIServer
) -> None:
    server.plan(*[PlannedFailure.server_error(in_stream=True)] * 4)
    error = (await failure_of(model)).error
    assert (error.reason, error.status_code) == ("unavailable", None)
    assert "server had an error" in error.message


async def test_a_stream_cut_before_any_delta_is_retried(
    model: OpenAIModel, server: OpenAIServer
) -> None:
    server.plan(PlannedReply(text="lost", drop_after=1), PlannedReply(text="whole"))
    assert assembled(await chunks_of(model, ask())).items == (AssistantMessage("whole"),)
    assert len(server.requests) == 2


async def test_a_stream_cut_after_deltas_fails_without_retrying(
    model: OpenAIModel, server: OpenAIServer
) -> None:
    server.plan(PlannedReply(text="abcdefgh", chunk_size=1, drop_after=6), PlannedReply(text="x"))
    received: list[ModelChunk] = []
    with pytest.raises(ModelError) as caught:
        async for chunk in model.stream(ask()):
            received.append(chunk)
    assert caught.value.error.reason == "unavailable"
    assert received and all(isinstance(chunk, TextChunk) for chunk in received)
    assert len(server.requests) == 1


async def test_a_consumer_may_stop_early(model: OpenAIModel, server: OpenAIServer) -> None:
    server.plan(PlannedReply(text="a long answer", chunk_size=1), PlannedReply(text="next"))
    async with aclosing(model.stream(ask())) as stream:
        async for _ in stream:
            break
    assert assembled(await chunks_of(model, ask())).items == (AssistantMessage("next"),)


async def test_an_exhausted_quota_is_rate_limited_but_not_retried(
    model: OpenAIModel, server: OpenAIServer
) -> None:
    message = "You exceeded your current quota, please check your plan and billing details."
    server.plan(PlannedFailure(429, message, type="insufficient_quota", code="insufficient_quota"))
    error = (await failure_of(model)).error
    assert (error.reason, error.status_code, error.message) == ("rate_limited", 429, message)
    assert len(server.requests) == 1


async def test_missing_credentials_fail_the_call_not_the_construction(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)  # OpenAI's own API: it needs a key
    model = OpenAIModel.chat("gpt-test")
    error = (await failure_of(model)).error
    assert error.reason == "bad_response"
    assert "api_key" in error.message


async def test_a_server_that_is_not_there_is_unavailable() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    model = OpenAIModel.chat(
        "m", base_url=f"http://127.0.0.1:{port}/v1", api_key="k", max_retries=2, backoff=FAST
    )
    error = (await failure_of(model)).error
    await model.aclose()
    assert error.reason == "unavailable"
    assert error.message.startswith("Connection error. (")


async def test_a_given_client_does_not_retry_on_its_own(server: OpenAIServer) -> None:
    client = openai.AsyncOpenAI(base_url=server.base_url, api_key="k", max_retries=5)
    model = OpenAIModel.chat("m", client=client, max_retries=0)
    server.plan(*[PlannedFailure.server_error()] * 6)
    assert (await failure_of(model)).error.reason == "unavailable"
    await client.close()
    assert len(server.requests) == 1


async def test_key_and_base_url_come_from_the_environment(
    server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "env-key")
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    model = OpenAIModel.chat("m")
    server.plan(PlannedReply(text="ok"))
    await chunks_of(model, ask())
    await model.aclose()
    assert server.requests[0].headers["authorization"] == "Bearer env-key"


# ------------------------------------------------------------------ request shape: chat

CONVERSATION = (
    UserMessage("Weather in Paris and Oslo?"),
    Reasoning("two cities, two calls"),
    AssistantMessage("Checking both."),
    ToolCall("call_1", "get_weather", '{"city": "Paris"}'),
    ToolCall("call_2", "get_weather", '{"city": "Oslo"}'),
    ToolResult("call_1", "18C"),
    ToolResult("call_2", "error: station offline", is_error=True, status="errored"),
    SystemMessage("Be brief."),
)


async def test_chat_request_shape(chat: OpenAIModel, server: OpenAIServer) -> None:
    server.plan(PlannedReply(text="Paris 18C."))
    settings = ModelSettings(temperature=0.2, max_output_tokens=256, parallel_tool_calls=False)
    request = ModelInput("You are a weather bot.", CONVERSATION, (WEATHER,), settings=settings)
    await chunks_of(chat, request)

    body = server.requests[0].body
    assert server.requests[0].path == "/v1/chat/completions"
    assert (body["model"], body["stream"]) == ("gpt-test", True)
    assert body["stream_options"] == {"include_usage": True}
    assert body["messages"] == [
        {"role": "system", "content": "You are a weather bot."},
        {"role": "user", "content": "Weather in Paris and Oslo?"},
        {
            "role": "assistant",
            "content": "Checking both.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                },
                {
                    "id": "call_2",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "18C"},
        {"role": "tool", "tool_call_id": "call_2", "content": "error: station offline"},
        {"role": "system", "content": "Be brief."},
    ]
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Current weather for a city.",
                "parameters": WEATHER.parameters,
            },
        }
    ]
    assert (body["temperature"], body["max_completion_tokens"]) == (0.2, 256)
    assert body["parallel_tool_calls"] is False
    assert "response_format" not in body and "top_p" not in body


async def test_chat_tool_calls_without_text_form_their_own_assistant_message(
    chat: OpenAIModel, server: OpenAIServer
) -> None:
    server.plan(PlannedReply(text="done"))
    items = (UserMessage("go"), ToolCall("c1", "f", "{}"), ToolResult("c1", "ok"))
    await chunks_of(chat, ModelInput("", items))
    assert server.requests[0].body["messages"] == [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
    ]


async def test_chat_finalize_request_has_format_and_no_tools(
    chat: OpenAIModel, server: OpenAIServer
) -> None:
    server.plan(PlannedReply(text='{"total": 3}'))
    request = ModelRequest("finalize", tools=False, response_format=REPORT_FORMAT)
    settings = ModelSettings(parallel_tool_calls=True)
    await chunks_of(chat, ask(tools=(WEATHER,), request=request, settings=settings))
    body = server.requests[0].body
    assert body["response_format"] == REPORT_FORMAT
    assert "tools" not in body and "parallel_tool_calls" not in body


async def test_chat_repair_and_prompt_become_a_final_instruction(
    chat: OpenAIModel, server: OpenAIServer
) -> None:
    server.plan(PlannedReply(text='{"total": 3}'))
    request = ModelRequest(
        "repair",
        tools=False,
        response_format=REPORT_FORMAT,
        prompt="Report the total.",
        repair_errors=("total: field required", "extra: not permitted"),
    )
    await chunks_of(chat, ask(request=request))
    assert server.requests[0].body["messages"][-1] == {
        "role": "system",
        "content": "Report the total.\n\nYour previous answer did not validate: "
        "total: field required; extra: not permitted. "
        "Answer again with JSON that matches the schema.",
    }


async def test_the_model_sees_the_conversation_from_the_latest_summary(
    chat: OpenAIModel, server: OpenAIServer
) -> None:
    server.plan(PlannedReply(text="ok"))
    items = (
        UserMessage("old question"),
        AssistantMessage("old answer"),
        CompactionSummary("The user asked about budgets."),
        UserMessage("and now?"),
    )
    await chunks_of(chat, ModelInput("Be kind.", items))
    assert server.requests[0].body["messages"] == [
        {"role": "system", "content": "Be kind."},
        {
            "role": "system",
            "content": "Summary of the conversation so far:\nThe user asked about budgets.",
        },
        {"role": "user", "content": "and now?"},
    ]


# ------------------------------------------------------------------ request shape: responses


async def test_responses_request_shape(responses: OpenAIModel, server: OpenAIServer) -> None:
    server.plan(PlannedReply(text="Paris 18C."))
    request = ModelInput(
        "You are a weather bot.", CONVERSATION, (WEATHER,), settings=ModelSettings(top_p=0.9)
    )
    await chunks_of(responses, request)

    body = server.requests[0].body
    assert server.requests[0].path == "/v1/responses"
    assert (body["model"], body["stream"], body["store"]) == ("gpt-test", True, False)
    assert body["instructions"] == "You are a weather bot."
    assert body["input"] == [
        {"type": "message", "role": "user", "content": "Weather in Paris and Oslo?"},
        {"type": "message", "role": "assistant", "content": "Checking both."},
        {
            "type": "function_call",
            "call_id": "call_1",
            "name": "get_weather",
            "arguments": '{"city": "Paris"}',
        },
        {
            "type": "function_call",
            "call_id": "call_2",
            "name": "get_weather",
            "arguments": '{"city": "Oslo"}',
        },
        {"type": "function_call_output", "call_id": "call_1", "output": "18C"},
        {"type": "function_call_output", "call_id": "call_2", "output": "error: station offline"},
        {"type": "message", "role": "system", "content": "Be brief."},
    ]
    assert body["tools"] == [
        {
            "type": "function",
            "name": "get_weather",
            "description": "Current weather for a city.",
            "parameters": WEATHER.parameters,
            "strict": False,
        }
    ]
    assert body["top_p"] == 0.9
    assert "text" not in body and "temperature" not in body


async def test_responses_format_goes_to_text_format_and_tools_are_left_out(
    responses: OpenAIModel, server: OpenAIServer
) -> None:
    server.plan(PlannedReply(text='{"total": 3}'))
    request = ModelRequest(
        "repair", tools=False, response_format=REPORT_FORMAT, repair_errors=("bad",)
    )
    await chunks_of(responses, ask(tools=(WEATHER,), request=request))
    body = server.requests[0].body
    assert body["text"] == {
        "format": {
            "type": "json_schema",
            "name": "Report",
            "schema": {"type": "object", "properties": {"total": {"type": "number"}}},
            "strict": True,
        }
    }
    assert "tools" not in body
    assert body["input"][-1]["role"] == "system"
    assert body["input"][-1]["content"].startswith("Your previous answer did not validate: bad.")


async def test_the_body_sent_is_the_one_the_clients_typed_call_sends(
    server: OpenAIServer,
) -> None:
    """The conversation is handed to the client as `extra_body` (so the client does not walk
    it against its parameter types on every call): the body on the wire is the same as the
    typed call's, with every parameter the adapters send."""
    request = ModelInput(
        "You are a weather bot.",
        CONVERSATION,
        (WEATHER,),
        ModelRequest("repair", response_format=REPORT_FORMAT, prompt="Report the total."),
        ModelSettings(temperature=0.2, top_p=0.9, max_output_tokens=256, parallel_tool_calls=True),
    )
    server.plan(*[PlannedReply(text="ok")] * 4)
    for build in (OpenAIModel.chat, OpenAIModel.responses):
        model = build("gpt-test", base_url=server.base_url, api_key="k")
        await chunks_of(model, request)
        await model.aclose()
    async with openai.AsyncOpenAI(base_url=server.base_url, api_key="k") as client:
        chat = await client.chat.completions.create(
            model="gpt-test",
            messages=chat_messages(request),
            stream=True,
            stream_options={"include_usage": True},
            tools=chat_tools(request.tools),
            parallel_tool_calls=True,
            response_format=REPORT_FORMAT,  # type: ignore[arg-type]
            temperature=0.2,
            top_p=0.9,
            max_completion_tokens=256,
        )
        async for _ in chat:
            pass
        responses = await client.responses.create(
            model="gpt-test",
            instructions="You are a weather bot.",
            input=responses_input(request),
            stream=True,
            store=False,
            tools=responses_tools(request.tools),
            parallel_tool_calls=True,
            text=text_config(REPORT_FORMAT),
            temperature=0.2,
            top_p=0.9,
            max_output_tokens=256,
        )
        async for _ in responses:
            pass
    ours_chat, ours_responses, typed_chat, typed_responses = (r.body for r in server.requests)
    assert ours_chat == typed_chat
    assert ours_responses == typed_responses
    assert ours_chat["messages"][-1]["content"] == "Report the total."


async def test_settings_given_to_the_model_are_defaults(server: OpenAIServer) -> None:
    defaults = ModelSettings(temperature=0.7, max_output_tokens=100)
    model = OpenAIModel.responses("m", base_url=server.base_url, api_key="k", settings=defaults)
    server.plan(PlannedReply(text="ok"))
    await chunks_of(model, ask(settings=ModelSettings(temperature=0.0)))
    await model.aclose()
    body = server.requests[0].body
    assert (body["temperature"], body["max_output_tokens"]) == (0.0, 100)


# ------------------------------------------------------------------ backoff


@pytest.mark.parametrize(
    ("attempt", "retry_after", "low", "high"),
    [
        (0, None, 0.5, 1.0),
        (2, None, 2.0, 4.0),
        (10, None, 4.0, 8.0),
        (0, 3.0, 3.0, 3.0),
        (0, 60.0, 8.0, 8.0),
    ],
)
def test_backoff_doubles_and_is_capped(
    attempt: int, retry_after: float | None, low: float, high: float
) -> None:
    assert low <= Backoff(1.0, 8.0).delay(attempt, retry_after) <= high


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
        ({"retry-after": "2"}, 2.0),
        ({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, 0.0),
        ({"retry-after": "soon"}, None),
        ({}, None),
    ],
)
def test_retry_after_headers(headers: dict[str, str], seconds: float | None) -> None:
    assert retry_after(headers) == seconds


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"retry-after": "nan"}, None),
        ({"retry-after": "NaN"}, None),
        ({"retry-after-ms": "nan"}, None),
        ({"retry-after": "inf"}, None),
        ({"retry-after": "-inf"}, None),
        ({"retry-after": "1e999"}, None),
        ({"retry-after-ms": "-Infinity"}, None),
        ({"retry-after-ms": "nan", "retry-after": "2"}, 2.0),
        ({"retry-after": "-5"}, 0.0),
        ({"retry-after": "1e308"}, 1e308),
        ({"retry-after": "0x10"}, None),
        ({"retry-after": "\x00garbage"}, None),
        ({"retry-after": "Wed, 99 Foo 2015 07:28:00 GMT"}, None),
    ],
)
def test_retry_after_reads_hostile_headers_as_finite_or_none(
    headers: dict[str, str], seconds: float | None
) -> None:
    assert retry_after(headers) == seconds


def test_retry_after_reads_a_far_future_date_as_finite_seconds() -> None:
    seconds = retry_after({"retry-after": "Fri, 31 Dec 9999 23:59:59 GMT"})
    assert seconds is not None and math.isfinite(seconds) and seconds > 0


@pytest.mark.parametrize(
    ("retry_after_seconds", "low", "high"),
    [
        (math.nan, 0.0, 8.0),
        (math.inf, 8.0, 8.0),
        (-math.inf, 0.0, 0.0),
        (-3.0, 0.0, 0.0),
        (1e308, 8.0, 8.0),
    ],
)
def test_backoff_clamps_any_retry_after_to_zero_and_max_delay(
    retry_after_seconds: float, low: float, high: float
) -> None:
    delay = Backoff(1.0, 8.0).delay(0, retry_after_seconds)
    assert low <= delay <= high


@pytest.mark.parametrize("bad", [math.nan, math.inf, -1.0])
def test_backoff_refuses_delays_that_are_not_finite_non_negative_seconds(bad: float) -> None:
    with pytest.raises(ValueError, match="Backoff"):
        Backoff(max_delay=bad)
    with pytest.raises(ValueError, match="Backoff"):
        Backoff(base_delay=bad)


@pytest.mark.parametrize("header", ["nan", "inf", "-1", "1e999", "1e308", "garbage"])
async def test_a_hostile_retry_after_does_not_stall_the_call(
    model: OpenAIModel, server: OpenAIServer, header: str
) -> None:
    hostile = PlannedFailure(
        429,
        "Rate limit reached.",
        code="rate_limit_exceeded",
        headers={"retry-after": header, "retry-after-ms": header},
    )
    server.plan(hostile, PlannedReply(text="ok"))
    started = time.monotonic()
    chunks = await asyncio.wait_for(chunks_of(model, ask()), timeout=5)
    assert assembled(chunks).items == (AssistantMessage("ok"),)
    assert time.monotonic() - started < 2
    assert len(server.requests) == 2
