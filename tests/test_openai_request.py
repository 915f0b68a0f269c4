"""Requests built incrementally: each item converted once, the same body as built whole.

The adapters keep each item's wire form in the conversation's memo (`WireLog`). These tests
grow a run's conversation at random and compare every request with a plain reference
conversion of the same items, check that a message list handed out is never changed by
later appends, and run the real driver against the local wire server through a compaction.
"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helikon import Agent, RunConfig, tool
from helikon.core.items import (
    AssistantMessage,
    CompactionSummary,
    Item,
    Reasoning,
    SystemMessage,
    ToolCall,
    ToolResult,
    UserMessage,
)
from helikon.core.state import ModelRequest
from helikon.models.base import ModelChunk, ModelInput
from helikon.models.openai import OpenAIModel
from helikon.models.openai_chat import chat_messages
from helikon.models.openai_request import extra_instruction
from helikon.models.openai_responses import responses_input
from helikon.models.window import Window
from helikon.run.conversation import Conversation
from helikon.testing import OpenAIServer, PlannedReply, PlannedToolCall, PlannedUsage

PREFIX = "Summary of the conversation so far:\n"

# ------------------------------------------------------------------ the reference


def view(items: Sequence[Item]) -> list[Item]:
    """From the latest summary on."""
    found = [i for i, item in enumerate(items) if isinstance(item, CompactionSummary)]
    return list(items[found[-1] :] if found else items)


def reference_chat(instructions: str, items: Sequence[Item]) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    if instructions:
        messages.append({"role": "system", "content": instructions})
    assistant: dict[str, Any] | None = None
    for item in view(items):
        if isinstance(item, Reasoning):
            continue
        if isinstance(item, ToolCall):
            if assistant is None:
                assistant = {"role": "assistant"}
                messages.append(assistant)
            assistant.setdefault("tool_calls", []).append(
                {
                    "id": item.call_id,
                    "type": "function",
                    "function": {"name": item.name, "arguments": item.arguments},
                }
            )
            continue
        assistant = None
        if isinstance(item, AssistantMessage):
            assistant = {"role": "assistant", "content": item.content}
            messages.append(assistant)
        elif isinstance(item, UserMessage):
            messages.append({"role": "user", "content": item.content})
        elif isinstance(item, ToolResult):
            messages.append({"role": "tool", "tool_call_id": item.call_id, "content": item.content})
        elif isinstance(item, CompactionSummary):
            messages.append({"role": "system", "content": PREFIX + item.content})
        else:
            messages.append({"role": "system", "content": item.content})
    return messages


def reference_responses(items: Sequence[Item]) -> list[dict[str, Any]]:
    inputs: list[dict[str, Any]] = []
    for item in view(items):
        if isinstance(item, ToolCall):
            inputs.append(
                {
                    "type": "function_call",
                    "call_id": item.call_id,
                    "name": item.name,
                    "arguments": item.arguments,
                }
            )
        elif isinstance(item, ToolResult):
            inputs.append(
                {"type": "function_call_output", "call_id": item.call_id, "output": item.content}
            )
        elif not isinstance(item, Reasoning):
            role = {UserMessage: "user", AssistantMessage: "assistant"}.get(type(item), "system")
            text = PREFIX + item.content if isinstance(item, CompactionSummary) else item.content
            inputs.append({"type": "message", "role": role, "content": text})
    return inputs


def both(window: Sequence[Item]) -> tuple[list[Any], list[Any]]:
    request = ModelInput("Be terse.", window)
    return chat_messages(request), responses_input(request)


def expected(window: Sequence[Item]) -> tuple[list[Any], list[Any]]:
    items = tuple(window)
    return reference_chat("Be terse.", items), reference_responses(items)


# ------------------------------------------------------------------ random conversations

texts = st.sampled_from(["a", "b", "ok", ""])
ids = st.sampled_from(["c1", "c2", "c3"])
items = st.one_of(
    st.builds(UserMessage, texts),
    st.builds(SystemMessage, texts),
    st.builds(AssistantMessage, texts),
    st.builds(Reasoning, texts),
    st.builds(ToolCall, ids, st.just("f"), st.just("{}")),
    st.builds(ToolResult, ids, texts),
    st.builds(CompactionSummary, texts),
)
batches = st.lists(st.lists(items, max_size=5), min_size=1, max_size=12)


@settings(max_examples=300, deadline=None)
@given(batches)
def test_every_request_of_a_growing_conversation_is_the_one_built_whole(
    appends: list[list[Item]],
) -> None:
    conversation = Conversation()
    given_out: list[tuple[Any, Any]] = []  # (a result, a deep copy of it when it was made)
    windows = []
    for batch in appends:
        conversation.extend(batch)
        window = conversation.window()
        built = both(window)
        assert built == expected(window)
        given_out.append((built, copy.deepcopy(built)))
        windows.append(window)
    for built, then in given_out:
        assert built == then  # later appends changed nothing already handed out
    for window in windows:  # an older window, after the log has grown past it
        assert both(window) == expected(window)


@settings(max_examples=200, deadline=None)
@given(st.lists(items, max_size=14), st.data())
def test_any_window_onto_the_log_is_the_one_built_whole(log: list[Item], data: Any) -> None:
    """Windows the driver does not make (any start, any end) over one shared memo."""
    memo: dict[str, Any] = {}
    for _ in range(4):
        end = data.draw(st.integers(0, len(log)))
        start = data.draw(st.integers(0, end))
        window = Window(log, start, end, memo)
        assert both(window) == expected(window)


def test_a_tool_call_that_arrives_later_joins_a_copy_of_the_message_already_sent() -> None:
    conversation = Conversation([UserMessage("go"), AssistantMessage("Checking.")])
    first, _ = both(conversation.window())
    conversation.extend([ToolCall("c1", "f", "{}")])
    second, _ = both(conversation.window())
    assert first[-1] == {"role": "assistant", "content": "Checking."}
    assert second[-1]["tool_calls"][0]["id"] == "c1"
    assert second[1] is first[1]  # the user message was converted once


def test_a_window_at_a_summary_sends_the_summary_on() -> None:
    conversation = Conversation([UserMessage("old"), ToolCall("c1", "f", "{}")])
    both(conversation.window())
    conversation.extend([ToolResult("c1", "ok"), CompactionSummary("so far"), UserMessage("now")])
    chat, responses = both(conversation.window())
    assert chat == [
        {"role": "system", "content": "Be terse."},
        {"role": "system", "content": PREFIX + "so far"},
        {"role": "user", "content": "now"},
    ]
    assert responses == [
        {"type": "message", "role": "system", "content": PREFIX + "so far"},
        {"type": "message", "role": "user", "content": "now"},
    ]


# ------------------------------------------------------------------ the driver, on the wire


class Recording:
    """Passes each call on to the model, keeping the items and request it was given."""

    def __init__(self, model: OpenAIModel) -> None:
        self.model = model
        self.inputs: list[tuple[tuple[Item, ...], ModelRequest]] = []

    def stream(self, request: ModelInput) -> AsyncIterator[ModelChunk]:
        self.inputs.append((tuple(request.items), request.request))
        return self.model.stream(request)


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as running:
        yield running


@pytest.fixture(params=["chat", "responses"])
async def model(request: pytest.FixtureRequest, server: OpenAIServer) -> AsyncIterator[OpenAIModel]:
    built = OpenAIModel("gpt-test", api=request.param, base_url=server.base_url, api_key="k")
    yield built
    await built.aclose()


@tool
def lookup(topic: str) -> str:
    """Look a topic up."""
    return f"facts about {topic}"


def calls(turn: int, width: int, usage: PlannedUsage | None = None) -> PlannedReply:
    return PlannedReply(
        text="Looking." if turn % 2 else "",
        tool_calls=[
            PlannedToolCall("lookup", f'{{"topic": "t{turn}{j}"}}', f"c{turn}{j}")
            for j in range(width)
        ],
        usage=usage or PlannedUsage(10, 5),
    )


async def test_each_request_of_a_run_through_a_compaction_is_the_one_built_whole(
    model: OpenAIModel, server: OpenAIServer
) -> None:
    """Turns of parallel calls, a compaction (the context crosses the threshold), more
    turns, the answer: every body sent is what the reference builds from the items that call
    was given, and the calls after the compaction are given the summary on."""
    server.plan(
        calls(0, 2),
        calls(1, 3),
        calls(2, 1, PlannedUsage(1000, 5)),
        PlannedReply(text="Topics were looked up."),  # the summary
        calls(3, 2),
        calls(4, 1),
        PlannedReply(text="Done."),
    )
    recording = Recording(model)
    config = RunConfig(compaction_threshold=950)
    agent = Agent("researcher", recording, instructions="Be terse.", tools=[lookup], config=config)

    result = await agent.run("Look things up.").collect()

    assert result.final_output == "Done."
    purposes = [request.purpose for _, request in recording.inputs]
    assert purposes == ["turn", "turn", "turn", "compact", "turn", "turn", "turn"]
    summary = CompactionSummary("Topics were looked up.")
    assert [items[0] == summary for items, _ in recording.inputs] == [False] * 4 + [True] * 3
    assert len(server.requests) == len(recording.inputs)
    for sent, (items, request) in zip(server.requests, recording.inputs, strict=True):
        extra = extra_instruction(request)
        if model.api == "chat":
            want = reference_chat("Be terse.", items)
            want += [{"role": "system", "content": extra}] if extra else []
            assert sent.body["messages"] == want
        else:
            want = reference_responses(items)
            want += [{"type": "message", "role": "system", "content": extra}] if extra else []
            assert sent.body["input"] == want
