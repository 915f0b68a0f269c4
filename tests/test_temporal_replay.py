"""Replaying recorded histories (tests/histories/, made by tests/temporal_histories.py)
with `temporalio.worker.Replayer`: a change to the workflow, the transition or a chart that
would schedule other commands than a recorded run did fails here, before it fails a
running workflow in production."""

from __future__ import annotations

import pytest

pytest.importorskip("temporalio")

from temporal_agents import weather_agent
from temporal_histories import CASES, HISTORIES, task_queue
from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer

from helikon.temporal.registry import AgentRegistry, register, unregister
from helikon.temporal.worker import sandbox_runner, workflows


@pytest.mark.parametrize("case", sorted(CASES))
async def test_a_recorded_history_replays(case: str) -> None:
    make, _ = CASES[case]
    registry = AgentRegistry([make()])
    history = WorkflowHistory.from_json(case, (HISTORIES / f"{case}.json").read_text())
    register(task_queue(case), registry)
    try:
        replayer = Replayer(workflows=list(workflows()), workflow_runner=sandbox_runner())
        result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    finally:
        unregister(task_queue(case), registry)
    assert result.replay_failure is None, result.replay_failure


async def test_a_history_that_no_longer_matches_fails_replay() -> None:
    """The test can fail: the tools history replayed with another agent of the same name
    (its tool needs approval, so the run waits where the recorded one ran the tool)."""
    registry = AgentRegistry([weather_agent(needs_approval=True)])
    history = WorkflowHistory.from_json("tools", (HISTORIES / "tools.json").read_text())
    register(task_queue("tools"), registry)
    try:
        replayer = Replayer(workflows=list(workflows()), workflow_runner=sandbox_runner())
        result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    finally:
        unregister(task_queue("tools"), registry)
    assert result.replay_failure is not None
