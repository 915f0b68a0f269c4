"""A rolling deploy: workers of two releases serve one task queue, so a run's request
(`RunRequest`) may be written by one release and read by the other (a nested run's child
workflow, started by a parent on one worker, runs on whichever worker takes it).

`RunRequest.timeout` is the field this release added. A worker of the previous release
reads a request that carries it, ignoring the field (its nested run then fails `TimedOut`
with its agent's own timeout, as before); a worker of this release reads a request without
it as `None`, and takes the agent's own timeout. Any field a worker does not know is read so.
On a real dev server: a request as the previous release writes it, and one with a field of a
later release, each run by this release's worker.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("temporalio")

from temporal_agents import weather_agent
from temporalio.client import Client

from helikon import TimedOut
from helikon.core.items import UserMessage
from helikon.core.values import value
from helikon.durable import SqliteRunStore
from helikon.temporal import RunOutcome, RunRequest, helikon_worker, outcome
from helikon.temporal.client import chart_of
from helikon.temporal.messages import WORKFLOW, from_payload, to_payload

WAIT = 60.0


@value
class PreviousRunRequest:
    """`RunRequest` as the previous release read it: every field but `timeout`."""

    run_id: str
    agent: str
    chart: str = ""
    input: tuple[Any, ...] = ()
    seq: int = 0
    depth: int = 0
    parent_run_id: str | None = None
    from_parent: bool = False
    token_budget: int | None = None
    deadline: float = 0.0
    task_queue: str = ""


def a_request(**fields: Any) -> RunRequest:
    return RunRequest("r1", "weather", "c" * 64, (UserMessage("hi"),), depth=1, **fields)


def test_the_previous_release_reads_a_request_with_a_timeout_without_it() -> None:
    data = to_payload(a_request(deadline=1e9, timeout=2.0))
    assert data["timeout"] == 2.0
    read = from_payload(PreviousRunRequest, data, "the workflow's input")
    assert (read.run_id, read.depth, read.deadline) == ("r1", 1, 1e9)


def test_this_release_reads_a_request_without_a_timeout_as_none() -> None:
    data = to_payload(a_request())
    del data["timeout"]
    assert from_payload(RunRequest, data, "the workflow's input") == a_request(timeout=None)


def test_a_field_of_a_later_release_is_ignored() -> None:
    data = {**to_payload(a_request(timeout=2.0)), "from_a_later_release": [1, 2]}
    assert from_payload(RunRequest, data, "the workflow's input") == a_request(timeout=2.0)


# ---------------------------------------------------------------- on a real dev server


@pytest.fixture
async def client(temporal_address: str) -> Client:
    return await Client.connect(temporal_address)


async def run_request(client: Client, store: SqliteRunStore, data: dict[str, Any]) -> RunOutcome:
    """Run the request `data` (JSON data, as a worker of any release may write it) on a
    worker of this release serving a weather agent whose own timeout is 30 s."""
    queue = f"q-{uuid.uuid4().hex[:8]}"
    agent = weather_agent(timeout=30.0)
    data = {**data, "agent": agent.name, "chart": chart_of(agent), "task_queue": queue}
    async with helikon_worker(client, queue, [agent], store):
        handle = await client.start_workflow(WORKFLOW, data, id=data["run_id"], task_queue=queue)
        return await asyncio.wait_for(outcome(handle), WAIT)


def past_its_deadline(run_id: str) -> dict[str, Any]:
    """A request whose run's deadline passed a second ago: the run times out at its first
    model call."""
    data: dict[str, Any] = to_payload(
        RunRequest(run_id, "weather", input=(UserMessage("hi"),), deadline=time.time() - 1)
    )
    return data


async def test_a_request_of_the_previous_release_takes_the_agents_own_timeout(
    client: Client, tmp_path: Path
) -> None:
    data = past_its_deadline(f"t-{uuid.uuid4().hex[:12]}")
    del data["timeout"]
    with SqliteRunStore(tmp_path / "runs.db", key=b"k" * 32) as store:
        ended = await run_request(client, store, data)
    assert ended.state.phase == "Failed"
    assert ended.state.error == TimedOut(30.0)  # type: ignore[union-attr]


async def test_a_request_with_a_timeout_and_a_later_field_runs_with_that_timeout(
    client: Client, tmp_path: Path
) -> None:
    data = past_its_deadline(f"t-{uuid.uuid4().hex[:12]}")
    data |= {"timeout": 2.0, "from_a_later_release": True}
    with SqliteRunStore(tmp_path / "runs.db", key=b"k" * 32) as store:
        ended = await run_request(client, store, data)
    assert ended.state.phase == "Failed"
    assert ended.state.error == TimedOut(2.0)  # type: ignore[union-attr]
