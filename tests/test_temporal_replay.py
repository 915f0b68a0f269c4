"""Replaying recorded histories (tests/histories/, made by tests/temporal_histories.py)
with `temporalio.worker.Replayer`: a change to the workflow, the transition or a chart that
would schedule other commands than a recorded run did fails here, before it fails a
running workflow in production."""

from __future__ import annotations

from dataclasses import replace

import pytest

pytest.importorskip("temporalio")

from temporal_agents import payments_agent, station_agent, weather_agent
from temporal_histories import CASES, HISTORIES, payloads, task_queue
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHistory
from temporalio.converter import DataConverter, ExternalStorage
from temporalio.worker import Replayer, WorkflowReplayResult

from helikon.durable import SqliteRunStore
from helikon.temporal.calls import GUARDRAIL_ROWS, INPUT_GUARDRAIL_ROWS
from helikon.temporal.payloads import CLAIM_THRESHOLD, RunStorePayloads
from helikon.temporal.registry import AgentRegistry, register, unregister
from helikon.temporal.worker import sandbox_runner, workflows


async def replayed(
    history: WorkflowHistory, case: str, registry: AgentRegistry, *, kept: bool = True
) -> WorkflowReplayResult:
    """The `Replayer`'s result for `history`, with `registry`'s agents on the task queue
    the history of `case` was recorded on, and the claim check of a store holding the
    payloads the recorded run kept by reference (unless not `kept`)."""
    register(task_queue(case), registry)
    store = SqliteRunStore(":memory:")
    try:
        for run_id, data in payloads(case) if kept else ():
            await store.aput_payload(run_id, data)
        converter = DataConverter(
            external_storage=ExternalStorage(
                drivers=[RunStorePayloads(store)], payload_size_threshold=CLAIM_THRESHOLD
            )
        )
        replayer = Replayer(
            workflows=list(workflows()),
            workflow_runner=sandbox_runner(),
            data_converter=converter,
        )
        return await replayer.replay_workflow(history, raise_on_replay_failure=False)
    finally:
        store.close()
        unregister(task_queue(case), registry)


@pytest.mark.parametrize("case", sorted(CASES))
async def test_a_recorded_history_replays(case: str) -> None:
    make, _ = CASES[case]
    registry = AgentRegistry([make()])
    history = WorkflowHistory.from_json(case, (HISTORIES / f"{case}.json").read_text())
    result = await replayed(history, case, registry)
    assert result.replay_failure is None, result.replay_failure


async def test_a_history_that_no_longer_matches_fails_replay() -> None:
    """The test can fail: the tools history replayed with another agent of the same name
    (its tool needs approval, so the run waits where the recorded one ran the tool)."""
    registry = AgentRegistry([weather_agent(needs_approval=True)])
    history = WorkflowHistory.from_json("tools", (HISTORIES / "tools.json").read_text())
    result = await replayed(history, "tools", registry)
    assert result.replay_failure is not None


async def test_a_run_with_mcp_tools_replays_with_no_server() -> None:
    """The listing is in the history (the `helikon_list` activity's answer): a replay takes
    the tools from it, and never connects or lists the agent's server."""
    agent = station_agent()
    (server,) = agent.mcp_servers
    registry = AgentRegistry([agent])
    history = WorkflowHistory.from_json("mcp", (HISTORIES / "mcp.json").read_text())
    result = await replayed(history, "mcp", registry)
    assert result.replay_failure is None, result.replay_failure
    assert server.listed is None and not server.connected


async def test_an_mcp_history_replayed_with_other_tools_fails() -> None:
    """The test can fail: the recorded listing offers add and wipe, and the agent here has
    a tool of its own named add, so the listed tools clash and the replay fails."""
    from helikon.tools import tool

    @tool
    def add(a: int, b: int) -> int:
        """Add.

        Args:
            a: one.
            b: two.
        """
        return a + b

    agent = replace(station_agent(), tools=[add])
    registry = AgentRegistry([agent])
    history = WorkflowHistory.from_json("mcp", (HISTORIES / "mcp.json").read_text())
    result = await replayed(history, "mcp", registry)
    assert result.replay_failure is not None


async def test_a_run_whose_payloads_went_by_reference_replays_only_with_them() -> None:
    """The test can fail: the claim history's tool result and model input are references
    (its largest event is small); replayed without the payloads they name, it fails."""
    make, _ = CASES["claim"]
    history = WorkflowHistory.from_json("claim", (HISTORIES / "claim.json").read_text())
    assert max(event.ByteSize() for event in history.events) < CLAIM_THRESHOLD
    assert len(payloads("claim")) >= 2
    result = await replayed(history, "claim", AgentRegistry([make()]), kept=False)
    assert result.replay_failure is not None


BEFORE_PATCH = {
    "cancel": (payments_agent, EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED),
    "cancel_write": (weather_agent, EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED),
}
"""Histories recorded with the workflow of 8c959b6, before the `CANCELED` patch (they
cannot be recorded again): `cancel` is the "cancel" case, whose cancelled run then
completed its workflow; `cancel_write` a weather run cancelled while its last write was
held (a one-off recording): the cancel cancelled the write and ended the workflow at once."""


@pytest.mark.parametrize("case", sorted(BEFORE_PATCH))
async def test_a_cancelled_run_recorded_before_the_canceled_patch_replays(case: str) -> None:
    """Each replays as it ran: the new endings are guarded by `workflow.patched`."""
    make, last = BEFORE_PATCH[case]
    registry = AgentRegistry([make()])
    text = (HISTORIES / f"{case}_before_patch.json").read_text()
    history = WorkflowHistory.from_json(case, text)
    assert history.events[-1].event_type == last
    result = await replayed(history, case, registry)
    assert result.replay_failure is None, result.replay_failure


async def test_a_run_checking_its_answer_in_a_phase_records_the_patch_and_replays() -> None:
    """On today's default chart the output guardrails' check is a row (CheckingOutput): the
    history records the `helikon-guardrails-as-rows` patch before its `CheckGuardrails`
    activity, and replays; histories of a15a890f… (the other cases) replay without it."""
    make, _ = CASES["output_guardrail"]
    text = (HISTORIES / "output_guardrail.json").read_text()
    history = WorkflowHistory.from_json("output_guardrail", text)
    markers = [e for e in history.events if e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED]
    assert any(GUARDRAIL_ROWS.encode() in e.SerializeToString() for e in markers)
    activities = [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]
    assert activities == [
        "helikon_guardrail",
        "helikon_model",
        "helikon_guardrail",
        "helikon_write",
    ]
    result = await replayed(history, "output_guardrail", AgentRegistry([make()]))
    assert result.replay_failure is None, result.replay_failure
    for case in ("tools", "approval", "handoff"):
        old = (HISTORIES / f"{case}.json").read_text()
        assert GUARDRAIL_ROWS not in old


def scheduled(history: WorkflowHistory) -> list[str]:
    """The activities `history` scheduled, and the patches it marked, in order."""
    names = []
    for event in history.events:
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            names.append(event.activity_task_scheduled_event_attributes.activity_type.name)
        if event.event_type == EventType.EVENT_TYPE_MARKER_RECORDED:
            data = event.SerializeToString()
            names += [
                f"patch {p}" for p in (INPUT_GUARDRAIL_ROWS, GUARDRAIL_ROWS) if p.encode() in data
            ]
    return names


async def test_a_run_checking_its_input_in_a_phase_records_the_patch_and_replays() -> None:
    """On today's default chart the input guardrails' check is rows (CheckingInput): the
    history records the `helikon-input-guardrails-as-rows` patch before the check's
    activity, which runs where the loop's rule ran it, before the model's; a history of
    7e19d021… (output_guardrail) checks its input by that rule, without the patch."""
    make, _ = CASES["input_guardrail"]
    text = (HISTORIES / "input_guardrail.json").read_text()
    history = WorkflowHistory.from_json("input_guardrail", text)
    assert scheduled(history) == [
        f"patch {INPUT_GUARDRAIL_ROWS}",
        "helikon_guardrail",
        "helikon_model",
        f"patch {GUARDRAIL_ROWS}",
        "helikon_guardrail",
        "helikon_write",
    ]
    result = await replayed(history, "input_guardrail", AgentRegistry([make()]))
    assert result.replay_failure is None, result.replay_failure
    old = WorkflowHistory.from_json(
        "output_guardrail", (HISTORIES / "output_guardrail.json").read_text()
    )
    assert scheduled(old) == [
        "helikon_guardrail",
        "helikon_model",
        f"patch {GUARDRAIL_ROWS}",
        "helikon_guardrail",
        "helikon_write",
    ]
