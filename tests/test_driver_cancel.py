"""Stopping a run: `cancel()` from outside while tools or the model are in flight, the
runner's timeout, and a consumer that stops iterating early. No task may outlive its run.

Every "in flight" here is an `asyncio.Event` nobody sets; the timeout test asserts how the run
ends, not how long it took.
"""

from __future__ import annotations

import asyncio
import gc
import json
import threading
import time

import pytest
from driver_support import ChunkModel, drain, ends_once, settle

from helikon import (
    Agent,
    Cancelled,
    RunCompleted,
    RunConfig,
    RunError,
    RunFailed,
    Runner,
    ScriptedModel,
    TimedOut,
    ToolCall,
    ToolResult,
    tool,
)
from helikon.models.base import FinishChunk, TextChunk


class Stuck:
    """A tool that waits forever and records that it started and how it ended."""

    def __init__(self, expect: int) -> None:
        self.started: list[int] = []
        self.cancelled: list[int] = []
        self.expect = expect
        self.all_started = asyncio.Event()

        @tool
        async def wait(n: int) -> str:
            """Wait for something that never happens."""
            self.started.append(n)
            if len(self.started) == self.expect:
                self.all_started.set()
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                self.cancelled.append(n)
                raise
            return "unreachable"

        self.tool = wait


def batch(count: int) -> list[ToolCall]:
    return [ToolCall(f"c{n}", "wait", json.dumps({"n": n})) for n in range(count)]


def results(items: object) -> list[ToolResult]:
    return [item for item in items if isinstance(item, ToolResult)]  # type: ignore[attr-defined]


async def test_result_cancel_reaches_every_tool_in_flight_and_leaves_no_task() -> None:
    stuck = Stuck(expect=3)
    agent = Agent("worker", ScriptedModel([batch(3), "never"]), tools=[stuck.tool])
    before = asyncio.all_tasks()
    streaming = agent.run("go")
    collecting = asyncio.create_task(streaming.collect())

    await stuck.all_started.wait()
    streaming.cancel()
    with pytest.raises(RunError) as raised:
        await collecting

    assert raised.value.error == Cancelled("cancelled")
    assert sorted(stuck.cancelled) == [0, 1, 2]
    assert asyncio.all_tasks() == before
    assert ends_once(streaming.events, RunFailed).error == Cancelled("cancelled")
    run = streaming.run
    assert run is not None
    closed = results(run.conversation.items())
    assert [r.call_id for r in closed] == ["c0", "c1", "c2"]
    assert all(r.status == "cancelled" and r.is_error for r in closed)


async def test_run_cancel_with_a_reason_also_closes_calls_still_queued() -> None:
    stuck = Stuck(expect=1)
    agent = Agent(
        "worker",
        ScriptedModel([batch(3), "never"]),
        tools=[stuck.tool],
        config=RunConfig(parallel_tool_call_limit=1),
    )
    before = asyncio.all_tasks()
    streaming = agent.run("go")
    run = streaming.run
    assert run is not None
    events_task = asyncio.create_task(drain(streaming))

    await stuck.all_started.wait()
    await settle()
    run.cancel("user pressed stop")
    events = await events_task

    assert stuck.started == [0], "the cap held the other calls back"
    assert stuck.cancelled == [0]
    assert asyncio.all_tasks() == before
    assert ends_once(events, RunFailed).error == Cancelled("user pressed stop")
    closed = results(run.conversation.items())
    assert [r.call_id for r in closed] == ["c0", "c1", "c2"]
    assert {r.status for r in closed} == {"cancelled"}
    assert run.state.phase == "Failed"


async def test_cancelling_the_consumer_task_reaches_the_tools_and_leaves_no_task() -> None:
    stuck = Stuck(expect=2)
    agent = Agent("worker", ScriptedModel([batch(2), "never"]), tools=[stuck.tool])
    before = asyncio.all_tasks()
    collecting = asyncio.create_task(agent.run("go").collect())

    await stuck.all_started.wait()
    collecting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await collecting

    assert sorted(stuck.cancelled) == [0, 1]
    assert asyncio.all_tasks() == before


async def test_cancel_while_the_model_streams_closes_the_model_stream() -> None:
    stalled = asyncio.Event()
    reached = asyncio.Event()
    model = ChunkModel([[TextChunk("Thinking"), reached.set, stalled, FinishChunk("stop")]])
    streaming = Agent("slow", model).run("hi")
    before = asyncio.all_tasks()
    events_task = asyncio.create_task(drain(streaming))

    await reached.wait()
    await settle()
    streaming.cancel()
    events = await events_task

    assert ends_once(events, RunFailed).error == Cancelled("cancelled")
    assert model.closed == 1
    assert asyncio.all_tasks() == before


async def test_cancel_from_the_consumer_before_the_tools_start_runs_no_tool() -> None:
    stuck = Stuck(expect=1)
    streaming = Agent("worker", ScriptedModel([batch(2)]), tools=[stuck.tool]).run("go")
    events = []
    async for event in streaming:
        events.append(event)
        if event.type == "tool_call_item":
            streaming.cancel("changed my mind")
    gc.collect()
    await settle()

    assert stuck.started == []
    assert ends_once(events, RunFailed).error == Cancelled("changed my mind")
    run = streaming.run
    assert run is not None
    assert {r.status for r in results(run.conversation.items())} == {"cancelled"}


async def test_a_run_cancelled_before_it_starts_never_calls_the_model() -> None:
    model = ScriptedModel(["hello"])
    streaming = Agent("echo", model).run("hi")

    streaming.cancel("not needed")
    with pytest.raises(RunError) as raised:
        await streaming.collect()

    assert raised.value.error == Cancelled("not needed")
    assert model.requests == []


async def test_cancel_after_the_run_ended_changes_nothing() -> None:
    streaming = Agent("echo", ScriptedModel(["hello"])).run("hi")
    result = await streaming.collect()

    streaming.cancel()

    assert result.final_output == "hello"
    run = streaming.run
    assert run is not None
    assert run.state.phase == "Done"


async def test_the_runner_timeout_fails_a_run_stuck_in_a_tool_with_timed_out() -> None:
    stuck = Stuck(expect=1)
    agent = Agent("worker", ScriptedModel([batch(1), "never"]), tools=[stuck.tool])
    before = asyncio.all_tasks()

    streaming = Runner.run_streamed(agent, "go", config=RunConfig(timeout=0.2))
    events = await drain(streaming)

    assert ends_once(events, RunFailed).error == TimedOut(0.2)
    assert stuck.cancelled == [0]
    assert asyncio.all_tasks() == before
    run = streaming.run
    assert run is not None
    assert [r.status for r in results(run.conversation.items())] == ["cancelled"]


async def test_runner_run_raises_timed_out() -> None:
    stuck = Stuck(expect=1)
    agent = Agent("worker", ScriptedModel([batch(1)]), tools=[stuck.tool])

    with pytest.raises(RunError) as raised:
        await Runner.run(agent, "go", config=RunConfig(timeout=0.2))

    assert raised.value.error == TimedOut(0.2)


@pytest.mark.parametrize("where", ["run config", "agent config"])
async def test_agent_run_honours_the_timeout_as_the_runner_does(where: str) -> None:
    stuck = Stuck(expect=1)
    config = RunConfig(timeout=0.2)
    on_agent = {"config": config} if where == "agent config" else {}
    agent = Agent("worker", ScriptedModel([batch(1), "never"]), tools=[stuck.tool], **on_agent)
    before = asyncio.all_tasks()

    streaming = agent.run("go", config=None if on_agent else config)
    async with asyncio.timeout(10):  # without the run's own deadline: fail, do not hang
        events = await drain(streaming)

    assert ends_once(events, RunFailed).error == TimedOut(0.2)
    assert stuck.cancelled == [0]
    assert asyncio.all_tasks() == before
    run = streaming.run
    assert run is not None
    assert [r.status for r in results(run.conversation.items())] == ["cancelled"]


async def test_agent_resume_honours_the_timeout() -> None:
    stuck = Stuck(expect=1)
    asking = tool(needs_approval=True)(stuck.tool.fn)
    agent = Agent("worker", ScriptedModel([batch(1), "never"]), tools=[asking])
    suspended = await agent.run("go").collect()
    assert suspended.snapshot is not None
    (request,) = suspended.pending

    resumed = agent.resume(suspended.snapshot, [request.approve()], config=RunConfig(timeout=0.2))
    with pytest.raises(RunError) as raised:
        async with asyncio.timeout(10):  # without the run's own deadline: fail, do not hang
            await resumed.collect()

    assert raised.value.error == TimedOut(0.2)
    assert stuck.cancelled == [0]


async def test_breaking_out_of_the_stream_early_leaves_no_task_running() -> None:
    stalled = asyncio.Event()
    model = ChunkModel([[TextChunk("one "), TextChunk("two "), stalled, FinishChunk("stop")]])
    before = asyncio.all_tasks()

    async for event in Agent("talker", model).run("hi"):
        if event.type == "token_delta":
            break
    gc.collect()
    await settle()

    assert model.closed == 1, "the model's stream was closed"
    assert asyncio.all_tasks() == before


async def test_breaking_out_after_a_tool_call_item_runs_no_tool() -> None:
    stuck = Stuck(expect=1)
    before = asyncio.all_tasks()

    async for event in Agent("worker", ScriptedModel([batch(1)]), tools=[stuck.tool]).run("go"):
        if event.type == "tool_call_item":
            break
    gc.collect()
    await settle()

    assert stuck.started == []
    assert asyncio.all_tasks() == before


async def test_calls_that_finished_before_a_cancel_keep_their_results() -> None:
    stuck = Stuck(expect=1)
    ran: list[str] = []

    @tool
    async def quick(n: int) -> str:
        """Finish at once, with a side effect."""
        ran.append(f"quick {n}")
        return f"done {n}"

    calls = [ToolCall("q", "quick", '{"n": 1}'), ToolCall("w", "wait", '{"n": 2}')]
    agent = Agent("worker", ScriptedModel([calls, "never"]), tools=[quick, stuck.tool])
    streaming = agent.run("go")
    events_task = asyncio.create_task(drain(streaming))

    await stuck.all_started.wait()
    await settle()
    streaming.cancel("stop")
    events = await events_task

    assert ran == ["quick 1"]
    assert ends_once(events, RunFailed).error == Cancelled("stop")
    run = streaming.run
    assert run is not None
    by_call = {r.call_id: r for r in results(run.conversation.items())}
    assert by_call["q"] == ToolResult("q", "done 1")
    assert by_call["w"].status == "cancelled"


@tool
async def gives_up() -> str:
    """Raise CancelledError of its own accord (an upstream future it awaited was cancelled)."""
    raise asyncio.CancelledError


@pytest.mark.parametrize("count", [1, 2])
async def test_a_tools_own_cancelled_error_is_its_failure_and_the_run_goes_on(count: int) -> None:
    calls = [ToolCall(f"g{n}", "gives_up", "{}") for n in range(count)]
    model = ScriptedModel([calls, "recovered"])
    streaming = Agent("worker", model, tools=[gives_up]).run("go")
    events = await drain(streaming)

    assert ends_once(events, RunCompleted).output.text == "recovered"
    run = streaming.run
    assert run is not None
    closed = results(run.conversation.items())
    assert [r.call_id for r in closed] == [f"g{n}" for n in range(count)]
    assert all(r.status == "errored" and "CancelledError" in r.content for r in closed)


@pytest.mark.parametrize("stop", ["cancel", "timeout"])
async def test_a_real_stop_still_cancels_the_batch_beside_a_tools_own_cancelled_error(
    stop: str,
) -> None:
    stuck = Stuck(expect=1)
    calls = [ToolCall("g", "gives_up", "{}"), ToolCall("w", "wait", '{"n": 1}')]
    agent = Agent("worker", ScriptedModel([calls, "never"]), tools=[gives_up, stuck.tool])
    before = asyncio.all_tasks()
    if stop == "cancel":
        streaming = agent.run("go")
    else:
        streaming = Runner.run_streamed(agent, "go", config=RunConfig(timeout=0.2))
    events_task = asyncio.create_task(drain(streaming))

    await stuck.all_started.wait()
    await settle()
    if stop == "cancel":
        streaming.cancel("stop")
    events = await events_task

    expected = Cancelled("stop") if stop == "cancel" else TimedOut(0.2)
    assert ends_once(events, RunFailed).error == expected
    assert stuck.cancelled == [1]
    assert asyncio.all_tasks() == before
    run = streaming.run
    assert run is not None
    by_call = {r.call_id: r for r in results(run.conversation.items())}
    assert sorted(by_call) == ["g", "w"]
    assert len(results(run.conversation.items())) == 2, "exactly one result per call"
    assert by_call["g"].status == "errored" and "CancelledError" in by_call["g"].content
    assert by_call["w"].status == "cancelled"


def test_run_sync_keeps_its_deadline_when_a_sync_tool_blocks_its_thread() -> None:
    """The deadline holds from sync code too: nothing waits for the tool's thread at the end
    (asyncio.run's shutdown would wait for its default executor). Generous bounds: the tool
    would block 5 s, the timeout is 0.5 s, the run must end within 2 s."""
    release = threading.Event()
    ran: list[str] = []

    @tool
    def block() -> str:
        """Block the worker thread."""
        release.wait(5)
        ran.append("finished")
        return "late"

    agent = Agent(
        "worker", ScriptedModel([[ToolCall("c1", "block", "{}")], "never"]), tools=[block]
    )
    started = time.monotonic()
    try:
        with pytest.raises(RunError) as raised:
            Runner.run_sync(agent, "go", config=RunConfig(timeout=0.5))
        elapsed, ran_by_then = time.monotonic() - started, list(ran)
    finally:
        release.set()

    assert raised.value.error == TimedOut(0.5)
    assert elapsed < 2, f"the run ended after {elapsed:.1f} s"
    assert ran_by_then == [], "the run did not wait for the thread"
