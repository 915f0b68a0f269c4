"""Runs that wait for approval on a real Temporal dev server, by the rules the patches in
helikon.temporal.calls brought in, their ends, and their histories replayed at once with
`temporalio.worker.Replayer`: the deadline does not run while a run waits for decisions and
restarts once they come (`SUSPENSION_RESETS_DEADLINE`); a nested run that waits for approval
ends at its suspension (`NESTED_SUSPENDS`); an agent's `on_approval` handler is asked in an
activity (`HANDLER_ASKED`). test_runtime_parity_approvals
compares such runs with local ones; histories recorded before the patches replay in
test_temporal_replay."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("temporalio")

from parity_support import WAIT, new_queue, new_run_id
from temporal_agents import payments_agent
from temporalio.client import Client
from test_temporal_stops import replay_failures

from helikon import Agent, RunConfig, ScriptedModel, TimedOut, ToolCall, tool
from helikon.core.approvals import ApprovalRequest
from helikon.core.errors import Cancelled
from helikon.durable import SqliteRunStore
from helikon.temporal import decide, events, helikon_worker, outcome, start_run
from helikon.temporal.calls import HANDLER_ASKED, NESTED_SUSPENDS, SUSPENSION_RESETS_DEADLINE


@pytest.fixture
async def client(temporal_address: str) -> Client:
    return await Client.connect(temporal_address)


async def test_a_run_decided_after_its_timeout_goes_on_and_the_history_replays(
    client: Client, tmp_path: Path
) -> None:
    """The run suspends, waits past its timeout (1 s) and is decided: it goes on to its end,
    its timeout counted afresh, as `agent.resume` counts it for a local run."""
    agent = replace(payments_agent(), config=RunConfig(timeout=1.0))
    run_id, queue = new_run_id(), new_queue()
    with SqliteRunStore(tmp_path / "runs.db", key=b"s" * 32) as store:
        async with helikon_worker(client, queue, [agent], store):
            handle = await start_run(client, agent, "pay", task_queue=queue, run_id=run_id)
            _ = [e async for e in events(store, run_id)]  # to the suspension
            await asyncio.sleep(1.5)
            await decide(handle, [r.approve() for r in store.pending(run_id)])
            ended = await asyncio.wait_for(outcome(handle), WAIT)
    assert ended.state.phase == "Done"
    assert await replay_failures([handle], queue, agent, SUSPENSION_RESETS_DEADLINE) == []


def slow_payments() -> Agent:
    """payments_agent whose transfer, once approved, takes 2 s."""

    @tool(needs_approval=True)
    async def transfer(amount: int) -> str:
        """Move money.

        Args:
            amount: how much.
        """
        await asyncio.sleep(2.0)
        return f"moved {amount}"

    script = [[ToolCall("t1", "transfer", '{"amount": 500}')], "Done."]
    return Agent("payments", ScriptedModel(script), tools=[transfer], config=RunConfig(timeout=1.0))


async def test_the_timeout_counts_afresh_once_decided(client: Client, tmp_path: Path) -> None:
    """Decided at once, the run's transfer outlasts the timeout counted from the decisions:
    the deadline restarted, it was not dropped."""
    agent = slow_payments()
    run_id, queue = new_run_id(), new_queue()
    with SqliteRunStore(tmp_path / "runs.db", key=b"s" * 32) as store:
        async with helikon_worker(client, queue, [agent], store):
            handle = await start_run(client, agent, "pay", task_queue=queue, run_id=run_id)
            _ = [e async for e in events(store, run_id)]  # to the suspension
            await asyncio.sleep(1.5)
            await decide(handle, [r.approve() for r in store.pending(run_id)])
            ended = await asyncio.wait_for(outcome(handle), WAIT)
    assert ended.state.phase == "Failed" and ended.state.error == TimedOut(1.0)


def nesting(how: str) -> Agent:
    """Hands off to payments_agent, or asks it as a tool; its transfer needs approval."""
    payments = payments_agent()
    if how == "handoff":
        script = [[ToolCall("h1", "transfer_to_payments", "{}")]]
        return Agent("triage", ScriptedModel(script), handoffs=[payments])
    script = [[ToolCall("a1", "payments", '{"input": "pay 500"}')], "Asked."]
    return Agent("manager", ScriptedModel(script), tools=[payments.as_tool()])


@pytest.mark.parametrize(("how", "child"), [("handoff", "/2"), ("agent-as-tool", "/2:a1")])
async def test_a_nested_run_ends_at_its_suspension_and_the_histories_replay(
    client: Client, tmp_path: Path, how: str, child: str
) -> None:
    """The nested run is left suspended, its workflow completed; the handoff ends
    cancelled, the call gets an error result and the run goes on."""
    agent = nesting(how)
    run_id, queue = new_run_id(), new_queue()
    with SqliteRunStore(tmp_path / "runs.db", key=b"s" * 32) as store:
        async with helikon_worker(client, queue, [agent], store):
            handle = await start_run(client, agent, "pay", task_queue=queue, run_id=run_id)
            ended = await asyncio.wait_for(outcome(handle), WAIT)
        nested = store.get(run_id + child)
        results = [r.input for r in store.get(run_id).records if r.input.kind == "tool_results"]
    assert nested.info.status == "suspended"
    assert (nested.info.lease_owner, nested.info.lease_expires_at) == (None, None)
    assert nested.records[-1].state_after.phase == "NeedsApproval"
    if how == "handoff":
        assert ended.state.phase == "Failed" and isinstance(ended.state.error, Cancelled)
        assert "waited for approval; a handoff cannot suspend" in ended.state.error.reason
    else:
        assert ended.state.phase == "Done"
        ((result,),) = [inputs.results for inputs in results]  # type: ignore[attr-defined]
        assert "waited for approval; an agent run as a tool cannot suspend" in result.content
    nested_handle = client.get_workflow_handle(run_id + child)
    failures = await replay_failures([nested_handle, handle], queue, agent, NESTED_SUSPENDS)
    assert failures == []


async def test_a_handler_decides_in_an_activity_and_the_history_replays(
    client: Client, tmp_path: Path
) -> None:
    """The run never suspends: the handler's decisions are its next input, and the
    `helikon_approval` activity's answer is in the history, so a replay never asks again."""
    asked: list[str] = []

    def handler(request: ApprovalRequest, context: Any) -> bool:
        asked.append(request.call.call_id)
        return True

    agent = replace(payments_agent(), on_approval=handler)
    run_id, queue = new_run_id(), new_queue()
    with SqliteRunStore(tmp_path / "runs.db", key=b"s" * 32) as store:
        async with helikon_worker(client, queue, [agent], store):
            handle = await start_run(client, agent, "pay", task_queue=queue, run_id=run_id)
            ended = await asyncio.wait_for(outcome(handle), WAIT)
        inputs = [record.input.kind for record in store.get(run_id).records]
    assert ended.state.phase == "Done" and asked == ["t1"]
    assert "approval_decisions" in inputs
    assert await replay_failures([handle], queue, agent, HANDLER_ASKED) == []
    assert asked == ["t1"]
