"""Runs on a real Temporal dev server (`temporal_address`): the default chart's paths as a
workflow, its records in the run store read like a local run's."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from store_support import Backend
from temporal_support import only_pending

pytest.importorskip("temporalio")

from temporal_agents import (
    fatal_agent,
    looping_agent,
    manager_agent,
    payments_agent,
    slow_agent,
    slow_manager,
    slow_triage,
    structured_agent,
    triage_agent,
    weather_agent,
)
from temporalio.api.enums.v1 import EventType
from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowUpdateFailedError,
)
from temporalio.service import RPCError
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

from helikon import Agent, Cancelled, MaxTurnsExceeded, TimedOut
from helikon.core import MaxAgentDepthExceeded
from helikon.core.errors import EffectFailed
from helikon.core.events import TERMINAL_EVENTS
from helikon.core.items import UserMessage
from helikon.core.state import Cancel, EffectResult
from helikon.durable import RunNotFound, SqliteRunStore
from helikon.temporal import (
    RunOutcome,
    RunRequest,
    TemporalOptions,
    current,
    decide,
    events,
    helikon_worker,
    outcome,
    start_run,
)
from helikon.temporal.messages import WORKFLOW, to_payload

WAIT = 60.0
DELTAS = {"token_delta", "tool_call_delta", "reasoning_delta"}


@pytest.fixture
async def client(temporal_address: str) -> Client:
    return await Client.connect(temporal_address)


@pytest.fixture
def store(tmp_path: Path) -> AsyncIterator[SqliteRunStore]:
    with SqliteRunStore(tmp_path / "runs.db", key=b"temporal-tests-key-0123456789abcd") as store:
        yield store


@pytest.fixture
def run_id() -> str:
    """A run id of this test's own: the dev server outlives every test."""
    return f"r-{uuid.uuid4().hex[:12]}"


def queue() -> str:
    return f"q-{uuid.uuid4().hex[:8]}"


async def local_events(agent: Agent, text: str, run_id: str) -> list[Any]:
    return [e for e in [e async for e in agent.run(text, run_id=run_id)] if e.type not in DELTAS]


async def test_a_run_with_tools_streams_what_a_local_run_streams(
    client: Client, store: SqliteRunStore, run_id: str
) -> None:
    q = queue()
    async with helikon_worker(client, q, [weather_agent()], store):
        handle = await start_run(client, weather_agent(), "weather?", task_queue=q, run_id=run_id)
        ended = await asyncio.wait_for(outcome(handle), WAIT)
    assert ended.state.phase == "Done"
    assert ended.output is not None and ended.output.text == "Sunny everywhere."
    assert list(store.events(run_id)) == await local_events(weather_agent(), "weather?", run_id)
    stored = store.get(run_id)
    assert stored.info.status == "completed" and stored.info.lease_owner is None


async def run_to_end(
    client: Client, store: SqliteRunStore, agent: Agent, text: str, run_id: str
) -> RunOutcome:
    q = queue()
    async with helikon_worker(client, q, [agent], store):
        handle = await start_run(client, agent, text, task_queue=q, run_id=run_id)
        return await asyncio.wait_for(outcome(handle), WAIT)


async def test_the_worker_runs_workflows_in_the_sandbox(
    client: Client, store: SqliteRunStore, run_id: str
) -> None:
    q = queue()
    worker = helikon_worker(client, q, [weather_agent()], store)
    runner = worker.worker._config["workflow_runner"]
    assert isinstance(runner, SandboxedWorkflowRunner)
    assert "helikon.core" in runner.restrictions.passthrough_modules
    assert "statemachine" in runner.restrictions.passthrough_modules
    for own in ("workflow", "effects", "calls"):  # the workflow's own code, checked
        assert f"helikon.temporal.{own}" not in runner.restrictions.passthrough_modules
    async with worker:
        handle = await start_run(client, weather_agent(), "weather?", task_queue=q, run_id=run_id)
        assert (await asyncio.wait_for(outcome(handle), WAIT)).state.phase == "Done"


async def test_a_worker_refuses_a_run_of_another_chart(
    client: Client, store: SqliteRunStore, run_id: str
) -> None:
    q = queue()
    async with helikon_worker(client, q, [weather_agent()], store):
        request = RunRequest(run_id, "weather", "0" * 64, (UserMessage("hi"),))
        handle = await client.start_workflow(WORKFLOW, to_payload(request), id=run_id, task_queue=q)
        with pytest.raises(WorkflowFailureError) as failed:
            await asyncio.wait_for(handle.result(), WAIT)
    assert "asks for chart 000000000000" in str(failed.value.cause)
    with pytest.raises(RunNotFound):
        store.get(run_id)


async def test_structured_output_is_repaired_once(
    client: Client, store: SqliteRunStore, run_id: str
) -> None:
    ended = await run_to_end(client, store, structured_agent(), "a city", run_id)
    assert ended.output is not None
    assert ended.output.value == {"name": "Oslo", "people": 700000}
    assert ended.usage.requests == 2


async def test_max_turns_fails_the_run(client: Client, store: SqliteRunStore, run_id: str) -> None:
    ended = await run_to_end(client, store, looping_agent(2), "ping", run_id)
    assert ended.state.phase == "Failed"
    assert ended.state.error == MaxTurnsExceeded(2)  # type: ignore[union-attr]
    assert list(store.events(run_id))[-1].type == "run_failed"


async def test_a_handoff_runs_its_target_as_a_child_workflow(
    client: Client, store: SqliteRunStore, run_id: str
) -> None:
    ended = await run_to_end(client, store, triage_agent(), "my bill?", run_id)
    assert ended.output is not None and ended.output.text == "Your bill is 10 EUR."
    child = store.get(f"{run_id}/2")
    assert child.header.agent == "billing" and child.header.parent_run_id == run_id
    assert child.records[0].input.items[0] == UserMessage("my bill?")  # type: ignore[union-attr]
    assert any(e.type == "agent_updated" for e in store.events(run_id))
    streamed = [e async for e in events(store, run_id)]  # the target's events inline
    assert streamed == await local_events(triage_agent(), "my bill?", run_id)


async def test_a_handoff_past_the_depth_limit_ends_as_a_local_run_does(
    client: Client, store: SqliteRunStore, run_id: str
) -> None:
    ended = await run_to_end(client, store, triage_agent(max_agent_depth=0), "bill?", run_id)
    local = await local_events(triage_agent(max_agent_depth=0), "bill?", run_id)
    assert local[-1].type == "run_failed"
    assert ended.state.error == MaxAgentDepthExceeded(0, "billing")  # type: ignore[union-attr]
    assert list(store.events(run_id)) == local
    with pytest.raises(RunNotFound):
        store.get(f"{run_id}/2")  # the target never ran


async def test_an_agent_as_a_tool_is_a_child_workflow_counted_in_the_parent(
    client: Client, store: SqliteRunStore, run_id: str
) -> None:
    ended = await run_to_end(client, store, manager_agent(), "where is Paris?", run_id)
    assert ended.output is not None
    assert ended.output.text == "Paris is in France, says the researcher."
    assert ended.usage.requests == 3  # the manager's two calls and the researcher's one
    child = store.get(f"{run_id}/2:a1")
    assert child.header.agent == "researcher" and child.header.parent_run_id == run_id
    results = [e.item for e in store.events(run_id) if e.type == "tool_output_item"]
    assert [r.content for r in results] == ["Paris is in France."]


async def test_an_agent_as_a_tool_past_the_depth_limit_fails_the_run(
    client: Client, store: SqliteRunStore, run_id: str
) -> None:
    ended = await run_to_end(client, store, manager_agent(max_agent_depth=0), "where?", run_id)
    assert ended.state.phase == "Failed"
    assert ended.state.error == MaxAgentDepthExceeded(0, "researcher")  # type: ignore[union-attr]


async def suspended(
    client: Client, store: SqliteRunStore, q: str, run_id: str
) -> WorkflowHandle[Any, Any]:
    handle = await start_run(client, payments_agent(), "pay", task_queue=q, run_id=run_id)
    seen = [e async for e in events(store, run_id)]
    assert seen[-1].type == "run_suspended"
    return handle


async def test_an_approval_by_update_continues_the_run(
    client: Client, store: SqliteRunStore, run_id: str
) -> None:
    q = queue()
    async with helikon_worker(client, q, [payments_agent()], store):
        handle = await suspended(client, store, q, run_id)
        (request,) = store.pending(run_id)
        now = await current(handle)
        assert (now.phase, now.seq, now.pending) == ("NeedsApproval", request.seq, (request,))
        assert store.get(run_id).info.status == "suspended"
        status = await decide(handle, [request.approve("ok")])
        assert status.phase == "NeedsApproval"  # taken; the run goes on after the update
        ended = await asyncio.wait_for(outcome(handle), WAIT)
        with pytest.raises(RPCError, match="already completed"):
            await decide(handle, [request.approve()])  # spent: the run moved on
    assert ended.output is not None and ended.output.text == "Done."
    results = [e.item.content for e in store.events(run_id) if e.type == "tool_output_item"]
    assert results == ["moved 500"]


@pytest.mark.parametrize(
    "wrong",
    [
        pytest.param(lambda r: replace(r.approve(), arguments_hash="0" * 64), id="other-args"),
        pytest.param(lambda r: replace(r.approve(), call_id="t9"), id="other-call"),
        pytest.param(lambda r: replace(r.approve(), seq=r.seq + 1), id="other-suspension"),
        pytest.param(lambda r: replace(r.approve(), run_id=r.run_id + "x"), id="other-run"),
    ],
)
async def test_an_update_that_does_not_bind_is_refused(
    client: Client, store: SqliteRunStore, run_id: str, wrong: Any
) -> None:
    q = queue()
    async with helikon_worker(client, q, [payments_agent()], store):
        handle = await suspended(client, store, q, run_id)
        (request,) = store.pending(run_id)
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await decide(handle, [wrong(request)])
        assert "ApprovalMismatch" in repr(refused.value.cause)
        assert (await current(handle)).phase == "NeedsApproval"
        await decide(handle, [request.reject("no")])  # the suspension still takes a good one
        ended = await asyncio.wait_for(outcome(handle), WAIT)
    assert ended.output is not None and ended.output.text == "Done."
    results = [e.item for e in store.events(run_id) if e.type == "tool_output_item"]
    assert [r.status for r in results] == ["rejected"]


async def test_a_decision_by_signal_continues_the_run(
    client: Client, store: SqliteRunStore, run_id: str
) -> None:
    q = queue()
    async with helikon_worker(client, q, [payments_agent()], store):
        handle = await suspended(client, store, q, run_id)
        (request,) = store.pending(run_id)
        await handle.signal("decisions", [to_payload(replace(request.approve(), call_id="x"))])
        await handle.signal("decisions", [to_payload(request.approve())])
        ended = await asyncio.wait_for(outcome(handle), WAIT)
    assert ended.output is not None and ended.output.text == "Done."


async def test_cancelling_the_workflow_feeds_cancel_through_the_chart(
    client: Client, store: SqliteRunStore, run_id: str, tmp_path: Path
) -> None:
    marks = tmp_path / "release"
    q = queue()
    async with helikon_worker(client, q, [slow_agent(marks)], store):
        handle = await start_run(client, slow_agent(marks), "go", task_queue=q, run_id=run_id)
        await wait_for_file(tmp_path, "start-b-")
        await only_pending(handle, "2:s1")  # the quick call's completion is recorded
        await handle.cancel(reason="the customer hung up")
        ended = await asyncio.wait_for(outcome(handle), WAIT)
        streamed = [e async for e in events(store, run_id)]
    assert ended.state.phase == "Failed"
    assert ended.state.error == Cancelled("the customer hung up")  # type: ignore[union-attr]
    assert (await handle.describe()).status == WorkflowExecutionStatus.CANCELED
    assert [e.type for e in streamed if e.type in TERMINAL_EVENTS] == ["run_failed"]
    assert streamed[-1].error == Cancelled("the customer hung up")  # type: ignore[union-attr]
    stored = store.get(run_id)
    assert stored.info.status == "failed"
    cancel = stored.records[-1].input
    assert isinstance(cancel, Cancel)
    assert [r.call_id for r in cancel.results] == ["q1"]  # the finished call keeps its result


@pytest.mark.parametrize(
    ("make", "child_id", "call_id"),
    [
        pytest.param(slow_triage, "{}/2", None, id="handoff"),
        pytest.param(slow_manager, "{}/2:a1", "a1", id="agent-as-tool"),
    ],
)
async def test_a_nested_run_cancelled_with_its_parent_ends_canceled_too(
    client: Client,
    store: SqliteRunStore,
    run_id: str,
    tmp_path: Path,
    make: Any,
    child_id: str,
    call_id: str | None,
) -> None:
    """The child ends Canceled; the parent reads its end from the store, and its last
    input is the Cancel (landed on what the child spent), as a local run's: not the
    handoff's result, nor the agent tool's result (the call was cut short)."""
    marks = tmp_path / "release"
    child_id = child_id.format(run_id)
    q = queue()
    async with helikon_worker(client, q, [make(marks)], store):
        handle = await start_run(client, make(marks), "go", task_queue=q, run_id=run_id)
        await wait_for_file(tmp_path, "start-b-")
        await handle.cancel()
        ended = await asyncio.wait_for(outcome(handle), WAIT)
        streamed = [e async for e in events(store, run_id)]
        child = client.get_workflow_handle(child_id)
        nested = await asyncio.wait_for(outcome(child), WAIT)
    assert ended.state.error == Cancelled("cancelled")  # type: ignore[union-attr]
    assert nested.state.error == Cancelled("cancelled")  # type: ignore[union-attr]
    assert (await handle.describe()).status == WorkflowExecutionStatus.CANCELED
    assert (await child.describe()).status == WorkflowExecutionStatus.CANCELED
    assert [e.type for e in streamed if e.type in TERMINAL_EVENTS] == ["run_failed"]
    stored = store.get(run_id)
    assert stored.info.status == "failed" and stored.records[-1].input.kind == "cancel"
    if call_id is not None:  # the agent as a tool: its call has no result
        assert call_id not in [r.call_id for r in stored.records[-1].input.results]
    assert store.get(child_id).info.status == "failed"
    assert not list(tmp_path.glob("end-b-*"))  # the slow call was stopped, not finished


async def test_a_handoff_target_cancelled_alone_leaves_its_parent_completed(
    client: Client, store: SqliteRunStore, run_id: str, tmp_path: Path
) -> None:
    """Only the workflow the server was asked to cancel ends Canceled: a parent whose
    handoff target was cancelled (not the parent) ends `Failed(Cancelled)` by its chart,
    the handoff's result, and completes its workflow."""
    marks = tmp_path / "release"
    q = queue()
    async with helikon_worker(client, q, [slow_triage(marks)], store):
        handle = await start_run(client, slow_triage(marks), "go", task_queue=q, run_id=run_id)
        await wait_for_file(tmp_path, "start-b-")
        child = client.get_workflow_handle(f"{run_id}/2")
        await child.cancel()
        ended = await asyncio.wait_for(outcome(handle), WAIT)
    assert ended.state.error == Cancelled("cancelled")  # type: ignore[union-attr]
    assert (await child.describe()).status == WorkflowExecutionStatus.CANCELED
    assert (await handle.describe()).status == WorkflowExecutionStatus.COMPLETED
    assert store.get(run_id).records[-1].input.kind == "handoff_result"


async def cancel_taken(handle: WorkflowHandle[Any, Any]) -> None:
    """Wait until the workflow has taken the cancel request (a workflow task completed
    after it in its history)."""
    for _ in range(int(WAIT / 0.05)):
        kinds = [e.event_type for e in (await handle.fetch_history()).events]
        if REQUESTED in kinds and TASK_DONE in kinds[kinds.index(REQUESTED) :]:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the workflow did not take the cancel request")


REQUESTED = EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCEL_REQUESTED
TASK_DONE = EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED


class HeldStore(SqliteRunStore):
    """A SQLite store whose write that leaves a run `held` (a step appended, a lease
    released) waits until `gate` exists, writing `gate`'s sibling "holding" first: a
    cancel can land while the workflow's write is held."""

    def __init__(self, path: Path, held: str, gate: Path) -> None:
        super().__init__(path, key=b"temporal-tests-key-0123456789abcd")
        self.held, self.gate = held, gate

    async def _hold(self, status: Any) -> None:
        if status == self.held:
            (self.gate.parent / "holding").write_text(status)
            while not self.gate.exists():
                await asyncio.sleep(0.05)

    async def append(self, *args: Any) -> Any:
        await self._hold(args[-1])
        return await super().append(*args)

    async def release(self, run_id: str, lease: Any, status: Any) -> None:
        await self._hold(status)
        await super().release(run_id, lease, status)


@pytest.mark.parametrize(
    ("make", "held", "status", "ends"),
    [
        pytest.param(weather_agent, "completed", "COMPLETED", ["run_completed"], id="its-end"),
        pytest.param(
            payments_agent,
            "suspended",
            "CANCELED",
            ["run_suspended", "run_failed"],
            id="its-suspension",
        ),
    ],
)
async def test_a_cancel_during_a_write_lets_the_write_land(
    client: Client,
    run_id: str,
    tmp_path: Path,
    make: Any,
    held: str,
    status: str,
    ends: list[str],
) -> None:
    """The run's end is written: a cancel that lands while the workflow writes it is
    swallowed (the run is done; its workflow completes). One that lands while a suspension
    is written stops the run at its next effect (the wait for approval): Canceled."""
    gate = tmp_path / "gate"
    q = queue()
    with HeldStore(tmp_path / "runs.db", held, gate) as store:
        async with helikon_worker(client, q, [make()], store):
            handle = await start_run(client, make(), "go", task_queue=q, run_id=run_id)
            await wait_for_file(tmp_path, "holding")
            await handle.cancel()
            await cancel_taken(handle)  # while the write is held
            gate.write_text("go")
            ended = await asyncio.wait_for(outcome(handle), WAIT)
        assert (await handle.describe()).status == getattr(WorkflowExecutionStatus, status)
        assert [e.type for e in store.events(run_id) if e.type in TERMINAL_EVENTS] == ends
        stored = store.get(run_id)
        assert stored.info.status == ("completed" if ended.state.phase == "Done" else "failed")
        assert stored.info.lease_owner is None
        if ended.state.phase == "Failed":
            assert ended.state.error == Cancelled("cancelled")  # type: ignore[union-attr]


async def test_a_run_a_fatal_tool_error_fails_completes_its_workflow(
    client: Client, store: SqliteRunStore, run_id: str
) -> None:
    """Only a cancelled run ends Canceled: a run that fails another way is the chart's
    decision, and its workflow completes with the failed outcome."""
    q = queue()
    async with helikon_worker(client, q, [fatal_agent()], store):
        handle = await start_run(client, fatal_agent(), "launch", task_queue=q, run_id=run_id)
        ended = await asyncio.wait_for(outcome(handle), WAIT)
        streamed = [e async for e in events(store, run_id)]
    assert ended.state.error.kind == "tool_failed"  # type: ignore[union-attr]
    assert (await handle.describe()).status == WorkflowExecutionStatus.COMPLETED
    assert [e.type for e in streamed if e.type in TERMINAL_EVENTS] == ["run_failed"]
    assert store.get(run_id).info.status == "failed"


async def test_the_run_timeout_holds(
    client: Client, store: SqliteRunStore, run_id: str, tmp_path: Path
) -> None:
    ended = await run_to_end(
        client, store, slow_agent(tmp_path / "never", timeout=2.0), "go", run_id
    )
    assert ended.state.phase == "Failed"
    assert ended.state.error == TimedOut(2.0)  # type: ignore[union-attr]


async def test_a_tool_gets_the_idempotency_key_of_a_local_durable_run(
    client: Client, store: SqliteRunStore, run_id: str, tmp_path: Path
) -> None:
    marks = tmp_path / "release"
    marks.write_text("go")
    ended = await run_to_end(client, store, slow_agent(marks), "go", run_id)
    assert ended.state.phase == "Done"
    (start,) = tmp_path.glob("start-b-*")
    assert start.read_text() == f"{run_id}:2:s1"


async def wait_for_file(folder: Path, prefix: str) -> Path:
    for _ in range(int(WAIT / 0.05)):
        found = sorted(folder.glob(prefix + "*"))
        if found:
            return found[0]
        await asyncio.sleep(0.05)
    raise AssertionError(f"no {prefix}* in {folder}")


async def test_a_run_id_a_local_run_has_taken_fails_the_workflow_and_leaves_it_alone(
    client: Client, store: SqliteRunStore, run_id: str
) -> None:
    local = [e async for e in structured_agent().run("a city", store=store, run_id=run_id)]
    q = queue()
    async with helikon_worker(client, q, [weather_agent()], store):
        handle = await start_run(client, weather_agent(), "weather?", task_queue=q, run_id=run_id)
        with pytest.raises(WorkflowFailureError) as failed:
            await asyncio.wait_for(handle.result(), WAIT)
    assert "another run has this id" in str(failed.value.cause.cause)  # type: ignore[union-attr]
    assert list(store.events(run_id)) == [e for e in local if e.type not in DELTAS]


async def test_a_long_history_continues_as_new_carrying_only_ids_and_seq(
    client: Client, store: SqliteRunStore, run_id: str
) -> None:
    q = queue()
    options = TemporalOptions(continue_after_events=12)
    async with helikon_worker(client, q, [weather_agent()], store, options=options):
        handle = await start_run(client, weather_agent(), "weather?", task_queue=q, run_id=run_id)
        ended = await asyncio.wait_for(outcome(handle), WAIT)
        latest = await handle.describe()
        started = (await handle.fetch_history()).events[0]
    assert ended.output is not None and ended.output.text == "Sunny everywhere."
    assert latest.run_id != handle.first_execution_run_id  # it continued as new
    carried = started.workflow_execution_started_event_attributes.input.payloads[0].data
    request = json.loads(carried)
    assert request["seq"] > 0 and request["input"] == []  # no conversation, no state
    assert list(store.events(run_id)) == await local_events(weather_agent(), "weather?", run_id)


async def test_a_run_on_each_store_backend_reads_like_a_local_run(
    client: Client, backend: Backend, run_id: str
) -> None:
    """SQLite for the workers of one machine, PostgreSQL for many: the same records."""
    store = backend.open()
    q = queue()
    async with helikon_worker(client, q, [manager_agent()], store):
        handle = await start_run(client, manager_agent(), "where?", task_queue=q, run_id=run_id)
        ended = await asyncio.wait_for(outcome(handle), WAIT)
    assert ended.state.phase == "Done"
    reader = backend.open()  # another process, as far as the store can tell
    assert list(reader.events(run_id)) == await local_events(manager_agent(), "where?", run_id)
    assert reader.get(f"{run_id}/2:a1").info.status == "completed"


# ---------------------------------------------------------------- effect phases


def handbook(**effects: Any) -> Agent:
    """charts/retrieve_answer.py's agent, offline (its effect replaced when given)."""
    from charts.retrieve_answer import agent, script
    from helikon import ScriptedModel

    built = agent(ScriptedModel(script()))
    return replace(built, effects=list(effects.values())) if effects else built


async def test_an_effect_phase_runs_as_an_activity_as_it_runs_locally(
    client: Client, store: SqliteRunStore, run_id: str
) -> None:
    from charts.retrieve_answer import EXAMPLE_INPUT

    ended = await run_to_end(client, store, handbook(), EXAMPLE_INPUT, run_id)
    local = SqliteRunStore(":memory:")
    try:
        await handbook().run(EXAMPLE_INPUT, store=local, run_id="local").collect()
        want = [(r.row, r.input) for r in local.get("local").records]
    finally:
        local.close()
    assert ended.state.phase == "Done"
    got = [(r.row, r.input) for r in store.get(run_id).records]
    assert got == want  # the same rows, the retrieve effect's result among the inputs
    assert any(isinstance(inp, EffectResult) and inp.effect == "retrieve" for _, inp in got)


async def test_an_effect_that_raises_fails_the_run_naming_it(
    client: Client, store: SqliteRunStore, run_id: str
) -> None:
    from helikon.run.chart_effects import Effect

    async def broken(context: Any) -> Any:
        raise OSError("the index is down")

    agent = handbook(retrieve=Effect("retrieve", broken))
    ended = await run_to_end(client, store, agent, "travel?", run_id)
    assert ended.state.phase == "Failed"
    assert ended.state.error == EffectFailed(  # type: ignore[union-attr]
        "retrieve", "raised OSError: the index is down"
    )


async def test_an_effect_that_returns_no_json_fails_the_run_naming_it(
    client: Client, store: SqliteRunStore, run_id: str
) -> None:
    from helikon.run.chart_effects import Effect

    async def hostile(context: Any) -> Any:
        return {"passages": float("nan")}  # not JSON: never written, never fed to the chart

    agent = handbook(retrieve=Effect("retrieve", hostile))
    ended = await run_to_end(client, store, agent, "travel?", run_id)
    assert ended.state.phase == "Failed"
    error: Any = ended.state.error  # type: ignore[union-attr]
    assert (error.effect, error.message.startswith("returned")) == ("retrieve", True)
    assert not any(isinstance(r.input, EffectResult) for r in store.get(run_id).records)
