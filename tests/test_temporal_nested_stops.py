"""A run stopped while a nested run (a handoff, an agent as a tool) runs, on a real Temporal
dev server: its end, and its histories (the parent's and the child's) replayed at once with
`temporalio.worker.Replayer`, so the wait behind `NESTED_STOPS` (helikon.temporal.calls)
schedules the same commands again. test_runtime_parity_stops compares such runs with local
ones; recorded histories from before the patch replay in test_temporal_replay."""

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

from helikon import Agent, Cancelled, RunConfig, TimedOut
from helikon.durable import SqliteRunStore
from helikon.temporal import helikon_worker, outcome, start_run
from helikon.temporal.calls import NESTED_STOPS
from helikon.temporal.registry import AgentRegistry, register, unregister
from helikon.temporal.worker import sandbox_runner, workflows

REASON = "the customer hung up"


@pytest.fixture
async def client(temporal_address: str) -> Client:
    return await Client.connect(temporal_address)


async def replay_failures(handles: list[WorkflowHandle], queue: str, agent: Agent) -> list[str]:
    """What replaying each workflow's history with `agent` on `queue` failed with."""
    histories = [await handle.fetch_history() for handle in handles]
    parent = histories[0].events
    assert any(NESTED_STOPS.encode() in event.SerializeToString() for event in parent)
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
    assert await replay_failures([handle, nested], queue, agent) == []
