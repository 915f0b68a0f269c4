"""The driver running real tools: concurrency and its cap, result order, bad input, fatal
errors, the turn limit, and streamed arguments that must be complete before a call runs.

Concurrency is observed with counters and `asyncio.Event` gates, never with timing.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from driver_support import ChunkModel, ends_once, settle, types

from helikon import (
    Agent,
    AssistantMessage,
    FatalToolError,
    MaxTurnsExceeded,
    RunCompleted,
    RunConfig,
    RunContext,
    RunError,
    RunFailed,
    ScriptedModel,
    ScriptedTurn,
    ToolCall,
    ToolCallDelta,
    ToolContext,
    ToolFailed,
    ToolOutputItem,
    ToolResult,
    tool,
)
from helikon.core import ModelOutputTruncated
from helikon.models.base import FinishChunk, TextChunk, ToolCallChunk


def call(call_id: str, name: str, arguments: str) -> ToolCall:
    return ToolCall(call_id, name, arguments)


def results_in(items: object) -> list[ToolResult]:
    return [item for item in items if isinstance(item, ToolResult)]  # type: ignore[attr-defined]


# -- concurrency ----------------------------------------------------------------------------


class Gauge:
    """Counts tool calls in flight; holds them all at one gate until the test opens it."""

    def __init__(self, expect: int) -> None:
        self.active = 0
        self.peak = 0
        self.expect = expect
        self.reached = asyncio.Event()
        self.gate = asyncio.Event()

    async def hold(self) -> None:
        self.active += 1
        self.peak = max(self.peak, self.active)
        if self.active >= self.expect:
            self.reached.set()
        try:
            await self.gate.wait()
        finally:
            self.active -= 1


@pytest.mark.parametrize(("limit", "calls"), [(1, 3), (2, 5), (3, 3), (None, 4)])
async def test_peak_concurrency_equals_the_parallel_tool_call_limit(
    limit: int | None, calls: int
) -> None:
    expected_peak = calls if limit is None else min(limit, calls)
    gauge = Gauge(expected_peak)

    @tool
    async def slow(n: int) -> str:
        """Wait at the gate, then echo n."""
        await gauge.hold()
        return f"done {n}"

    batch = [call(f"c{n}", "slow", json.dumps({"n": n})) for n in range(calls)]
    agent = Agent(
        "worker",
        ScriptedModel([batch, "all done"]),
        tools=[slow],
        config=RunConfig(parallel_tool_call_limit=limit),
    )
    running = asyncio.create_task(agent.run("go").collect())

    await gauge.reached.wait()
    await settle()  # any call the cap failed to hold back would start now
    assert gauge.active == expected_peak
    gauge.gate.set()
    result = await running

    assert gauge.peak == expected_peak
    outputs = [e.item for e in result.events if isinstance(e, ToolOutputItem)]
    assert outputs == [ToolResult(f"c{n}", f"done {n}") for n in range(calls)]


async def test_results_keep_the_call_order_whatever_order_the_calls_finish_in() -> None:
    gates = {name: asyncio.Event() for name in ("a", "b", "c")}
    started: list[str] = []
    finished: list[str] = []

    @tool
    async def wait_for(name: str) -> str:
        """Wait for the named gate."""
        started.append(name)
        await gates[name].wait()
        finished.append(name)
        return name.upper()

    batch = [call(f"id-{n}", "wait_for", json.dumps({"name": n})) for n in ("a", "b", "c")]
    model = ScriptedModel([batch, "ok"])
    agent = Agent("worker", model, tools=[wait_for])
    running = asyncio.create_task(agent.run("go").collect())

    while len(started) < 3:
        await asyncio.sleep(0)
    for name in ("c", "b", "a"):
        gates[name].set()
        while finished[-1:] != [name]:
            await asyncio.sleep(0)
    result = await running

    assert finished == ["c", "b", "a"]
    expected = [ToolResult("id-a", "A"), ToolResult("id-b", "B"), ToolResult("id-c", "C")]
    assert [e.item for e in result.events if isinstance(e, ToolOutputItem)] == expected
    assert results_in(model.requests[1].items) == expected


async def test_sync_tools_run_off_the_event_loop_and_in_the_batch() -> None:
    @tool
    def shout(text: str) -> str:
        """Upper-case the text."""
        return text.upper()

    batch = [call("c1", "shout", '{"text": "hi"}'), call("c2", "shout", '{"text": "yo"}')]
    agent = Agent("worker", ScriptedModel([batch, "ok"]), tools=[shout])

    result = await agent.run("go").collect()

    outputs = [e.item for e in result.events if isinstance(e, ToolOutputItem)]
    assert outputs == [ToolResult("c1", "HI"), ToolResult("c2", "YO")]


async def test_a_tool_receives_the_runs_context() -> None:
    seen: list[ToolContext[Any]] = []

    @tool
    async def whoami(context: ToolContext[Any], greeting: str) -> str:
        """Report the context."""
        seen.append(context)
        return f"{greeting} {context.deps['user']}"

    agent = Agent(
        "host", ScriptedModel([[call("c1", "whoami", '{"greeting": "hi"}')], "ok"]), tools=[whoami]
    )
    result = agent.run("go", context=RunContext.ephemeral({"user": "ann"}), run_id="run-7")

    await result.collect()

    (context,) = seen
    assert (context.run_id, context.call_id, context.agent) == ("run-7", "c1", "host")
    assert context.idempotency_key == "run-7:2:c1"  # run, the step that ran the batch, call
    assert ToolOutputItem(ToolResult("c1", "hi ann")) in result.events
    assert "context" not in whoami.spec.parameters["properties"]


# -- bad input is the model's to fix --------------------------------------------------------


@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
async def crash(reason: str) -> str:
    """Raise an ordinary exception."""
    raise RuntimeError(reason)


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        (call("c1", "add", '{"a": "one", "b": 2}'), "a: Input should be a valid integer"),
        (call("c1", "add", '{"a": 1'), "not valid JSON"),
        (call("c1", "add", '{"a": 1, "b": 2, "c": 3}'), "c: Extra inputs"),
        (call("c1", "subtract", '{"a": 1, "b": 2}'), "unknown tool 'subtract'"),
        (call("c1", "crash", '{"reason": "disk on fire"}'), "disk on fire"),
    ],
    ids=["wrong-type", "not-json", "extra-field", "unknown-tool", "tool-raises"],
)
async def test_bad_tool_input_goes_back_to_the_model_and_the_run_continues(
    bad: ToolCall, says: str
) -> None:
    model = ScriptedModel([[bad], [call("c2", "add", '{"a": 1, "b": 2}')], "3"])
    agent = Agent("calc", model, tools=[add, crash])

    result = await agent.run("1 + 2?").collect()

    assert result.final_output == "3"
    error, fixed = results_in(model.requests[2].items)
    assert error.call_id == "c1"
    assert error.is_error
    assert error.status == "errored"
    assert says in error.content
    assert error in results_in(model.requests[1].items)
    assert fixed == ToolResult("c2", "3")


async def test_a_fatal_tool_error_fails_the_run_with_tool_failed() -> None:
    @tool
    async def explode() -> str:
        """Fail the whole run."""
        raise FatalToolError("the vault is sealed")

    model = ScriptedModel([[call("c1", "explode", "{}")], "never"])
    agent = Agent("worker", model, tools=[explode])
    streaming = agent.run("go")

    with pytest.raises(RunError) as raised:
        await streaming.collect()

    assert raised.value.error == ToolFailed("explode", "c1", "the vault is sealed")
    assert ends_once(streaming.events, RunFailed).error == raised.value.error
    assert len(model.requests) == 1


async def test_a_fatal_tool_error_cancels_the_other_calls_in_flight() -> None:
    cancelled: list[str] = []
    waiting = asyncio.Event()

    @tool
    async def linger() -> str:
        """Wait forever."""
        try:
            waiting.set()
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append("linger")
            raise
        return "unreachable"

    @tool
    async def explode() -> str:
        """Fail the whole run once the other call is in flight."""
        await waiting.wait()
        raise FatalToolError("boom")

    before = asyncio.all_tasks()
    batch = [call("c1", "linger", "{}"), call("c2", "explode", "{}")]
    streaming = Agent("worker", ScriptedModel([batch]), tools=[linger, explode]).run("go")

    with pytest.raises(RunError) as raised:
        await streaming.collect()

    assert raised.value.error == ToolFailed("explode", "c2", "boom")
    assert cancelled == ["linger"]
    assert asyncio.all_tasks() == before
    run = streaming.run
    assert run is not None
    assert [r.call_id for r in results_in(run.conversation.items())] == ["c1", "c2"]


async def test_the_turn_limit_keeps_the_last_tool_outputs_before_failing() -> None:
    model = ScriptedModel([[call("c1", "add", '{"a": 1, "b": 1}')], "never reached"])
    agent = Agent("calc", model, tools=[add], config=RunConfig(max_turns=1))
    streaming = agent.run("go")

    with pytest.raises(RunError) as raised:
        await streaming.collect()

    assert raised.value.error == MaxTurnsExceeded(max_turns=1)
    assert types(streaming.events)[-2:] == ["tool_output_item", "run_failed"]
    assert streaming.events[-2] == ToolOutputItem(ToolResult("c1", "2"))
    ends_once(streaming.events, RunFailed)
    run = streaming.run
    assert run is not None
    assert run.conversation.items()[-1] == ToolResult("c1", "2")
    assert len(model.requests) == 1, "no call beyond max_turns"


# -- streamed arguments ---------------------------------------------------------------------


def fragments(call_id: str, name: str, arguments: str) -> list[ToolCallChunk]:
    """One chunk per character; the name only on the first, as providers stream it."""
    return [
        ToolCallChunk(call_id, char, name if index == 0 else None)
        for index, char in enumerate(arguments)
    ]


async def test_a_call_runs_only_once_its_streamed_arguments_are_complete() -> None:
    log: list[str] = []

    @tool
    async def record(city: str, days: int) -> str:
        """Record what the call received."""
        log.append(f"ran {city} {days}")
        return "noted"

    first = fragments("c1", "record", '{"city": "Oslo", "days": 3}')
    second = fragments("c2", "record", '{"city": "Rome", "days": 12}')
    interleaved: list[object] = []
    for index in range(max(len(first), len(second))):
        for chunks in (first, second):
            if index < len(chunks):
                interleaved.append(chunks[index])
                interleaved.append(lambda: log.append("fragment"))
    interleaved.append(FinishChunk("tool_calls"))
    model = ChunkModel([interleaved, [TextChunk("ok"), FinishChunk("stop")]])
    agent = Agent("travel", model, tools=[record])

    result = await agent.run("plan").collect()

    fragment_count = len(first) + len(second)
    assert log[:fragment_count] == ["fragment"] * fragment_count
    assert sorted(log[fragment_count:]) == ["ran Oslo 3", "ran Rome 12"]
    deltas = [e for e in result.events if isinstance(e, ToolCallDelta)]
    assert len(deltas) == fragment_count
    assert {d.call_id for d in deltas} == {"c1", "c2"}
    by_call = {
        cid: "".join(d.arguments_delta for d in deltas if d.call_id == cid) for cid in ("c1", "c2")
    }
    assert by_call == {"c1": '{"city": "Oslo", "days": 3}', "c2": '{"city": "Rome", "days": 12}'}
    assert result.final_output == "ok"


async def test_a_truncated_response_with_incomplete_arguments_fails_and_runs_nothing() -> None:
    ran: list[str] = []

    @tool
    async def record(city: str) -> str:
        """Record the city."""
        ran.append(city)
        return "noted"

    truncated = ScriptedTurn(
        [AssistantMessage("Booking "), call("c1", "record", '{"city": "Os')],
        finish_reason="length",
    )
    model = ScriptedModel([truncated, "never"])
    streaming = Agent("travel", model, tools=[record]).run("book")

    with pytest.raises(RunError) as raised:
        await streaming.collect()

    assert raised.value.error == ModelOutputTruncated("Booking ")
    assert ran == []
    assert len(model.requests) == 1
    assert "tool_call_item" not in types(streaming.events)
    ends_once(streaming.events, RunFailed)


async def test_a_length_cut_after_a_complete_call_runs_only_the_complete_call() -> None:
    ran: list[str] = []

    @tool
    async def record(city: str) -> str:
        """Record the city."""
        ran.append(city)
        return "noted"

    cut = ScriptedTurn(
        [call("c1", "record", '{"city": "Oslo"}'), call("c2", "record", '{"city": "Ro')],
        finish_reason="length",
    )
    model = ScriptedModel([cut, "done"])
    streaming = Agent("travel", model, tools=[record]).run("book")

    result = await streaming.collect()

    assert ran == ["Oslo"]
    complete, cut_off = results_in(model.requests[1].items)
    assert complete == ToolResult("c1", "noted")
    assert cut_off.call_id == "c2" and cut_off.is_error
    assert ends_once(result.events, RunCompleted).output.text == "done"
