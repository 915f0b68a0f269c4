"""Payloads over Temporal's limit on a real dev server: a tool's result, a model's answer
and an effect's result travel by reference through the run store (a claim check), so an
agent does on Temporal what it does locally; a payload Temporal still refuses is reported
with its cause."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("temporalio")

from store_support import Backend
from temporal_agents import BULK, bulky_agent
from temporalio.client import Client, WorkflowHandle
from temporalio.converter import DataConverter, ExternalStorage

from helikon import Agent
from helikon.core.errors import ModelCallFailed
from helikon.core.items import ToolResult
from helikon.core.state import EffectResult
from helikon.durable import RunStore, SqliteRunStore
from helikon.temporal import (
    CLAIM_THRESHOLD,
    RunOutcome,
    claim_check,
    helikon_worker,
    outcome,
    start_run,
)
from helikon.temporal.payloads import RunStorePayloads

WAIT = 120.0
DELTAS = {"token_delta", "tool_call_delta", "reasoning_delta"}


def ids() -> tuple[str, str]:
    return f"r-{uuid.uuid4().hex[:12]}", f"q-{uuid.uuid4().hex[:8]}"


async def on_temporal(
    address: str, store: RunStore, agent: Agent, text: str = "go"
) -> tuple[RunOutcome, WorkflowHandle[Any, Any]]:
    """A run of `agent` to its end, read by a client with the claim check."""
    run_id, queue = ids()
    client = claim_check(await Client.connect(address), store)
    async with helikon_worker(client, queue, [agent], store):
        handle = await start_run(client, agent, text, task_queue=queue, run_id=run_id)
        return await asyncio.wait_for(outcome(handle), WAIT), handle


async def local_events(agent: Agent, run_id: str, text: str = "go") -> list[Any]:
    return [e async for e in agent.run(text, run_id=run_id) if e.type not in DELTAS]


async def largest_payload(handle: WorkflowHandle[Any, Any]) -> int:
    """The bytes of the largest event of the workflow's history."""
    history = await handle.fetch_history()
    return max(event.ByteSize() for event in history.events)


async def test_the_driver_keeps_a_payload_with_its_workflows_run_and_reads_it_verified(
    tmp_path: Path,
) -> None:
    from temporalio.api.common.v1 import Payload
    from temporalio.converter import (
        StorageDriverClaim,
        StorageDriverRetrieveContext,
        StorageDriverStoreContext,
        StorageDriverWorkflowInfo,
    )

    from helikon.durable import StoreError

    payload = Payload(metadata={"encoding": b"json/plain"}, data=b'"' + b"x" * 300_000 + b'"')
    run = StorageDriverStoreContext(StorageDriverWorkflowInfo(namespace="default", id="r1"))
    nobody = StorageDriverStoreContext(target=None)
    with SqliteRunStore(tmp_path / "runs.db", key=b"k" * 32) as store:
        driver = RunStorePayloads(store)
        (claim,) = await driver.store(run, [payload])
        assert claim.claim_data["run_id"] == "r1"
        assert await driver.retrieve(StorageDriverRetrieveContext(), [claim]) == [payload]
        with pytest.raises(StoreError, match="for no workflow"):
            await driver.store(nobody, [payload])
        hostile = StorageDriverClaim({"sha256": claim.claim_data["sha256"]})
        with pytest.raises(StoreError, match="names no run"):
            await driver.retrieve(StorageDriverRetrieveContext(), [hostile])


async def test_a_client_keeps_the_external_storage_it_has(
    temporal_address: str, tmp_path: Path
) -> None:
    with SqliteRunStore(tmp_path / "runs.db", key=b"k" * 32) as store:
        checked = claim_check(await Client.connect(temporal_address), store)
        storage = checked.data_converter.external_storage
        assert storage is not None and storage.payload_size_threshold == CLAIM_THRESHOLD
        assert claim_check(checked, store) is checked  # not stacked


async def test_a_large_tool_result_reaches_the_model_whole_and_the_tool_runs_once(
    temporal_address: str, backend: Backend
) -> None:
    ran: list[str] = []
    agent = bulky_agent(ran)
    store = backend.open()
    ended, handle = await on_temporal(temporal_address, store, agent)
    assert ran == ["dump"]
    assert ended.output is not None and ended.output.text == "Dumped."
    seen = [i for i in agent.model.requests[1].items if isinstance(i, ToolResult)]  # type: ignore[attr-defined]
    assert [(r.content == "x" * BULK, r.is_error) for r in seen] == [(True, False)]
    assert list(store.events(handle.id)) == await local_events(bulky_agent(), handle.id)
    assert await largest_payload(handle) < CLAIM_THRESHOLD  # references, not the bytes


async def test_a_large_model_answer_ends_the_run_as_it_ends_locally(
    temporal_address: str, tmp_path: Path
) -> None:
    answer = "y" * BULK
    with SqliteRunStore(tmp_path / "runs.db", key=b"k" * 32) as store:
        ended, handle = await on_temporal(temporal_address, store, bulky_agent(answer=answer))
        stored = list(store.events(handle.id))
    assert ended.output is not None and ended.output.text == answer
    assert stored == await local_events(bulky_agent(answer=answer), handle.id)
    assert await largest_payload(handle) < CLAIM_THRESHOLD


def handbook(fn: Any) -> Agent:
    """charts/retrieve_answer.py's agent, offline, its retrieve effect `fn` (not
    idempotent: run once, or the run fails interrupted)."""
    from charts.retrieve_answer import agent, script
    from helikon import ScriptedModel
    from helikon.run.chart_effects import Effect

    return replace(agent(ScriptedModel(script())), effects=[Effect("retrieve", fn)])


async def test_a_large_effect_result_is_fed_to_the_chart_as_it_is_locally(
    temporal_address: str, tmp_path: Path
) -> None:
    from charts.retrieve_answer import EXAMPLE_INPUT

    ran: list[str] = []

    async def retrieve(context: Any) -> Any:
        ran.append(context.idempotency_key)
        return {"passages": [{"topic": "travel", "text": "z" * BULK}]}

    with SqliteRunStore(tmp_path / "runs.db", key=b"k" * 32) as store:
        ended, handle = await on_temporal(
            temporal_address, store, handbook(retrieve), EXAMPLE_INPUT
        )
        got = [(r.row, r.input) for r in store.get(handle.id).records]
    with SqliteRunStore(":memory:") as local:
        await handbook(retrieve).run(EXAMPLE_INPUT, store=local, run_id="local").collect()
        want = [(r.row, r.input) for r in local.get("local").records]
    assert ended.state.phase == "Done"
    assert len(ran) == 2  # once on Temporal, once locally
    assert got == want
    results = [inp for _, inp in got if isinstance(inp, EffectResult)]
    assert [len(r.output["passages"][0]["text"]) for r in results] == [BULK]  # type: ignore[index, call-overload]


async def without_claim_check(
    address: str, store: RunStore, agent: Agent, text: str = "go"
) -> RunOutcome:
    """A run of `agent` to its end on a worker whose client has an external storage of
    its own that keeps nothing under 64 MiB, so Temporal refuses a payload over its limit."""
    run_id, queue = ids()
    storage = ExternalStorage(drivers=[RunStorePayloads(store)], payload_size_threshold=1 << 26)
    converter = DataConverter(external_storage=storage)
    client = await Client.connect(address, data_converter=converter)
    async with helikon_worker(client, queue, [agent], store):
        handle = await start_run(client, agent, text, task_queue=queue, run_id=run_id)
        return await asyncio.wait_for(outcome(handle), WAIT)


async def test_a_tool_result_temporal_refuses_is_reported_with_its_cause(
    temporal_address: str, tmp_path: Path
) -> None:
    """The model is told that Temporal refused the result, not that the call was
    interrupted (its worker lost)."""
    ran: list[str] = []
    agent = bulky_agent(ran)
    with SqliteRunStore(tmp_path / "runs.db", key=b"k" * 32) as store:
        ended = await without_claim_check(temporal_address, store, agent)
    assert ran == ["dump"] and ended.state.phase == "Done"
    (seen,) = [i for i in agent.model.requests[1].items if isinstance(i, ToolResult)]  # type: ignore[attr-defined]
    assert seen.is_error and seen.content.startswith("error: the call failed: ")
    assert "PayloadsTooLarge" in seen.content and "interrupted" not in seen.content


async def test_an_effect_result_temporal_refuses_fails_the_run_with_its_cause(
    temporal_address: str, tmp_path: Path
) -> None:
    from charts.retrieve_answer import EXAMPLE_INPUT

    async def retrieve(context: Any) -> Any:
        return {"passages": [{"topic": "travel", "text": "z" * BULK}]}

    with SqliteRunStore(tmp_path / "runs.db", key=b"k" * 32) as store:
        ended = await without_claim_check(
            temporal_address, store, handbook(retrieve), EXAMPLE_INPUT
        )
    error: Any = ended.state.error  # type: ignore[union-attr]
    assert (error.effect, error.interrupted) == ("retrieve", False)
    assert error.message.startswith("failed: ") and "PayloadsTooLarge" in error.message


async def test_a_model_answer_temporal_refuses_fails_the_run_with_its_cause(
    temporal_address: str, tmp_path: Path
) -> None:
    """Not retried (the model called again, its answer refused again): the run fails,
    saying why."""
    agent = bulky_agent(answer="y" * BULK, size=10)
    with SqliteRunStore(tmp_path / "runs.db", key=b"k" * 32) as store:
        ended = await without_claim_check(temporal_address, store, agent)
    error: Any = ended.state.error  # type: ignore[union-attr]
    assert isinstance(error, ModelCallFailed) and error.reason == "bad_response"
    assert "PayloadsTooLarge" in error.message
    assert len(agent.model.requests) == 2  # type: ignore[attr-defined]
