"""Runs on a real Temporal dev server (`temporal_address`): the default chart's paths as a
workflow, its records in the run store read like a local run's."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("temporalio")

from temporal_agents import weather_agent
from temporalio.client import Client

from helikon import Agent
from helikon.durable import SqliteRunStore
from helikon.temporal import helikon_worker, outcome, start_run

WAIT = 60.0
DELTAS = {"token_delta", "tool_call_delta", "reasoning_delta"}


@pytest.fixture
async def client(temporal_address: str) -> Client:
    return await Client.connect(temporal_address)


@pytest.fixture
def store(tmp_path: Path) -> AsyncIterator[SqliteRunStore]:
    with SqliteRunStore(tmp_path / "runs.db", key=b"temporal-tests-key-0123456789abcd") as store:
        yield store


def queue() -> str:
    return f"q-{uuid.uuid4().hex[:8]}"


async def local_events(agent: Agent, text: str) -> list[Any]:
    return [e for e in [e async for e in agent.run(text, run_id="r1")] if e.type not in DELTAS]


async def test_a_run_with_tools_streams_what_a_local_run_streams(
    client: Client, store: SqliteRunStore
) -> None:
    q = queue()
    async with helikon_worker(client, q, [weather_agent()], store):
        handle = await start_run(client, weather_agent(), "weather?", task_queue=q, run_id="r1")
        ended = await asyncio.wait_for(outcome(handle), WAIT)
    assert ended.state.phase == "Done"
    assert ended.output is not None and ended.output.text == "Sunny everywhere."
    assert list(store.events("r1")) == await local_events(weather_agent(), "weather?")
    stored = store.get("r1")
    assert stored.info.status == "completed" and stored.info.lease_owner is None
