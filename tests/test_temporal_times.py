"""Times on Temporal (a real dev server, `temporal_address`): the workflow stamps its steps
with `workflow.now()`, and how long a model call, a tool call or a chart's effect ran is
measured inside its activity, on the monotonic clock, answered with it (`took`) and set on
the step its input makes, as a local run sets it. An answer recorded before it had `took`
reads as None, so old histories replay unchanged (tests/test_temporal_replay.py)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("temporalio")

from temporal_agents import weather_agent
from temporalio.client import Client

from helikon import Agent, ScriptedModel, ToolCall, tool
from helikon.core.state import ModelResponse
from helikon.durable import SqliteRunStore
from helikon.temporal import events, helikon_worker, outcome, start_run
from helikon.temporal import messages as m
from helikon.trace.times import TickingClock, iso, using_clock

WAIT = 60.0


class SplitClock:
    """Wall time that stands still; a monotonic clock 2 seconds a read, so a duration is
    the reads between its two ends."""

    def __init__(self) -> None:
        self.ticks = 0.0

    def wall(self) -> float:
        return 1_767_225_600.0

    def monotonic(self) -> float:
        self.ticks += 2.0
        return self.ticks


@pytest.fixture
async def client(temporal_address: str) -> Client:
    return await Client.connect(temporal_address)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteRunStore]:
    with SqliteRunStore(tmp_path / "runs.db", key=b"temporal-tests-key-0123456789abcd") as store:
        yield store


async def run_to_end(client: Client, store: SqliteRunStore, agent: Agent, text: str) -> str:
    run_id, queue = f"r-{uuid.uuid4().hex[:12]}", f"q-{uuid.uuid4().hex[:8]}"
    with using_clock(SplitClock()):
        async with helikon_worker(client, queue, [agent], store):
            handle = await start_run(client, agent, text, task_queue=queue, run_id=run_id)
            ended = await asyncio.wait_for(outcome(handle), WAIT)
    assert ended.state.phase == "Done"
    return run_id


def took_by_input(store: SqliteRunStore, run_id: str) -> list[tuple[str, float | None]]:
    records = store.get(run_id).records
    assert all(record.time is not None for record in records)
    return [(record.input.kind, record.time.took) for record in records if record.time]


async def test_model_calls_and_tool_calls_carry_the_duration_their_activity_measured(
    client: Client, store: SqliteRunStore
) -> None:
    run_id = await run_to_end(client, store, weather_agent(), "weather?")

    took = took_by_input(store, run_id)
    assert [kind for kind, _ in took] == [
        "start",
        "model_response",
        "tool_results",
        "model_response",
        "tool_results",
        "model_response",
    ]
    assert took[0] == ("start", None)  # no effect produced the run's input
    assert [seconds for kind, seconds in took if kind == "model_response"] == [2.0] * 3
    single, pair = (seconds for kind, seconds in took if kind == "tool_results")
    assert single == 2.0  # one call: its activity's two reads
    assert pair is not None and pair >= 2.0  # two calls at once: the longer one's
    batches = [r.time for r in store.get(run_id).records if r.input.kind == "tool_results"]
    assert [call.call_id for time in batches if time for call in time.calls] == ["c1", "c2", "c3"]
    assert batches[0] is not None and batches[0].call("c1") == 2.0  # each call its own


async def test_a_charts_effect_carries_the_duration_its_activity_measured(
    client: Client, store: SqliteRunStore
) -> None:
    from charts.retrieve_answer import EXAMPLE_INPUT, agent, script

    run_id = await run_to_end(client, store, agent(ScriptedModel(script())), EXAMPLE_INPUT)

    effects = [seconds for kind, seconds in took_by_input(store, run_id) if kind == "effect_result"]
    assert effects == [2.0]


def test_an_answer_recorded_before_answers_had_their_duration_reads_as_none() -> None:
    response: Any = m.to_payload(m.ModelAnswer(ModelResponse(())))["input"]
    assert m.from_payload(m.ModelAnswer, {"input": response}, "an answer").took is None
    assert m.from_payload(m.ToolAnswer, {}, "an answer").took is None
    assert m.from_payload(m.EffectAnswer, {}, "an answer").took is None


async def test_the_events_a_temporal_run_is_followed_by_carry_their_rows_times(
    store: SqliteRunStore,
) -> None:
    @tool(read_only=True)
    def lookup(q: str) -> str:
        """Look something up."""
        return f"found {q}"

    calls = [ToolCall("c1", "lookup", '{"q": "a"}')]
    agent = Agent("worker", ScriptedModel([calls, "all done"]), tools=[lookup])
    with using_clock(TickingClock(tick=0.25)):  # the rows a workflow writes, written here
        await agent.run("go", store=store, run_id="r1").collect()
    stored = store.get("r1")
    rows = [effect.at for effect in stored.effects]
    for record in stored.records:
        assert record.time is not None
        rows += [record.time.at] * len(record.events)

    followed = [event async for event in events(store, "r1", wait=5.0)]

    assert followed and all(event.at is not None for event in followed)
    assert sorted(iso(event.at) for event in followed if event.at) == sorted(rows)
