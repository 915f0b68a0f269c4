"""Runs stopped on a real Temporal dev server by the rules the patches in
helikon.temporal.calls brought in, their ends, and their histories replayed at once with
`temporalio.worker.Replayer`, so the new waits schedule the same commands again: the
deadline while the run waits on one activity (`DEADLINE_TIMES_OUT`), and a stop while a
nested run (a handoff, an agent as a tool) runs (`NESTED_STOPS`). test_runtime_parity_stops
compares such runs with local ones; histories recorded before the patches replay in
test_temporal_replay."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import pytest

pytest.importorskip("temporalio")

from parity_support import WAIT, new_queue, new_run_id, wait_for_file
from temporal_agents import slow_manager, slow_triage
from temporalio.client import Client, WorkflowHandle
from temporalio.worker import Replayer

from helikon import Agent, Cancelled, InputGuardrail, RunConfig, ScriptedModel, TimedOut
from helikon.durable import SqliteRunStore
from helikon.temporal import helikon_worker, outcome, start_run
from helikon.temporal.calls import DEADLINE_TIMES_OUT, NESTED_STOPS
from helikon.temporal.registry import AgentRegistry, register, unregister
from helikon.temporal.worker import sandbox_runner, workflows

REASON = "the customer hung up"


@pytest.fixture
async def client(temporal_address: str) -> Client:
    return await Client.connect(temporal_address)


async def replay_failures(
    handles: list[WorkflowHandle], queue: str, agent: Agent, patch: str
) -> list[str]:
    """What replaying each workflow's history with `agent` on `queue` failed with; the
    first one's history has `patch`'s marker."""
    histories = [await handle.fetch_history() for handle in handles]
    first = histories[0].events
    assert any(patch.encode() in event.SerializeToString() for event in first)
    registry = AgentRegistry([agent])
    register(queue, registry)
    try:
        replayer = Replayer(workflows=list(workflows()), workflow_runner=sandbox_runner())
        results = [
            await replayer.replay_workflow(history, raise_on_replay_failure=False)
            for history in histories
        ]
    finally:
        unregister(queue, registry)
    return [str(result.replay_failure) for result in results if result.replay_failure]


@pytest.mark.parametrize("stop", ["cancel", "timeout"])
@pytest.mark.parametrize(
    ("make", "child"),
    [
        pytest.param(slow_triage, "/2", id="handoff"),
        pytest.param(slow_manager, "/2:a1", id="agent-as-tool"),
    ],
)
async def test_a_run_stopped_during_a_nested_run_ends_with_the_stop_and_replays(
    client: Client, tmp_path: Path, make: object, child: str, stop: str
) -> None:
    """The parent ends with its stop (the cancel's reason; TimedOut of its own timeout) and
    so does its child, which keeps the root's deadline and timeout."""
    marks = tmp_path / "release"
    config = RunConfig(timeout=2.0 if stop == "timeout" else None)
    agent = replace(make(marks), config=config)  # type: ignore[operator]
    run_id, queue = new_run_id(), new_queue()
    with SqliteRunStore(tmp_path / "runs.db", key=b"n" * 32) as store:
        async with helikon_worker(client, queue, [agent], store):
            handle = await start_run(client, agent, "go", task_queue=queue, run_id=run_id)
            await wait_for_file(tmp_path, "start-b-")
            if stop == "cancel":
                await handle.cancel(reason=REASON)
            ended = await asyncio.wait_for(outcome(handle), WAIT)
            nested = client.get_workflow_handle(run_id + child)
            child_ended = await asyncio.wait_for(outcome(nested), WAIT)
    error = Cancelled(REASON) if stop == "cancel" else TimedOut(2.0)
    assert (ended.state.error, child_ended.state.error) == (error, error)  # type: ignore[union-attr]
    assert await replay_failures([handle, nested], queue, agent, NESTED_STOPS) == []


def held_agent(folder: Path) -> Agent:
    """An agent whose input guardrail (an activity) marks "started" in `folder`, then
    waits for "release" there; its run times out after 2 seconds."""

    async def check(text: str, context: object) -> bool:
        (folder / "started").write_text("started")
        while not (folder / "release").exists():
            await asyncio.sleep(0.05)
        return False

    guardrail = InputGuardrail("slow", check)
    model = ScriptedModel(["All clear."])
    return Agent("checked", model, input_guardrails=[guardrail], config=RunConfig(timeout=2.0))


async def test_the_deadline_while_the_run_waits_on_an_activity_times_it_out_and_replays(
    client: Client, tmp_path: Path
) -> None:
    """The deadline cancels the guardrail's activity: the run fails TimedOut, not
    Cancelled (the cancelled activity is the deadline's), and its history replays."""
    agent = held_agent(tmp_path)
    run_id, queue = new_run_id(), new_queue()
    with SqliteRunStore(tmp_path / "runs.db", key=b"n" * 32) as store:
        async with helikon_worker(client, queue, [agent], store):
            handle = await start_run(client, agent, "go", task_queue=queue, run_id=run_id)
            ended = await asyncio.wait_for(outcome(handle), WAIT)
            (tmp_path / "release").write_text("go")
    assert (tmp_path / "started").exists()
    assert ended.state.error == TimedOut(2.0)  # type: ignore[union-attr]
    assert await replay_failures([handle], queue, agent, DEADLINE_TIMES_OUT) == []
