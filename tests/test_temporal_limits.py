"""Guardrails and the shared token budget on Temporal (real dev server)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

pytest.importorskip("temporalio")

from temporal_agents import budget_manager, guarded_agent
from temporalio.client import Client

from helikon import Agent, GuardrailTripped
from helikon.durable import SqliteRunStore
from helikon.temporal import RunOutcome, helikon_worker, outcome, start_run

DELTAS = {"token_delta", "tool_call_delta", "reasoning_delta"}


async def on_temporal(
    address: str, folder: Path, make: Callable[[], Agent], text: str
) -> tuple[RunOutcome, list[object], list[object]]:
    """The run's outcome, its stored events, and the events a local run of a fresh agent
    streams."""
    agent = make()
    run_id, queue = f"r-{uuid.uuid4().hex[:12]}", f"q-{uuid.uuid4().hex[:8]}"
    client = await Client.connect(address)
    with SqliteRunStore(folder / "runs.db", key=b"k" * 32) as store:
        async with helikon_worker(client, queue, [agent], store):
            handle = await start_run(client, agent, text, task_queue=queue, run_id=run_id)
            ended = await asyncio.wait_for(outcome(handle), 60)
        stored = list(store.events(run_id))
    local = [e async for e in make().run(text, run_id=run_id) if e.type not in DELTAS]
    return ended, stored, local


async def test_an_input_guardrail_stops_the_run_before_the_model(
    temporal_address: str, tmp_path: Path
) -> None:
    ended, stored, local = await on_temporal(
        temporal_address, tmp_path, lambda: guarded_agent("fine"), "a forbidden wish"
    )
    assert ended.state.error == GuardrailTripped("no_forbidden", "input", "")  # type: ignore[union-attr]
    assert ended.usage.requests == 0
    assert stored == local


async def test_an_output_guardrail_fails_the_completing_step(
    temporal_address: str, tmp_path: Path
) -> None:
    ended, stored, local = await on_temporal(
        temporal_address, tmp_path, lambda: guarded_agent("the secret is 42"), "tell me"
    )
    assert ended.state.error == GuardrailTripped("no_secret", "output", "")  # type: ignore[union-attr]
    assert [getattr(e, "type", None) for e in stored][-2:] == ["guardrail_triggered", "run_failed"]
    assert stored == local


async def test_an_agent_as_a_tool_gets_only_the_budget_its_root_has_left(
    temporal_address: str, tmp_path: Path
) -> None:
    _, stored, local = await on_temporal(
        temporal_address, tmp_path, lambda: budget_manager(100), "how far?"
    )
    results = [e.item.content for e in stored if getattr(e, "type", "") == "tool_output_item"]  # type: ignore[attr-defined]
    assert len(results) == 1 and results[0].startswith("error: researcher failed:")
    assert "budget" in results[0].lower()
    assert stored == local
