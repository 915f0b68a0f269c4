"""The driver end to end: the event stream, `collect()`, structured output, model errors,
manual stepping, snapshots mid-run, and the sync helpers. ScriptedModel, real tools, no network.
"""

from __future__ import annotations

from typing import Any

import pytest
from driver_support import ChunkModel, drain, ends_once, types
from pydantic import BaseModel

from helikon import (
    Agent,
    AgentEvent,
    AssistantMessage,
    FinalOutput,
    MaxTurnsExceeded,
    MessageOutput,
    ModelError,
    RepairStarted,
    Run,
    RunCompleted,
    RunConfig,
    RunError,
    RunFailed,
    Runner,
    RunResult,
    RunResultStreaming,
    RunSnapshot,
    ScriptedModel,
    ScriptedTurn,
    StructuredOutputFailed,
    TokenDelta,
    ToolCall,
    ToolCallDelta,
    ToolCallItem,
    ToolOutputItem,
    ToolResult,
    TurnStarted,
    Usage,
    UserMessage,
    run_sync,
    tool,
)
from helikon.core import InvalidStructuredOutput, ModelCallFailed
from helikon.core.codec import dumps, loads
from helikon.models.base import FinishChunk, ModelInput, TextChunk, UsageChunk

REFERENCE = [
    "run_started",
    "turn_started",
    "tool_call_delta",
    "tool_call_item",
    "tool_output_item",
    "turn_started",
    "token_delta",
    "message_output",
    "run_completed",
]


@tool
async def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: the first.
        b: the second.
    """
    return a + b


def calculator(*turns: object, config: RunConfig | None = None, **kwargs: object) -> Agent:
    model = ScriptedModel(list(turns))  # type: ignore[arg-type]
    return Agent("calc", model, tools=[add], config=config or RunConfig(), **kwargs)  # type: ignore[arg-type]


def add_call(call_id: str = "c1", a: int = 1, b: int = 2) -> ToolCall:
    return ToolCall(call_id, "add", f'{{"a": {a}, "b": {b}}}')


# -- the reference sequence -------------------------------------------------------------------


async def test_the_reference_sequence_of_a_tool_turn_then_a_text_answer() -> None:
    agent = calculator([add_call()], "The sum is 3.")

    events = await drain(agent.run("What is 1 + 2?"))

    assert types(events) == REFERENCE
    assert events[1] == TurnStarted(0)
    assert [e.turn for e in events if isinstance(e, TurnStarted)] == [0, 1]
    deltas = [e for e in events if isinstance(e, ToolCallDelta)]
    assert len(deltas) >= 2, "ScriptedModel streams the arguments in fragments"
    assert all(delta.call_id == "c1" for delta in deltas)
    assert "".join(delta.arguments_delta for delta in deltas) == '{"a": 1, "b": 2}'
    assert [e.item for e in events if isinstance(e, ToolCallItem)] == [add_call()]
    assert [e.item for e in events if isinstance(e, ToolOutputItem)] == [ToolResult("c1", "3")]
    assert "".join(e.text for e in events if isinstance(e, TokenDelta)) == "The sum is 3."
    message = next(e for e in events if isinstance(e, MessageOutput))
    assert message.item.content == "The sum is 3."
    assert ends_once(events, RunCompleted).output.text == "The sum is 3."


async def test_collect_returns_the_final_output_events_usage_and_output() -> None:
    turn_usage = Usage(input_tokens=10, output_tokens=4, total_tokens=14, requests=1)
    agent = calculator(
        ScriptedTurn([add_call()], usage=turn_usage),
        ScriptedTurn([AssistantMessage("3")], usage=turn_usage),
    )
    streaming = agent.run("1 + 2?")

    result = await streaming.collect()

    assert isinstance(result, RunResult)
    assert result.final_output == "3"
    assert types(result.events) == REFERENCE
    assert list(result.events) == streaming.events
    assert result.usage == turn_usage + turn_usage
    assert result.output == FinalOutput("3", None, turn_usage + turn_usage)
    assert not result.suspended
    assert result.snapshot is None


async def test_the_model_sees_the_tool_result_and_the_tools_on_its_next_call() -> None:
    model = ScriptedModel([[add_call()], "3"])
    agent = Agent("calc", model, instructions="Be exact.", tools=[add])

    await agent.run("1 + 2?").collect()

    first, second = model.requests
    assert first.instructions == "Be exact."
    assert [spec.name for spec in first.tools] == ["add"]
    assert list(first.items) == [UserMessage("1 + 2?")]
    assert list(second.items) == [UserMessage("1 + 2?"), add_call(), ToolResult("c1", "3")]


async def test_a_failed_run_raises_run_error_with_the_agent_error() -> None:
    agent = calculator([add_call("c1")], [add_call("c2")], config=RunConfig(max_turns=2))
    streaming = agent.run("loop forever")

    with pytest.raises(RunError) as raised:
        await streaming.collect()

    assert raised.value.error == MaxTurnsExceeded(max_turns=2)
    assert ends_once(streaming.events, RunFailed).error == MaxTurnsExceeded(max_turns=2)


async def test_a_text_answer_on_the_last_allowed_call_completes() -> None:
    agent = calculator([add_call()], "3", config=RunConfig(max_turns=2))

    result = await agent.run("1 + 2?").collect()

    assert result.final_output == "3"


# -- structured output ----------------------------------------------------------------------


class Report(BaseModel):
    total: int
    note: str


async def test_collect_typed_runs_a_finalizing_turn_for_the_output_type() -> None:
    model = ScriptedModel([[add_call()], "It is 3.", '{"total": 3, "note": "added"}'])
    agent = Agent("calc", model, tools=[add], output_type=Report)
    streaming = agent.run("1 + 2?")

    report = await streaming.collect_typed(Report)

    assert report == Report(total=3, note="added")
    assert [e.turn for e in streaming.events if isinstance(e, TurnStarted)] == [0, 1, 2]
    assert len(model.requests) == 3
    turn, _, final = model.requests
    assert turn.request.purpose == "turn" and turn.tools
    assert final.request.purpose == "finalize"
    assert final.tools == ()
    assert final.request.response_format is not None
    assert final.request.response_format["type"] == "json_schema"
    schema = final.request.response_format["json_schema"]["schema"]
    assert set(schema["properties"]) == {"total", "note"}
    assert AssistantMessage("It is 3.", "calc") in list(final.items)


async def test_an_agent_with_only_an_output_type_finalizes_on_its_first_call() -> None:
    model = ScriptedModel(['{"total": 5, "note": "direct"}'])
    agent = Agent("reporter", model, output_type=Report)

    report = await agent.run("report").collect_typed(Report)

    assert report == Report(total=5, note="direct")
    assert [request.request.purpose for request in model.requests] == ["finalize"]


async def test_invalid_output_is_repaired_once() -> None:
    model = ScriptedModel(["done", "not json", '{"total": 1, "note": "fixed"}'])
    agent = Agent("calc", model, tools=[add], output_type=Report)
    streaming = agent.run("report")

    report = await streaming.collect_typed(Report)

    assert report == Report(total=1, note="fixed")
    repairs = [e for e in streaming.events if isinstance(e, RepairStarted)]
    assert [r.attempt for r in repairs] == [1]
    assert repairs[0].errors
    repair = model.requests[2]
    assert repair.request.purpose == "repair"
    assert repair.request.repair_errors == repairs[0].errors
    assert repair.tools == ()
    assert repair.request.response_format is not None


async def test_output_still_invalid_after_the_repair_fails_the_run() -> None:
    model = ScriptedModel(["done", '{"total": "many"}', '{"note": "still no total"}'])
    agent = Agent("calc", model, tools=[add], output_type=Report)
    streaming = agent.run("report")

    with pytest.raises(RunError) as raised:
        await streaming.collect_typed(Report)

    error = raised.value.error
    assert isinstance(error, InvalidStructuredOutput)
    assert error.raw == '{"note": "still no total"}'
    assert len(model.requests) == 3, "exactly one repair turn"
    failed = [e for e in streaming.events if isinstance(e, StructuredOutputFailed)]
    assert len(failed) == 1 and failed[0].raw == error.raw
    assert types(streaming.events)[-3:] == [
        "message_output",
        "structured_output_failed",
        "run_failed",
    ]
    assert ends_once(streaming.events, RunFailed).error == error


# -- model errors ---------------------------------------------------------------------------


async def test_a_scripted_model_running_out_of_turns_fails_the_run() -> None:
    agent = calculator([add_call()])
    streaming = agent.run("1 + 2?")

    with pytest.raises(RunError) as raised:
        await streaming.collect()

    error = raised.value.error
    assert isinstance(error, ModelCallFailed)
    assert error.reason == "exhausted"
    assert ends_once(streaming.events, RunFailed).error == error


class RateLimitedModel:
    """Streams a little text, then fails the way a provider adapter reports a 429."""

    async def stream(self, request: ModelInput):  # type: ignore[no-untyped-def]
        yield TextChunk("Let me ")
        raise ModelError(ModelCallFailed("rate_limited", "slow down", 429))


async def test_a_model_error_mid_stream_fails_the_run_with_that_error() -> None:
    agent = Agent("calc", RateLimitedModel())
    streaming = agent.run("hi")

    with pytest.raises(RunError) as raised:
        await streaming.collect()

    assert raised.value.error == ModelCallFailed("rate_limited", "slow down", 429)
    assert TokenDelta("Let me ") in streaming.events
    assert ends_once(streaming.events, RunFailed).error == raised.value.error


async def test_a_model_that_raises_something_else_fails_the_run_as_a_bad_response() -> None:
    agent = Agent("calc", ChunkModel([[TextChunk("x"), lambda: 1 / 0]]))

    with pytest.raises(RunError) as raised:
        await agent.run("hi").collect()

    error = raised.value.error
    assert isinstance(error, ModelCallFailed)
    assert error.reason == "bad_response"
    assert "ZeroDivisionError" in error.message


async def test_usage_is_the_last_report_of_each_call_never_summed_within_one() -> None:
    early = Usage(input_tokens=5, output_tokens=1, total_tokens=6, requests=1)
    final = Usage(input_tokens=5, output_tokens=9, total_tokens=14, requests=1)
    chunks = [UsageChunk(early), TextChunk("hi"), UsageChunk(final), FinishChunk("stop")]
    agent = Agent("echo", ChunkModel([chunks]))

    result = await agent.run("hi").collect()

    assert result.usage == final


SPENT = Usage(input_tokens=8, output_tokens=2, total_tokens=10, requests=1)


def fails_with(exc: Exception) -> Any:
    def fail() -> None:
        raise exc

    return fail


@pytest.mark.parametrize(
    ("raised", "counted"),
    [
        (ModelError(ModelCallFailed("refused", "no")), SPENT),
        (
            ModelError(ModelCallFailed("refused", "no"), usage=Usage(9, 3, 12, 1)),
            Usage(9, 3, 12, 1),
        ),
        (ZeroDivisionError("bug"), SPENT),
    ],
    ids=["model-error", "model-error-with-its-usage", "adapter-bug"],
)
async def test_a_failed_calls_usage_counts_toward_the_failed_run(
    raised: Exception, counted: Usage
) -> None:
    """What a failed call spent: the ModelError's usage when it carries one, else the
    last usage report the call streamed before it failed."""
    model = ChunkModel([[TextChunk("x"), UsageChunk(SPENT), fails_with(raised)]])
    streaming = Agent("echo", model).run("hi")
    events = await drain(streaming)

    ends_once(events, RunFailed)
    run = streaming.run
    assert run is not None
    assert run.state.usage == run.usage == counted


# -- stepping and snapshots -----------------------------------------------------------------


async def test_step_applies_one_transition_per_call() -> None:
    run = Run(calculator([add_call()], "3"), input="1 + 2?")
    phases = []
    steps: list[list[AgentEvent]] = []
    while not run.finished:
        before = run.seq
        steps.append(await run.step())
        assert run.seq == before + 1
        phases.append(run.state.phase)

    assert phases == ["CallingModel", "ExecutingTools", "CallingModel", "Done"]
    assert [types(step) for step in steps] == [
        ["run_started", "turn_started", "tool_call_delta"],
        ["tool_call_item"],
        ["tool_output_item", "turn_started", "token_delta"],
        ["message_output", "run_completed"],
    ]
    assert types(event for step in steps for event in step) == REFERENCE
    assert run.state.output.text == "3"
    assert await run.step() == []
    assert run.seq == 4


async def uninterrupted_output() -> FinalOutput:
    result = await calculator([add_call()], "The sum is 3.").run("1 + 2?").collect()
    assert result.output is not None
    return result.output


@pytest.mark.parametrize("steps", [1, 2, 3])
async def test_a_run_restarted_from_a_snapshot_finishes_like_an_uninterrupted_one(
    steps: int,
) -> None:
    calls: list[tuple[int, int]] = []

    @tool(name="add")
    async def counted_add(a: int, b: int) -> int:
        """Add two integers."""
        calls.append((a, b))
        return a + b

    model = ScriptedModel([[add_call()], "The sum is 3."])
    agent = Agent("calc", model, tools=[counted_add])
    first = Run(agent, input="1 + 2?")
    for _ in range(steps):
        await first.step()
    snapshot = loads(RunSnapshot, dumps(first.snapshot()))
    del first

    again = Run.from_snapshot(agent, snapshot)
    result = await RunResultStreaming(again).collect()

    assert result.output == await uninterrupted_output()
    assert calls == [(1, 2)], "the tool ran exactly once across the restart"
    assert again.conversation.items()[:2] == (UserMessage("1 + 2?"), add_call())
    assert "run_started" not in types(result.events), "a restarted run does not start again"


# -- sync helpers ---------------------------------------------------------------------------


def test_run_sync_runs_an_agent_from_synchronous_code() -> None:
    result = run_sync(calculator([add_call()], "3"), "1 + 2?")

    assert result.final_output == "3"
    assert types(result.events) == REFERENCE


def test_runner_run_sync_runs_with_the_given_config() -> None:
    agent = calculator([add_call("c1")], [add_call("c2")], "never reached")

    with pytest.raises(RunError) as raised:
        Runner.run_sync(agent, "1 + 2?", config=RunConfig(max_turns=1))

    assert raised.value.error == MaxTurnsExceeded(max_turns=1)


def test_runner_run_sync_completes() -> None:
    result = Runner.run_sync(calculator("hello"), "hi")

    assert result.final_output == "hello"
    assert result.usage.requests == 1


async def test_collect_typed_str_returns_a_plain_text_runs_answer() -> None:
    agent = Agent("echo", ScriptedModel(["plain words"]))

    assert await agent.run("hi").collect_typed(str) == "plain words"
